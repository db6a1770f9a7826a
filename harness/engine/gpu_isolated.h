/* GPU work in a child process (harness/common/isolate.h): a kernel that crashes,
 * corrupts its context or hangs becomes a CRASHED or TIMEOUT row and the
 * run goes on.  CUDA and HIP cannot be used in a child forked after the
 * parent initialised them, so with isolation the parent never touches the
 * GPU runtime: device queries run in a child too. */
#ifndef KR_GPU_ISOLATED_H
#define KR_GPU_ISOLATED_H

#include "gpu_run.h"
#include "isolate.h"

/* gpu_available() asked in a child. */
int gpu_available_isolated(char *why, size_t cap);

/* gpu_run_kernel() in a child with a timeout.  Returns 0 when the child
 * ran: *ir says how it ended, and on ISOLATE_OK *res holds the result
 * (free with gpu_run_result_free) exactly as an in-process run would; -1
 * with err when no child could be started. */
int gpu_run_kernel_isolated(const kernel_desc_t *k, const kernel_inputs_t *in,
                            const kernel_act_t *act, const kernel_options_t *kopt,
                            const gpu_run_options_t *opt, double timeout_s,
                            gpu_run_result_t *res, isolate_result_t *ir, kr_error_t *err);

#endif
