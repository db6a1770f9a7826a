/* The production shape catalogue (cases/shapes.csv): named (N, K) pairs
 * with the weight format and the layer's role, so synth, compare and suites
 * can say "mlp_down" instead of "5120x8704" -- the two N=5120 layers are
 * told apart only by K. */
#ifndef KR_SHAPE_CATALOG_H
#define KR_SHAPE_CATALOG_H

#include <stdint.h>

#include "kr_error.h"

typedef struct {
    char name[48];
    int64_t N, K;
    char weight[16];        /* "mxfp4" or "bf16" */
    char role[160];
} shape_t;

typedef struct {
    shape_t *shapes;
    int count;
} shape_catalog_t;

/* Reads a catalogue CSV (lines "name,N,K,weight,role"; '#' comments). */
int shape_catalog_load(const char *path, shape_catalog_t *cat, kr_error_t *err);
void shape_catalog_free(shape_catalog_t *cat);

/* The default catalogue path: $KREPLAY_SHAPES, else cases/shapes.csv of the installed
 * tree beside the binary, else of the source tree (data_path.h). */
const char *shape_catalog_default_path(void);

/* Resolves a comma-separated list of shape names, "NxK" pairs, or the whole
 * catalogue by "production"/"all", into shapes (a "NxK" not in the catalogue
 * gets the name "NxK" and weight mxfp4).  Returns the count, or -1 with err. */
int shape_catalog_resolve(const shape_catalog_t *cat, const char *spec, shape_t *out, int cap,
                          kr_error_t *err);

#endif
