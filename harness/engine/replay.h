/* The replay of one case: every selected kernel's CPU model against the
 * references, and the outputs recorded in the case against the same
 * references.  Rows are appended to a result_list_t. */
#ifndef KR_REPLAY_H
#define KR_REPLAY_H

#include "case.h"
#include "fault_inject.h"
#include "progress.h"
#include "registry.h"
#include "policy.h"
#include "result.h"

typedef struct {
    const char *kernel_patterns;    /* --kernels; NULL = all */
    unsigned refs;                  /* ref_kind_t mask to report */
    int include_recorded;           /* rows for the case's recorded outputs */
    kernel_options_t kernel;
    e8m0_mode_t weight_e8m0_mode;   /* how weight scale byte 0 decodes */
    const char *save_outputs_path;  /* HDF5 file to append kernel outputs to, or NULL */
    const char *vs_kernel;          /* also compare every kernel's output with this model's, bit by bit */
    int diagnose;                   /* test alternative hypotheses on failing rows (default on) */
    int device_gpu;                 /* run the kernels on the GPU (the CPU model is the reference
                                       "model:<kernel>", expected bit-identical) */
    int gpu_reruns;                 /* bitwise-compared launches of external kernels: GPU
                                       kernels and plugins (default 3; --reruns N) */
    int model_reruns;               /* bitwise-compared runs of kreplay's own CPU models
                                       (default 1; --reruns N sets it too) */
    int gpu_matrix;                 /* also run the matrix-unit variant where one exists */
    /* The run's GPU worker (gpu_session.h): GPU twins, references and GPU
     * plugins under device_gpu, persistent plugins (Python kernels) always.
     * NULL: none (plugin kernels then run in a child per launch). */
    struct gpu_session *gpu;
    /* Rows of each GPU twin's output compared bit for bit with its CPU model
     * (MODEL_MISMATCH): REPLAY_MODEL_ROWS_ALL every row, 0 none, N rows
     * spread evenly over M (the first and last included). */
    int64_t model_rows;
    fault_t fault;                  /* --inject: run kernels as if they had this fault */
    const char *fault_kernels;      /* only kernels matching these globs get it (NULL = all) */
    progress_t *progress;           /* the caller's progress line: each kernel's start names
                                       it there (NULL: none) */
    int oracle;                     /* also compute each reference in fp64 and record the
                                       fp32 reference's own error (ref_f32_vs_f64) */
    /* Kernels beyond the registry (--plugin: plugin_kernel_at of each loaded
     * plugin), run after the registry's, filtered by kernel_patterns too. */
    const kernel_desc_t *const *extra_kernels;
    int n_extra_kernels;
    /* Isolation (harness/common/isolate.h): plugin kernels always run in a child
     * process unless no_isolate (--no-isolate); isolate_all (--isolate) puts
     * every kernel's run there.  timeout_s (--timeout) bounds each isolated
     * run; <= 0 = none. */
    int isolate_all;
    int no_isolate;
    double timeout_s;
    /* Memory for a case's outputs and references at once (--block-mb);
     * <= 0: mem_budget_default() (mem_budget.h: a quarter of MemAvailable,
     * 16 MiB to 4 GiB).  A case whose rows need more is replayed in blocks
     * of rows (replay_block_rows). */
    int64_t block_bytes;
    /* Rows per sgemm call of the fp32 references (<= 0: GEMM_REF_PANEL_ROWS,
     * reference/gemm_ref.h).  Row blocks are whole panels, so a case gives
     * the same bits replayed whole or in blocks. */
    int64_t ref_panel_rows;
    /* The judgement's thresholds (judge.h): NULL = the calibrated default
     * policy (cases/policies/default.yaml), loaded by replay_case.  band_of
     * names a case's M band as the policy's rules do (NULL: m_band_name). */
    const policy_t *policy;
    const char *(*band_of)(const void *band_ctx, int64_t M);
    const void *band_ctx;
    /* The rows' case_id and out_digest are left empty, not computed: for a
     * caller that shows neither (a replay printed as a table only).  Both
     * are serial passes over every operand and output byte (some 0.06 s of
     * a 1 s replay of 512 x 17408 x 5120); nothing else in a replay reads
     * them. */
    int skip_identities;
} replay_options_t;

#define REPLAY_MODEL_ROWS_DEFAULT 32
#define REPLAY_MODEL_ROWS_ALL (-1)

/* The smallest default budget (mem_budget.h: MEM_BUDGET_MIN_BYTES). */
#define REPLAY_DEFAULT_BLOCK_BYTES (16ll << 20)

void replay_options_default(replay_options_t *o);

/* Replays one case already read into memory.  Returns 0, or -1 with err set
 * when the case cannot be replayed at all (a kernel that fails gets an ERROR
 * row instead). */
int replay_case(const case_t *c, const replay_options_t *opt, result_list_t *out,
                kr_error_t *err);

/* Rows replayed at once: c->M, or fewer when the case's outputs and
 * references would not fit opt->block_bytes; then a multiple of the
 * reference's row panel (at least one panel, even over the budget).  Every row of a case is
 * computed from its own activation row, so blocks give the same outputs;
 * the rows' metrics are merged (metrics_merge_rows), the output digest
 * continues across blocks, notes and diagnoses come from the first block
 * that produced them, marked with its rows.  GPU runs, --oracle,
 * --save-outputs and --inject need whole outputs and never use blocks. */
int64_t replay_block_rows(const case_t *c, const replay_options_t *opt);

/* The case's weight in checkpoint order: c->weight itself, or a malloc'd
 * unpermuted copy (*owned set) for fragment-order cases. */
const uint8_t *case_weight_checkpoint(const case_t *c, uint8_t **owned, kr_error_t *err);

#endif
