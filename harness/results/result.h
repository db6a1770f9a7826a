/* result_t: one row of a run, a (case, kernel, reference) triple with every
 * metric and its verdict.  A run is a result_list_t. */
#ifndef KR_RESULT_H
#define KR_RESULT_H

#include <stdint.h>

#include "metrics.h"

/* Dispositions (README.md, "Verdicts").  Later ones are produced by later components
 * (GPU reruns, isolation, baselines) and listed here so every writer knows
 * them. */
typedef enum {
    VERDICT_PASS = 0,
    VERDICT_WRONG,            /* error over threshold */
    VERDICT_MAGNITUDE,        /* |out|/|ref| far from 1: a scale or layout bug */
    VERDICT_NONFINITE_OUT,    /* non-finite output from finite input */
    VERDICT_POISONED_INPUT,   /* the input itself is non-finite */
    VERDICT_NONDETERMINISTIC, /* reruns differ */
    VERDICT_MODEL_MISMATCH,   /* kernel differs from its own model */
    VERDICT_OOB_WRITE,
    VERDICT_CRASHED,
    VERDICT_TIMEOUT,
    VERDICT_UNSUPPORTED,      /* the kernel cannot run this shape or case */
    VERDICT_REGRESSED,
    VERDICT_ERROR,            /* the harness could not compute the row */
    VERDICT_COUNT
} verdict_t;

const char *verdict_name(verdict_t v);
/* Does this verdict fail a replay (exit code 1)? */
int verdict_is_failure(verdict_t v);

/* Who is at fault, in a row's diagnosis (result_t.diag_party, set by
 * harness/judge/diag_party.h) and in a case's headline
 * (reports/case_headline.h). */
typedef enum {
    PARTY_NONE = 0,
    PARTY_KERNEL,       /* the kernel that made the output */
    PARTY_INPUT,        /* the case's input: its values, or how the case labels them */
    PARTY_REFERENCE,    /* the reference the output was compared with */
    PARTY_COUNT
} party_t;

/* "", "kernel", "input", "reference". */
const char *party_name(party_t p);
/* The party of a name; PARTY_NONE for "" or a name it does not know. */
party_t party_from_name(const char *name);

/* M bands of the production dispatch. */
const char *m_band_name(int64_t M);   /* "decode" 1-64, "mid" 65-255, "prefill" 256-2047, "tiled" >= 2048 */

/* The accumulation-precision fit of an R_exact row (diagnosis/acc_fit.h):
 * the output against the fp32-accumulation model and against the best and
 * second-best models that round their partial sums to bf16 or fp16, on a
 * sample of outputs. */
typedef struct {
    char model[24];            /* the best such model ("bf16-k32"); "" = not measured */
    char runner_up[24];
    double resid_fp32, resid_best, resid_runner_up;
    int64_t sampled;           /* outputs compared; 0 = not measured */
    /* The fp32 summation bound (diagnosis/fp32_bound.h): outputs checked
     * against what any fp32 summation order of the kernel's operands gives,
     * how many lie outside, and the first of those (row, column, output,
     * and the interval [lo, hi] it should be in). */
    int64_t bound_checked, bound_outside, bound_row, bound_col;
    double bound_out, bound_lo, bound_hi;
} acc_fit_t;

typedef struct {
    char case_path[512];
    char case_name[128];
    char case_id[17];         /* digest of the case's operands (case_identity.h): with
                                 case_name, what a baseline matches rows by ("" = unknown) */
    int64_t M, N, K;
    char band[16];
    char kernel[64];          /* kernel name, or "recorded.out" / "recorded.out_rerun" / "recorded.aiter" */
    char reference[32];       /* "R_exact", "R_source", "out_rerun" */
    char act_origin[96];      /* where the kernel's activations came from */
    metrics_t metrics;
    ulp_stats_t ulp;          /* output vs the reference rounded to bf16 (or vs the other output) */
    nonfinite_t input_nf;     /* non-finite elements of the activations the case holds */
    double threshold;         /* on metrics.rel_fro */
    verdict_t verdict;
    char note[512];           /* why the verdict, in one line */
    double seconds;           /* wall time of the kernel model */
    double ref_f32_vs_f64;    /* --oracle: rel_fro of the fp32 reference against the fp64
                                 oracle on the same operands; NaN when not computed */
    char diagnosis[384];      /* for a failing row: the explanation the output matches, or what
                                 is known for certain */
    int64_t diagnosis_checked; /* 1: the diagnosis is a checked claim (diagnose.h) */
    char diagnosis_family[24];  /* the diagnosis's family as a short stable token
                                   (diag_family.h: "magnitude", "place:rows", "misread", ...;
                                   "" = no diagnosis): what `kreplay reduce` keeps */
    acc_fit_t acc_fit;        /* R_exact rows: how the kernel accumulates (judged) */
    char device[48];          /* "cpu", or the GPU that ran the kernel */
    int reruns;               /* GPU: runs compared bitwise (0 on the CPU) */
    int64_t rerun_diff;       /* GPU: elements that differed between reruns */
    int canary_ok;            /* GPU: guard canaries intact (1), broken (0); -1 not checked */
    double time_ms;           /* GPU: median kernel time; NaN when not timed */
    double tflops, gbps;      /* GPU: from time_ms */
    char out_digest[17];      /* 64-bit FNV-1a of the output's bf16 bits, hex: a baseline
                                 sees any change of a bit-faithful output ("" = none) */
    /* What a reader needs without parsing the note or the diagnosis line
     * (the case headline, reports/case_headline.h; the report's regression
     * columns): */
    char diag_party[12];      /* the party the diagnosis blames (party_name: "kernel", "input",
                                 "reference"; harness/judge/diag_party.h); "" = no diagnosis */
    char poison_where[160];   /* where the case's non-finite inputs are, as inspect names the
                                 block ("x: rows 0-16 x columns 1024-1151 (...)"); "" = none */
    char regressed_metric[24];/* REGRESSED: the first finding of the baseline comparison
                                 ("rel_fro", "identical_frac", "out_digest", ...); "" = none */
    double regressed_base;    /* that metric in the baseline and in this run (NaN: not a */
    double regressed_run;     /* number, e.g. a digest) */
} result_t;

typedef struct {
    result_t *rows;
    int64_t count, cap;
} result_list_t;

/* The out_digest of an array of bf16 bits. */
void bf16_digest(const uint16_t *bits, int64_t n, char out[17]);
/* The same digest taken in pieces: start from BF16_DIGEST_SEED, feed
 * consecutive blocks of the row-major array in order, then format. */
#define BF16_DIGEST_SEED 0xcbf29ce484222325ull
uint64_t bf16_digest_update(uint64_t state, const uint16_t *bits, int64_t n);
void bf16_digest_format(uint64_t state, char out[17]);

/* Appends a zeroed row and returns it (NULL on allocation failure). */
result_t *result_list_add(result_list_t *l);
void result_list_free(result_list_t *l);

#endif
