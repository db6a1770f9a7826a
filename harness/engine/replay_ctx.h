/* The replay's per-case state and the helpers its parts share (replay.c,
 * replay_gpu.c).  Private to harness/engine. */
#ifndef KR_REPLAY_CTX_H
#define KR_REPLAY_CTX_H

#include "external_launch.h"
#include "gemm_ref.h"
#include "input_health.h"
#include "judge.h"
#include "replay.h"
#include "row_blocks.h"

typedef struct {
    int built;                  /* ensure_source_refs ran (the refs may still be NULL) */
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
    /* The digest of the output being compared (compare_with_references
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

/* The row's case, shape, band, kernel and reference. */
void replay_row_header(replay_ctx_t *rc, result_t *r, const char *kernel, const char *reference);

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

/* A quantizer's row: its dequantized operand against x. */
int replay_quantizer(replay_ctx_t *rc, const kernel_desc_t *k, kr_error_t *err);

/* Frees an act (its dequant goes to the R_exact cache when the cache holds it). */
void replay_release_act(replay_ctx_t *rc, kernel_act_t *act);

/* ---- replay_gpu.c ---- */

/* --device gpu: k's GPU twin(s) on act (the SIMT kernel, and the matrix
 * units' under --gpu-variant), each compared with its CPU model on
 * opt->model_rows rows and with the references. */
int replay_gpu_kernel(replay_ctx_t *rc, const kernel_desc_t *k, const kernel_act_t *act,
                      kr_error_t *err);

/* --device gpu: a quantizer's twin, its codes and scales against the CPU
 * model's (after the quantizer's own row). */
int replay_gpu_quantizer(replay_ctx_t *rc, const kernel_desc_t *k, kr_error_t *err);

/* The references on the run's GPU worker, when it computes them (a GPU run
 * with a session); 1 when it does, so the caller does not. */
int replay_gpu_refs_here(const replay_ctx_t *rc);

#endif
