/* What fp32 summation of a kernel's own operands can give.
 *
 * A kernel that sums its K exact products p_k (fp8 x e2m1 times power-of-two
 * scales, e2m1 x e2m1, bf16 x bf16: all exact in fp32) in fp32, in any order
 * or tree -- sequential, per block, pairwise, Kahan, split-K parts reduced in
 * any order, or in fp64 -- gives a value v with
 *     |v - S| <= gamma * sum_k |p_k| * |xs|,
 * S the exact sum times x_scale xs (W4A8; 1 elsewhere), n = K + 2 (the K - 1
 * additions, x_scale applied to the sum or to each product, one more for
 * safety).  Deterministically gamma = gamma_n = n u / (1 - n u), u = 2^-24,
 * and no order can leave it; but that bound grows with K where rounding
 * errors of mean zero grow with sqrt(K), and it cannot see a loss of
 * precision a bf16 output hides.  So the bound used is Higham and Mary's
 * probabilistic one (SIAM J. Sci. Comput. 41(5), 2019, theorems 3.1 and
 * 4.1): gamma = gamma~_n(lambda) = exp(lambda sqrt(n) u + n u^2 / (1 - u)) - 1,
 * which an fp32 summation of n terms exceeds with probability at most
 * 2 n exp(-lambda^2 (1 - u)^2 / 2) when its rounding errors are independent
 * of mean zero; lambda = 8 makes that 5e-11 an output at K = 2048 (docs/
 * NUMERICS.md; test_fp32_bound finds no correct order outside).  The folded
 * W4A8 path also rounds the weights of blocks more than 8 binades below
 * their row's reference exponent to e4m3: each such product may move by
 * |a_k| 2^(ref-137), added to the bound; and a sum scaled into fp32's
 * subnormal range rounds to 2^-149, once a block and a product at most.
 * The output is v rounded to bf16 (nearest even, monotone), so it lies in
 *     [bf16(S - E), bf16(S + E)];
 * an output outside that interval comes from no fp32 summation of these
 * operands: precision was lost (partial sums or operands held narrower) or
 * the operands were not these.  The bound is checked on a sample of rows
 * and columns; the judgement (judge.h) fails a row with a share of its
 * sampled outputs outside (FP32_BOUND_MIN_*). */
#ifndef KR_FP32_BOUND_H
#define KR_FP32_BOUND_H

#include <stdint.h>

#include "kr_error.h"
#include "registry.h"
#include "result.h"

/* The judgement: an R_exact row (or the own-operand row of a kernel
 * without one) fails when at least FP32_BOUND_MIN_OUTSIDE of its sampled
 * outputs, and at least FP32_BOUND_MIN_SHARE of them, lie outside the bound.
 * One is a proof; the share keeps a handful of outputs a matrix unit's
 * internal sums move from failing a row (a real triton dot_scaled leaves
 * 1592 of 21 million outputs a ULP from R_exact). */
#define FP32_BOUND_MIN_OUTSIDE 4
#define FP32_BOUND_LAMBDA 8.0
#define FP32_BOUND_MIN_SHARE 0.01

/* Checks the bound on a sample (up to FP32_BOUND_ROWS spread rows x
 * FP32_BOUND_COLS spread columns, skip_rows left out) of the output out_bits
 * (bf16) or out_f32 (fp32 values) of a kernel that consumed act and in's
 * weight (the one `weight` names), into fit->bound_*.  Leaves them zero
 * when the operands are not exact-product ones (fp8 or MXFP4 activations
 * with an MXFP4 weight, bf16 activations with a bf16 weight).  Returns 0, or -1 with err set. */
#define FP32_BOUND_ROWS 64
#define FP32_BOUND_COLS 32
int fp32_bound_measure(const kernel_inputs_t *in, const kernel_act_t *act, weight_kind_t weight,
                       const uint16_t *out_bits, const float *out_f32,
                       const unsigned char *skip_rows, acc_fit_t *fit, kr_error_t *err);

/* Whether fit says precision was lost (the limits above). */
int fp32_bound_exceeded(const acc_fit_t *fit);

/* "lost precision: 212 of 2048 sampled outputs lie outside what any fp32
 * summation order of the kernel's own operands gives (the first, row 3
 * column 17: ...)" into buf; `lost` 0: the same fact without the name (an
 * output wrong by more than a rounding is outside the bound too, and lost
 * precision is not what that says). */
void fp32_bound_describe(const acc_fit_t *fit, int lost, char *buf, int cap);

#endif
