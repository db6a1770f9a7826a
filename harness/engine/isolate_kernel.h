/* A kernel's CPU run in a child process (isolate.h's isolate_run), and the
 * row verdict of an isolated run that did not succeed. */
#ifndef KR_ISOLATE_KERNEL_H
#define KR_ISOLATE_KERNEL_H

#include <stdint.h>

#include "isolate.h"
#include "kr_error.h"
#include "registry.h"
#include "result.h"

/* One call of a kernel on its operands, as an isolated run carries it into
 * its child (the child's copy of the parent's memory keeps the pointers
 * valid); the output goes back through the isolate's shared buffer. */
typedef struct {
    const kernel_desc_t *k;
    const kernel_inputs_t *in;
    const kernel_act_t *act;
    const kernel_options_t *opt;
} kernel_call_t;

/* A registry or plugin kernel's run_cpu in a child: out [M, N] bf16 bits and
 * info come back on ISOLATE_OK; on ISOLATE_FAILED, res->message is the
 * kernel's own error (what an unisolated run_cpu would have put in err). */
int isolate_run_kernel(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                       const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info,
                       double timeout_s, isolate_result_t *res, kr_error_t *err);

/* The row verdict of an isolated run that did not succeed: CRASHED,
 * TIMEOUT, or ERROR (FAILED); PASS for ISOLATE_OK (compare the output). */
verdict_t isolate_verdict(const isolate_result_t *r);

#endif
