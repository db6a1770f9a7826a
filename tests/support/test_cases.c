#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "test_cases.h"

synth_params_t test_synth_params(int64_t M, int64_t N, int64_t K, uint64_t seed)
{
    synth_params_t p;
    synth_params_default(&p);
    p.M = M;
    p.N = N;
    p.K = K;
    p.seed = seed;
    return p;
}

void test_synth_or_fail(const synth_params_t *p, case_t *c)
{
    kr_error_t err = {{0}};
    if (synth_case(p, c, &err) != 0)
        fail_msg("synth_case %lldx%lldx%lld seed %llu: %s", (long long)p->M, (long long)p->N,
                 (long long)p->K, (unsigned long long)p->seed, err.msg);
}

void test_synth_default_or_fail(int64_t M, int64_t N, int64_t K, uint64_t seed, case_t *c)
{
    const synth_params_t p = test_synth_params(M, N, K, seed);
    test_synth_or_fail(&p, c);
}

void test_w4a8_case_or_fail(int64_t M, int64_t N, int64_t K, uint64_t seed, case_t *c, uint8_t **w_owned,
                            kernel_inputs_t *in, kernel_act_t *act)
{
    test_synth_default_or_fail(M, N, K, seed, c);
    kr_error_t err = {{0}};
    const uint8_t *w = case_weight_checkpoint(c, w_owned, &err);
    if (!w)
        fail_msg("the checkpoint-order weight: %s", err.msg);
    *in = (kernel_inputs_t){.M = M, .N = N, .K = K, .x = c->x, .x_fp8 = c->x_fp8, .x_scale = c->x_scale,
                            .x_fp8_format = c->x_fp8_format,
                            .weight = {.packed = w, .scales = c->weight_scale, .layout = c->scale_layout,
                                       .e8m0_mode = E8M0_SPEC, .N = N, .K = K}};
    const kernel_desc_t *k = kernel_find("w4a8.perblock");
    kernel_options_t o;
    kernel_options_default(&o);
    if (k->prepare_act(k, in, &o, act, &err) != 0)
        fail_msg("w4a8.perblock's activations: %s", err.msg);
}

kernel_inputs_t test_mxfp4_inputs(int64_t M, int64_t N, int64_t K, const uint8_t *packed,
                                  const uint8_t *scales, scale_layout_t layout, e8m0_mode_t mode)
{
    kernel_inputs_t in;
    memset(&in, 0, sizeof in);
    in.M = M;
    in.N = N;
    in.K = K;
    in.x_fp8_format = FP8_E4M3FN;
    in.weight = (mxfp4_weight_t){.packed = packed, .scales = scales, .layout = layout,
                                 .e8m0_mode = mode, .N = N, .K = K};
    return in;
}

void *test_rand_bytes(test_rng_t *r, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    assert_non_null(p);
    for (size_t i = 0; i < n; i++)
        p[i] = (uint8_t)(1 + test_rng_u64(r) % 255);
    return p;
}
