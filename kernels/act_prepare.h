/* Building the activations a kernel consumes, shared by every kernel of a
 * family: fp8 per-token (W4A8) and MXFP4 per-block (W4A4). */
#ifndef KR_ACT_PREPARE_H
#define KR_ACT_PREPARE_H

#include "registry.h"

/* fp8 per-token: the recorded x_fp8/x_scale when allowed and present, else x
 * quantized with opt->fp8_variant. */
int act_prepare_fp8_token(const kernel_desc_t *k, const kernel_inputs_t *in,
                          const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err);

/* MXFP4 per 32-block, quantized from x with opt->mxfp4_variant. */
int act_prepare_mxfp4(const kernel_desc_t *k, const kernel_inputs_t *in,
                      const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err);

/* Unquantized kernels (bf16 GEMMs, ref_linear): x rounded to bf16 as the
 * operand values (act->dequant); codes and scales stay NULL.  The origin
 * says how many fp32 values the rounding changed. */
int act_prepare_bf16_values(const kernel_inputs_t *in, kernel_act_t *act, kr_error_t *err);

/* How that origin begins: the kernel's activations are x itself (rounded to
 * bf16), so R_source is the reference on the kernel's own operands. */
#define ACT_ORIGIN_X_BF16 "x as bf16"

/* The fp8 value of every activation code, before the per-token scale, into
 * the caller's [M, K] buffer; on up to `threads` threads. */
void act_fp8_values(const kernel_act_t *act, float *value, int threads);

/* MXFP4 activations as a W4A4 model sums them: value[m][k] = e2m1(code),
 * unscaled, and block_factor[m][b] = 2^(E - 127) (spec e8m0), into the
 * caller's [M, K] and [M, K/32] buffers; on up to `threads` threads. */
void act_mxfp4_values(const kernel_act_t *act, float *value, float *block_factor, int threads);

#endif
