/* What a gate's filters (--only-case, --only-band, --only-shape, --shard)
 * and --inject select must be something: a name that matches nothing is an
 * error naming it, with "did you mean", before any case runs; a run whose
 * filters together selected no case, or whose every row compared nothing
 * (all UNSUPPORTED), is an error after it, never "gate PASSED: 0 rows". */
#ifndef KR_GATE_SELECTION_H
#define KR_GATE_SELECTION_H

#include <stddef.h>
#include <stdint.h>

#include "gate.h"
#include "kr_error.h"
#include "suite.h"

/* The shapes and bands of the cases a run has seen (synthetic cases from
 * the plan, file cases once read), for the message of an empty selection. */
typedef struct {
    char shapes[1024];   /* "48x5120, 96x5120, ..." */
    char bands[128];     /* "decode, prefill" */
} gate_seen_t;

void gate_seen_add(gate_seen_t *seen, int64_t N, int64_t K, const char *band);

/* --only-band: one of the suite's band names (or "none", the band of an M
 * no band holds); else -1 with err, and "did you mean". */
int gate_check_only_band(const suite_t *s, const char *band, kr_error_t *err);

/* --only-shape "NxK" into *N, *K; else -1 with err.  A suite of synthetic
 * cases alone must have the shape among them (file cases are known only
 * when read: gate_check_selected checks them after). */
int gate_check_only_shape(const suite_t *s, const char *shape, int64_t *N, int64_t *K, kr_error_t *err);

/* --only-case: the name of one of the n cases (name_at gives case i's
 * name into buf); else -1 with err, and "did you mean". */
int gate_check_only_case(const char *name, int64_t n,
                         void (*name_at)(const void *ctx, int64_t i, char *buf, size_t cap), const void *ctx,
                         kr_error_t *err);

/* After the run: -1 with err when it selected no case (naming the filters
 * and what the suite's cases are), or when every row is UNSUPPORTED. */
int gate_check_selected(const gate_options_t *o, const char *suite_name, int64_t cases, const gate_seen_t *seen,
                        const result_list_t *rows, kr_error_t *err);

#endif
