/* The accumulation-precision test: does the output follow a kernel that
 * keeps its sums in fp32, or one that rounds them to bf16 or fp16 -- the
 * running sum after every element or every K block of 32, 64 or 128, or the
 * split-K partials before their reduction?
 *
 * Each model is re-evaluated on a sample of rows and columns from the
 * operands the kernel consumed (its fp8 or MXFP4 activation codes and
 * scales, the MXFP4 weight), rounded to bf16 like the output, and compared
 * with the output there (rel_fro over elements finite on both sides).  The
 * fp32 residual is the smallest of the exact sum (fp64) and every model's
 * structure kept in fp32 (x_scale applied per product or per split): a
 * correct fp32 kernel matches one of them up to the rare output that its own
 * summation order rounds the other way; a reduced-precision model is far
 * from them (one rounding of 2^-9 or 2^-12 per step).  The judgement (judge.h) fails the row when the best
 * reduced-precision model fits several times better than fp32: the test
 * holds under the rel_fro threshold, where the norms cannot see it. */
#ifndef KR_ACC_FIT_H
#define KR_ACC_FIT_H

#include <stdint.h>

#include "kr_error.h"
#include "registry.h"
#include "result.h"

/* The judgement's limits (calibration: cases/policies/default-calibration.md):
 * the best reduced-precision model fits when its residual times
 * ACC_FIT_RATIO is at most the fp32 model's, the fp32 model's residual is
 * over ACC_FIT_FLOOR (below it the output is the correctly rounded exact
 * sum and no rounding of partial sums can explain it better), and at least
 * ACC_FIT_MIN_SAMPLES outputs were compared (on fewer, a clean kernel's
 * residuals are too noisy: 6.5 x on 48 outputs).  A seeded reduced-precision
 * kernel fits 600 x or exactly; the clean models reach 2.7 x. */
#define ACC_FIT_RATIO 16.0
#define ACC_FIT_FLOOR 5e-4
#define ACC_FIT_MIN_SAMPLES 256

/* Measures fit for the output out_bits (bf16) or out_f32 (fp32 values, when
 * not NULL) of a kernel that consumed act and in->weight, and checks the
 * fp32 summation bound on it (fp32_bound.h: every route whose products are
 * exact, bf16 included; weight: the weight the kernel reads).  skip_rows (may be
 * NULL): rows left out (their inputs are non-finite).  Leaves fit zeroed
 * (sampled = 0) when the operands are not MXFP4 weight x fp8/MXFP4
 * activations.  Returns 0, or -1 with err set (out of memory). */
int acc_fit_measure(const kernel_inputs_t *in, const kernel_act_t *act, weight_kind_t weight,
                    const uint16_t *out_bits, const float *out_f32, const unsigned char *skip_rows,
                    acc_fit_t *fit, kr_error_t *err);

/* Whether fit names a reduced-precision accumulation (the limits above). */
int acc_fit_reduced(const acc_fit_t *fit);

/* "running sum rounded to bf16 every 32-K block: residual 0 vs fp32 0.0031
 * (1024 sampled outputs; runner-up ...)" into buf. */
void acc_fit_describe(const acc_fit_t *fit, char *buf, int cap);

#endif
