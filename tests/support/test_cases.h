/* Case data built for tests: synthetic cases of a given shape and seed,
 * random field contents. */
#ifndef KR_TEST_CASES_H
#define KR_TEST_CASES_H

#include <stdint.h>

#include "registry.h"
#include "synth.h"
#include "test_support.h"

/* The default synthetic-case parameters with shape M x N x K and SEED; tests
 * then set the few fields (NaN rows, outliers) they are about. */
synth_params_t test_synth_params(int64_t M, int64_t N, int64_t K, uint64_t seed);

/* synth_case() on P into *c; fails the running test with its error. */
void test_synth_or_fail(const synth_params_t *p, case_t *c);

/* A synthetic case of the default parameters (test_synth_params) into *c;
 * fails the running test with its error. */
void test_synth_default_or_fail(int64_t M, int64_t N, int64_t K, uint64_t seed, case_t *c);

/* The w4a8.perblock model's inputs over a default synthetic case (*c; the
 * checkpoint-order weight in *w_owned when the case holds another order)
 * and its activations prepared; fails the running test on any error. */
void test_w4a8_case_or_fail(int64_t M, int64_t N, int64_t K, uint64_t seed, case_t *c, uint8_t **w_owned,
                            kernel_inputs_t *in, kernel_act_t *act);

/* Kernel inputs of shape M x N x K over the MXFP4 weight PACKED / SCALES
 * (LAYOUT, exponents read by MODE), fp8 activations e4m3fn; the test sets
 * the operands it has (x, x_fp8, weight_bf16).  For the models' hand-built
 * operands in test_models_w4a8, test_models_bf16 and test_tile_gemm. */
kernel_inputs_t test_mxfp4_inputs(int64_t M, int64_t N, int64_t K, const uint8_t *packed,
                                  const uint8_t *scales, scale_layout_t layout, e8m0_mode_t mode);

/* N random bytes (malloc'd), never 0, so that "all zeros read back" cannot
 * pass; fails the running test when out of memory. */
void *test_rand_bytes(test_rng_t *r, size_t n);

#endif
