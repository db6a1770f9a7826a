/* Suites: what one nightly gate run replays (cases/suites/NAME.yaml; the format
 * is documented with examples in cases/suites/README.md).
 *
 *     suite: default                      # required
 *     description: "..."                  # optional
 *     cases:                              # required, a non-empty list of
 *       - files: ["../samples/NAME.h5"]   #   globs relative to the suite file's directory
 *       - synth:                          #   synthetic cases (harness/case/synth.h)
 *           shapes: [gdn_in_proj_ba_tp2, 5120x3072]   # catalogue names, NxK, "production"
 *           m: [1, 17, 64, 300]
 *           seeds: [1, 2]                 # default [1]
 *           outliers: 4                   # optional synth_params_t fields
 *     kernels: ["w4a8.*"]                 # optional globs, default all
 *     python: ["kernels.py:w4a8"]         # optional Python kernels (--py), run beside them;
 *                                         #   a .py path is relative to the suite's directory
 *     references: [exact, source]         # optional, default both
 *     bands: {decode: [1, 64], tiled: [2048, null]}   # optional, replaces the default bands
 *     reruns: 3                           # optional, default 3
 *     device: cpu                         # cpu | gpu, default cpu
 *     policy: ../policies/default.yaml    # optional, relative to the suite file
 *
 * suite_load refuses a bad suite with ONE line, "PATH:LINE: what is wrong;
 * expected what" (LINE 1-based): unknown keys anywhere, wrong types, a
 * missing required key, a kernel glob matching no registry kernel, an
 * unknown shape, a glob matching no file, a missing policy file, YAML syntax
 * errors.  The CLI prints it and exits 2. */
#ifndef KR_SUITE_H
#define KR_SUITE_H

#include <stddef.h>
#include <stdint.h>

#include "kr_error.h"
#include "shape_catalog.h"
#include "synth.h"

#define SUITE_MAX_BANDS 8
#define SUITE_MAX_LIST 64       /* m values, seeds, shapes of one synth item */
/* Cases of one suite (files + every sweep): the run plan holds about 600
 * bytes per case, so this bounds it near 150 MiB, refused before planning. */
#define SUITE_MAX_CASES 262144
#define SUITE_MAX_PYTHON 8      /* python: kernels (py_kernels.h's limit) */

typedef struct {
    char name[16];              /* decode | mid | prefill | tiled */
    int64_t lo, hi;             /* inclusive; hi 0 = unbounded */
} band_t;

/* One `- synth:` item: the cases are shapes x m x seeds, each made by
 * synth_case from `base` (see suite_synth_params). */
typedef struct {
    synth_params_t base;        /* defaults + the item's optional fields; M, N, K, seed unset */
    int weight_format_given;    /* 0: each shape's catalogue weight decides (mxfp4 -> mxfp4, bf16 -> both) */
    char shapes[512];           /* the shape specs as written, comma-joined */
    shape_t *shape_list;        /* resolved ("production" expanded), n_shapes of them */
    int n_shapes;
    long long m[SUITE_MAX_LIST];
    int n_m;
    long long seeds[SUITE_MAX_LIST];
    int n_seeds;
    int line;                   /* of the synth: key, for messages */
} suite_synth_t;

typedef struct {
    char *path;                 /* as given to suite_load */
    char *name;
    char *description;          /* "" when absent */
    char **files;               /* resolved, sorted, deduplicated case paths from all globs */
    int n_files;
    suite_synth_t *synth;
    int n_synth;
    char kernels[512];          /* comma-joined globs for kernel_name_matches; "" = all */
    char python[SUITE_MAX_PYTHON][512]; /* `python:` MODULE:FUNCTION specs, .py paths resolved */
    int n_python;
    unsigned refs;              /* REF_EXACT | REF_SOURCE */
    band_t bands[SUITE_MAX_BANDS];
    int n_bands;
    int reruns;
    char device[8];             /* "cpu" | "gpu" */
    char *policy_path;          /* resolved against the suite's directory, or NULL */
    char hash[17];              /* 64-bit FNV-1a of the file bytes, hex: provenance */
} suite_t;

/* Loads and validates a suite.  Returns 0, or -1 with err (and *s zeroed).
 * Paths: `files` globs and `policy` are relative to the suite file's
 * directory (absolute ones are kept); results are cleaned lexically
 * ("a/./b/../c" -> "a/c"), so "cases/suites/../samples/x.h5" is stored as
 * "cases/samples/x.h5".  A glob that matches a directory takes its *.h5
 * files.  Shapes are resolved in shape_catalog_default_path(). */
int suite_load(const char *path, suite_t *s, kr_error_t *err);
/* The same from bytes in memory; NAME stands for the path (and its
 * directory anchors relative globs).  For tests and the fuzzer. */
int suite_load_bytes(const char *name, const char *bytes, size_t len, suite_t *s, kr_error_t *err);
void suite_free(suite_t *s);

/* The band of M: the first band with lo <= M <= hi (hi 0 = unbounded), or
 * "none" when the suite's bands leave M out. */
const char *suite_band_of(const suite_t *s, int64_t M);

/* Number of synthetic cases of one item: n_shapes x n_m x n_seeds. */
int64_t suite_synth_count(const suite_synth_t *ss);
/* Every case of the suite: files + the sweeps' cases. */
int64_t suite_case_count(const suite_t *s);
/* -1 with err naming SUITE_MAX_CASES and the count when the suite has more
 * cases than that (suite_load checks it; the gate again after --seeds). */
int suite_check_case_count(const suite_t *s, kr_error_t *err);
/* The synth_params_t of case i of an item (0 <= i < suite_synth_count),
 * ordered shape-major, then m, then seed: M, N, K, seed, the weight format
 * (given, or from the shape's catalogue weight) and layer = the shape's name
 * (a pointer into *ss, valid while the suite lives).  Returns 0 or -1. */
int suite_synth_params(const suite_synth_t *ss, int64_t i, synth_params_t *p);

/* Lexical path cleaning ("a/./b/../c" -> "a/c", "./x" -> "x"); in place. */
void suite_clean_path(char *path);

#endif
