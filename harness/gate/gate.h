/* The nightly gate: a suite's cases through its kernels, judged by its
 * policy, stored as a results file, compared with a baseline.
 *
 * A run directory holds results.h5 (every row and the run's provenance),
 * results.json, results.csv, report.md, and partial/ (one file per finished
 * case, so a killed run keeps its work and --resume finishes it). */
#ifndef KR_GATE_H
#define KR_GATE_H

#include <stdint.h>

#include "kr_error.h"
#include "result.h"
#include "results_store.h"

typedef struct {
    const char *suite_path;
    const char *run_dir;
    const char *baseline_path;  /* compare with this results file, or NULL */
    int baseline_init;          /* a missing baseline_path is created from this run */
    const char *junit_path;     /* write JUnit XML here, or NULL */
    const char *policy_path;    /* overrides the suite's policy, or NULL */
    const char *history_dir;    /* keep a copy of results.h5 here, or NULL */
    const char *only_shape;     /* "NxK": run only the cases of this shape, or NULL */
    const char *only_band;      /* run only the cases of this M band (the suite's names), or NULL */
    const char *only_case;      /* run only the case of this name (a row's case_name), or NULL */
    const char *kernels;        /* kernel globs replacing the suite's, or NULL */
    const char *inject;         /* "[KERNELS=]FAULT": a deliberately faulty kernel, or NULL */
    const char *device;         /* "cpu" | "gpu": overrides the suite's device, or NULL */
    const char *gpus;           /* --gpus LIST: the GPUs the cases spread over, or NULL (all) */
    const char *model_rows;     /* --model-rows N|all, or NULL (the default) */
    long long seed_first, seed_last;   /* > 0: every synthetic item uses these seeds instead */
    int shard_index;            /* 1-based; 0 = unsharded */
    int shard_count;
    int resume;
    int force;                  /* RUNDIR may hold another run (run_dir_check.h): replaced */
    const char *options_fingerprint; /* the row-changing options, canonical (cli_run_options.h); NULL: none */
    int allow_missing;          /* baseline rows absent from the run do not fail it */
    int baseline_other_suite;   /* compare with a baseline of another suite all the same */
    int threads;
    int progress;               /* a progress line on stderr */
    const char *command;        /* for provenance */
    const char *version;        /* kreplay version, for provenance */
    const char *git_commit;     /* kreplay's commit, for provenance */
} gate_options_t;

typedef struct {
    int64_t cases_planned, cases_run, cases_resumed, input_errors;
    int64_t rows, failing, regressed, improved;
    int64_t new_rows, missing;  /* against the baseline: rows it lacks, and its rows this run lacks */
    int baseline_failed;        /* regressed, or missing rows without allow_missing */
    result_list_t missing_rows; /* copies of the MISSING baseline rows (gate_summary_free) */
    result_list_t added_rows;   /* copies of the NEW run rows (gate_summary_free) */
    double seconds;
    char failed_keys[16][512];  /* the first cases that could not be read */
    int n_failed_keys;
    int baseline_created;       /* --baseline-init wrote baseline_path from this run */
    int64_t rejudged;           /* resumed rows judged again because the policy changed */
} gate_summary_t;

/* Runs the gate and writes RUNDIR/results.h5 (and the history copy).  The
 * judged rows (baseline regressions marked) and the provenance come back in
 * *rows and *meta for the caller's reports.  Returns 0 when it ran (the
 * caller exits 1 when sum->failing or sum->baseline_failed), -1 with err on a
 * usage or input error (bad suite or policy, unreadable case, unwritable
 * run directory); rows of the cases that did run are still returned. */
int gate_run(const gate_options_t *o, result_list_t *rows, results_meta_t *meta,
             gate_summary_t *sum, kr_error_t *err);

void gate_summary_free(gate_summary_t *sum);

/* The shapes a suite covers, one "NxK bands=... families=..." line each,
 * each followed by one "NxK band=B families=..." line per band, for ctest's
 * per-shape x band nightly tests.  Families are those of the suite's kernels
 * that can run some case of the shape (x band). */
int gate_list_shapes(const char *suite_path, kr_error_t *err);

#endif
