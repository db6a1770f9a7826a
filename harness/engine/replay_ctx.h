/* The replay's per-case state and the helpers its parts share.  Private to
 * harness/engine.  The parts, each calling only those below it:
 *   replay.c           the case: its plan, the kernels walked, row blocks
 *   replay_kernel.c    one kernel (a quantizer, a GEMM, the --vs model)
 *   replay_recorded.c  the case's recorded outputs
 *   replay_gpu.c       --device gpu: a kernel's GPU twin
 *   replay_row.c       the rows: header, judgement, notes, fold, compared rows
 *   replay_refs.c      the references (R_exact, R_source, R_sanitized, fp64) */
#ifndef KR_REPLAY_CTX_H
#define KR_REPLAY_CTX_H

#include "external_launch.h"
#include "gemm_ref.h"
#include "input_health.h"
#include "judge.h"
#include "replay.h"
#include "row_blocks.h"

typedef struct {
    int built;                  /* replay_ensure_source_refs ran (the refs may still be NULL) */
    float *r_source;            /* [M, N] or NULL */
    const float *x;             /* its activations (x, or x rounded to bf16 for bf16 kernels) */
    float *x_owned;
    float *x_sanitized;         /* nan_to_num(x) when x holds non-finite values, else NULL */
    float *r_sanitized;         /* R_source on x_sanitized: what the served model would see
                                   with RADIANCE_MXFP4_SANITIZE=1 */
} source_refs_t;

/* Everything one case's rows share. */
typedef struct {
    const case_t *c;
    const replay_options_t *opt;
    kernel_inputs_t in;
    input_health_t health;
    nonfinite_t source_nf;      /* non-finite elements of the source activations */
    /* The source references, one set per weight a case can hold (an MXFP4
     * weight, a bf16 weight), each with the activations it multiplied. */
    source_refs_t src[2];       /* indexed by weight_kind_t */
    uint16_t *vs_out;           /* --vs: the other model's output bits [M, N], or NULL */
    const kernel_desc_t *vs;
    result_list_t *out;
    /* Row-block replay of a large case (NULL: the case is replayed whole).
     * c is then the block's rows and full_M the case's. */
    row_blocks_t *blocks;
    int64_t full_M;
    /* How each kernel of the case was launched: whole-case outputs of the
     * external kernels of a row-block replay, and every kernel's reruns. */
    launch_table_t *launches;
    /* The fp32 reference on the case's MXFP4 weight: keeps the dequantized
     * weight (or its chunk buffer) across every reference of the case. */
    gemm_ref_ctx_t *ref_ctx;
    /* The digest of the output being compared (replay_compare_refs
     * sets it for the duration of its call: one hash per output, not per row). */
    const uint16_t *digest_bits;
    char digest[17];
    const policy_t *policy;     /* the judgement's thresholds; NULL = derived rules */
    const judge_poison_t *poison; /* where the case's non-finite inputs are */
    int *route_fit;             /* the recorded output's fitted route, shared by a case's
                                   row blocks: -1 not fitted yet, 0 W4A8, 1 W4A4 */
    struct {
        float *A;               /* the operands of the last R_exact: an act's dequant */
        int A_owned;            /* 0: A is still its act's (release_act hands it over) */
        float *R;               /* that R_exact [M, N] */
        int64_t n;              /* elements of A */
    } exact_cache;
    /* The kernel being replayed is the last that can use a reference: once
     * its R_exact row is done, that R_exact's buffer may become R_source's. */
    int last_reference_user;
} replay_ctx_t;

/* ---- replay_row.c ---- */

/* Monotonic seconds, for a row's time. */
double replay_now_seconds(void);

/* The row's case, shape, band, kernel and reference. */
void replay_row_header(replay_ctx_t *rc, result_t *r, const char *kernel, const char *reference);

/* In a row-block replay, folds a finished row into the case's row (a failure
 * to allocate the accumulator is reported, not ignored); 0 when replayed whole. */
int replay_fold_row(replay_ctx_t *rc, const result_t *r, row_kind_t kind, const metrics_sums_t *sums,
                    int64_t cols, int input_nf_blockwise, const uint16_t *out_bits, kr_error_t *err);

/* The row's verdict by the one judgement; fallback_tol: the descriptor's
 * tolerance, the rule of last resort. */
void replay_judge_row(const replay_options_t *opt, const policy_t *policy,
                      const judge_poison_t *poison, result_t *r, double fallback_tol);

/* Rows [0, M) of activations a [M, K] that hold a non-finite value (malloc'd),
 * or NULL when none does or a is NULL; *failed set when out of memory. */
unsigned char *replay_rows_nonfinite(const float *a, int64_t M, int64_t K, int *failed);

/* Compares an output (bf16 bits; out_f32: its fp32 values when they are not
 * the bits' decode, else NULL) with an fp32 reference and appends the row. */
int replay_add_compared_row(replay_ctx_t *rc, const char *kernel, const char *reference,
                            const kernel_act_t *act, const char *act_origin,
                            const uint16_t *out_bits, const float *out_f32,
                            const float *ref, const float *ref_operand, const float *apart_src,
                            const nonfinite_t *input_nf, double threshold, double seconds,
                            kr_error_t *err);

/* Adds "; <text>" to a note. */
void replay_append_text(char *note, size_t cap, const char *text);

/* A row with no comparison: verdict and note (UNSUPPORTED, ERROR, ...). */
void replay_note_row(replay_ctx_t *rc, const char *kernel, verdict_t v, const char *note);

/* Adds "; <text>" to a row's note after its verdict (what the model reports
 * about its run).  rows_scoped: the text counts things in the rows replayed. */
void replay_append_note(replay_ctx_t *rc, result_t *r, const char *text, int rows_scoped);

/* The fp32 values of bf16 bits (malloc'd, or NULL when out of memory). */
float *replay_bf16_to_f32(const uint16_t *bits, int64_t n);

/* Rows for one output against the references the options ask for. */
int replay_compare_refs(replay_ctx_t *rc, const char *kernel, const kernel_act_t *act,
                        weight_kind_t wk, const uint16_t *out_bits, double tol_exact,
                        double tol_source, unsigned refs, double seconds, kr_error_t *err);

/* ---- replay_refs.c ---- */

/* The references on the run's GPU worker, when it computes them (a GPU run
 * with a session); 1 when it does, so the caller does not. */
int replay_gpu_refs_here(const replay_ctx_t *rc);

/* rel_fro of an fp32 reference against the fp64 oracle on the same operands. */
double replay_reference_error_vs_f64(replay_ctx_t *rc, const float *A, const float *ref_f32,
                                     kr_error_t *err);

/* R_exact on an act's dequantized operands, cached across the case's
 * kernels; owned by rc (replay_exact_cache_free), NULL on error. */
const float *replay_reference_exact(replay_ctx_t *rc, const kernel_act_t *act, kr_error_t *err);

/* Frees an act (its dequant goes to the R_exact cache when the cache holds it). */
void replay_release_act(replay_ctx_t *rc, kernel_act_t *act);

/* Frees the R_exact cache. */
void replay_exact_cache_free(replay_ctx_t *rc);

/* The source references of weight kind wk, made on their first use. */
int replay_ensure_source_refs(replay_ctx_t *rc, weight_kind_t wk, kr_error_t *err);

/* Frees one weight kind's source references. */
void replay_free_source_refs(source_refs_t *src);

/* ---- replay_kernel.c ---- */

/* One selected kernel on the case's rows: its rows (UNSUPPORTED, a
 * quantizer's, a GEMM's against the references, --vs). */
int replay_kernel(replay_ctx_t *rc, const kernel_desc_t *k, kr_error_t *err);

/* A quantizer's row: its dequantized operand against x. */
int replay_quantizer(replay_ctx_t *rc, const kernel_desc_t *k, kr_error_t *err);

/* A quantizer row's note from its counts (row_blocks' counts of the rows replayed). */
void replay_describe_quantizer_counts(const int64_t *counts, char *buf, int cap);

/* Verdict and note of a --vs row from its metrics and histogram. */
void replay_vs_row_finish(const replay_options_t *opt, const policy_t *policy, result_t *r,
                          const char *vs_name, double fallback_tol);

/* Runs the --vs model once per case and keeps its output bits (rc->vs_out). */
void replay_prepare_vs_model(replay_ctx_t *rc);

/* ---- replay_recorded.c ---- */

/* The outputs the case recorded in production against the same references. */
int replay_recorded(replay_ctx_t *rc, kr_error_t *err);

/* Verdict and note of the rerun race check from its histogram. */
void replay_rerun_row_finish(result_t *r);

/* ---- replay_gpu.c ---- */

/* --device gpu: k's GPU twin(s) on act (the SIMT kernel, and the matrix
 * units' under --gpu-variant), each compared with its CPU model on
 * opt->model_rows rows and with the references. */
int replay_gpu_kernel(replay_ctx_t *rc, const kernel_desc_t *k, const kernel_act_t *act,
                      kr_error_t *err);

/* --device gpu: a quantizer's twin, its codes and scales against the CPU
 * model's (after the quantizer's own row). */
int replay_gpu_quantizer(replay_ctx_t *rc, const kernel_desc_t *k, kr_error_t *err);

#endif
