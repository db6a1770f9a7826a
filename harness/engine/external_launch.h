/* Launching a kernel the way the replay does: isolated or not, with an
 * injected fault or not, and rerun on the same inputs with the outputs
 * compared bit for bit.
 *
 * Isolation.  A plugin kernel always runs in a child process
 * (harness/common/isolate.h), with --inject too (the fault is applied around its
 * run, in the child), unless the user asked for --no-isolate; --isolate puts
 * every kernel there.  A crash, a hang or a write outside the output becomes
 * the outcome's verdict (CRASHED, TIMEOUT, OOB_WRITE), not the end of the run.
 *
 * Reruns.  A kernel is launched `runs` times on the same inputs; run 1's
 * output is the one judged, and every later run is compared with it bit by
 * bit.  Elements that differ in any rerun are counted and the first few
 * (row, column) kept: a race (a lost update in a split-K reduction) is
 * NONDETERMINISTIC, not WRONG on one run and PASS on the next.
 *
 * Whole-M launches.  A large case is replayed in row blocks, but an external
 * kernel picks its configuration from M, so it must see the case's M: the
 * launch table holds, for each external kernel of a row-block replay, the
 * output of one launch (and its reruns) on the whole case, which the blocks
 * then slice.  The table also merges the rerun comparisons of kernels that
 * are run per block (kreplay's own models), so each kernel's rows are
 * stamped once with the case's figures (launch_table_stamp). */
#ifndef KR_EXTERNAL_LAUNCH_H
#define KR_EXTERNAL_LAUNCH_H

#include <stdint.h>

#include "fault_inject.h"
#include "kr_error.h"
#include "registry.h"
#include "replay.h"
#include "result.h"

/* Differing elements kept by position. */
#define LAUNCH_DIFF_POSITIONS 6

typedef struct {
    int runs;                   /* launches compared (1: no rerun) */
    int64_t elements;           /* elements compared per run */
    int64_t differ;             /* elements whose bits differ from run 1 in some rerun */
    int n_pos;
    int64_t pos[LAUNCH_DIFF_POSITIONS][2]; /* the first differing (row, column), case rows */
    char rerun_failure[256];    /* a rerun that failed where run 1 did not (empty: none) */
} launch_reruns_t;

typedef struct {
    int ok;                     /* run 1 produced an output */
    verdict_t verdict;          /* !ok: ERROR, CRASHED, TIMEOUT or OOB_WRITE */
    char message[KR_ERROR_MSG_MAX]; /* !ok: why */
    double seconds;             /* run 1's wall time */
    kernel_run_info_t info;     /* run 1's note */
    launch_reruns_t reruns;
} launch_outcome_t;

struct gpu_session;

typedef struct {
    const fault_t *fault;       /* --inject for this kernel, or NULL */
    int isolate;                /* run in a child process */
    double timeout_s;           /* per isolated run (<= 0: none) */
    int runs;                   /* >= 1 */
    int64_t row_offset;         /* the inputs' first row in the case (positions are case rows) */
    /* A GPU plugin's or a persistent plugin's launches go to the run's
     * worker (gpu_session.h), which isolates them itself; NULL: here. */
    struct gpu_session *session;
} launch_plan_t;

/* Is k an external kernel (a plugin's, CPU or GPU): launched once on the
 * case's whole M, isolated, rerun by default? */
int launch_kernel_is_external(const kernel_desc_t *k);

/* Runs k on (in, act) as plan says; out [M, N] receives run 1's bits when
 * res->ok.  Returns -1 with err only when the harness itself failed (out of
 * memory, no child process); a kernel's own failure is res. */
int launch_kernel(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                  const kernel_options_t *kopt, const launch_plan_t *plan, uint16_t *out,
                  launch_outcome_t *res, kr_error_t *err);

/* A quantizer (KERNEL_OP_QUANT, whose prepare_act is the kernel) rerun:
 * prepare_act runs - 1 more times, each operand's fp32 value compared bit
 * for bit with first's; positions are (case row, k).  A rerun that fails
 * where run 1 did not is r->rerun_failure.  -1 with err only when out of
 * memory. */
int launch_quantizer_reruns(const kernel_desc_t *k, const kernel_inputs_t *in,
                            const kernel_options_t *kopt, const kernel_act_t *first, int runs,
                            int64_t row_offset, launch_reruns_t *r, kr_error_t *err);

/* r's differ count and first positions from a mask of the [n / N, N]
 * elements that differed in some rerun (rows counted from row_offset). */
void launch_reruns_summarize(const unsigned char *mask, int64_t n, int64_t N, int64_t row_offset,
                             launch_reruns_t *r);

/* The plan replay options give k: isolated for a plugin (unless
 * --no-isolate) or under --isolate; the --inject fault when k matches its
 * kernels; opt->gpu_reruns runs for an external kernel, opt->model_reruns
 * for kreplay's own models; the run's worker for a GPU or persistent
 * plugin's. */
void launch_plan_for(const kernel_desc_t *k, const replay_options_t *opt, int64_t row_offset,
                     launch_plan_t *plan);

/* ---- the launches of one case ---- */

typedef struct {
    const kernel_desc_t *k;
    int whole;                  /* launched on the whole case: out and outcome stand for it */
    uint16_t *out;              /* whole: [M, N] of the case when outcome.ok */
    launch_outcome_t outcome;   /* whole: the launch; else the reruns merged over blocks */
} launch_entry_t;

typedef struct {
    launch_entry_t *items;
    int count;
    int64_t cap;
    int64_t N;                  /* the case's columns */
} launch_table_t;

/* The entry of k, or NULL. */
launch_entry_t *launch_table_find(launch_table_t *t, const kernel_desc_t *k);

/* Records the whole-case launch of k (takes out, malloc'd [M, N] or NULL). */
int launch_table_put_whole(launch_table_t *t, const kernel_desc_t *k, uint16_t *out,
                           const launch_outcome_t *o, kr_error_t *err);

/* Launches k once (with its reruns) on the whole case `in` and records it.
 * A kernel that cannot take the case (shape, weight, activations) is left
 * out: the replay of the rows reports why.  -1 only when the harness failed. */
int launch_whole_case(const kernel_desc_t *k, const kernel_inputs_t *in,
                      const replay_options_t *opt, launch_table_t *t, kr_error_t *err);

/* Merges a per-block (or whole-case) rerun comparison of k. */
int launch_table_merge_reruns(launch_table_t *t, const kernel_desc_t *k, const launch_reruns_t *r,
                              kr_error_t *err);

/* Stamps rows[first, count) of each kernel rerun: reruns, rerun_diff, and,
 * when runs differed, NONDETERMINISTIC with the count and the positions
 * (run 1's verdict and note kept after them). */
void launch_table_stamp(const launch_table_t *t, result_list_t *rows, int64_t first);

void launch_table_free(launch_table_t *t);

#endif
