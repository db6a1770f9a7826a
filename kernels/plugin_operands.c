#include "plugin_operands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/folded_weight.h"
#include "formats.h"
#include "mxfp4_weight.h"

void plugin_operands_init(kreplay_operand_source_t *src, plugin_operand_cache_t *cache,
                          const kernel_inputs_t *in, const kernel_act_t *act,
                          const plugin_weight_view_t *weight)
{
    memset(cache, 0, sizeof *cache);
    src->in = in;
    src->act = act;
    src->weight = *weight;
    src->cache = cache;
}

void plugin_operands_free(kreplay_operand_source_t *src)
{
    plugin_operand_cache_t *c = src->cache;
    for (int i = 0; c && i < c->count; i++)
        free(c->built[i].data);
    if (c)
        c->count = 0;
}

static int refuse(const kreplay_operand_source_t *src, const void **data, const char *fmt,
                  const char *name)
{
    snprintf(src->cache->why, sizeof src->cache->why, fmt, name);
    *data = src->cache->why;
    return 1;
}

static int lend(const void *p, int64_t n, const void **data, int64_t *bytes)
{
    *data = p;
    *bytes = n;
    return 0;
}

/* Keeps a built buffer under its name; takes p (freed on failure). */
static int keep(const kreplay_operand_source_t *src, const char *name, void *p, int64_t n,
                const void **data, int64_t *bytes)
{
    plugin_operand_cache_t *c = src->cache;
    if (!p || c->count == PLUGIN_OPERANDS_MAX) {
        free(p);
        return refuse(src, data, "%s: out of memory", name);
    }
    snprintf(c->built[c->count].name, sizeof c->built[c->count].name, "%s", name);
    c->built[c->count].data = p;
    c->built[c->count].bytes = n;
    c->count++;
    return lend(p, n, data, bytes);
}

static const plugin_operand_t *cached(const kreplay_operand_source_t *src, const char *name)
{
    for (int i = 0; i < src->cache->count; i++)
        if (strcmp(src->cache->built[i].name, name) == 0)
            return &src->cache->built[i];
    return NULL;
}

static void *bf16_bits_of(const float *v, int64_t n)
{
    uint16_t *o = malloc((size_t)n * sizeof *o);
    for (int64_t i = 0; o && i < n; i++)
        o[i] = bf16_encode(v[i]);
    return o;
}

/* e2m1 codes one per byte [M, K] -> two per byte [M, K/2], element 2j low. */
static void *pack_e2m1(const uint8_t *codes, int64_t M, int64_t K)
{
    uint8_t *o = malloc((size_t)M * (size_t)(K / 2));
    for (int64_t i = 0; o && i < M * (K / 2); i++)
        o[i] = (uint8_t)((codes[2 * i] & 0x0F) | (codes[2 * i + 1] & 0x0F) << 4);
    return o;
}

/* w_folded and w_folded_scale from the folded plan: each code is the e4m3fn
 * encoding of the value the folded models sum with (the plan's shift table:
 * exact, so encoding it back gives that value's code). */
static int build_folded(const kreplay_operand_source_t *src, const void **data, int64_t *bytes)
{
    const kernel_inputs_t *in = src->in;
    const int64_t N = in->N, K = in->K;
    folded_plan_t p;
    kr_error_t err = {{0}};
    if (folded_plan_init(&p, in, FOLDED_W_CHECKPOINT, &err))
        return refuse(src, data, "w_folded: %.200s", err.msg);
    uint8_t *codes = malloc((size_t)N * (size_t)K);
    float *scale = malloc((size_t)N * sizeof *scale);
    if (!codes || !scale) {
        free(codes);
        free(scale);
        folded_plan_free(&p);
        return refuse(src, data, "%s: out of memory", "w_folded");
    }
    const mxfp4_weight_t *w = &in->weight;
    for (int64_t n = 0; n < N; n++) {
        scale[n] = p.epi[n];
        for (int64_t b = 0; b < K / 32; b++) {
            const int e = mxfp4_scale_at(w->scales, w->layout, N, K, n, b);
            const int zero_block = p.e8m0_mode == E8M0_ZERO_IS_ZERO && e == 0;
            const int row = zero_block ? FOLDED_ZERO_ROW : p.ref[n] - e + 255;
            for (int64_t k = 32 * b; k < 32 * b + 32; k++) {
                const uint8_t c = mxfp4_code_at(w->packed, K, n, k);
                codes[n * K + k] = e4m3fn_encode(p.value[row][c], FP8_SATURATE);
            }
        }
    }
    folded_plan_free(&p);
    const void *ignored;
    int64_t ignored_n;
    if (keep(src, "w_folded_scale", scale, N * (int64_t)sizeof(float), &ignored, &ignored_n)) {
        free(codes);
        return refuse(src, data, "%s: out of memory", "w_folded");
    }
    return keep(src, "w_folded", codes, N * K, data, bytes);
}

int plugin_operands_get(const kreplay_operand_source_t *src, const char *name, const void **data,
                        int64_t *bytes)
{
    const kernel_inputs_t *in = src->in;
    const kernel_act_t *act = src->act;
    const int64_t M = in->M, N = in->N, K = in->K;
    *bytes = 0;
    const plugin_operand_t *c = cached(src, name);
    if (c)
        return lend(c->data, c->bytes, data, bytes);
    const int fp8 = act && act->kind == ACT_FP8_PER_TOKEN && act->codes;
    const int mx = act && act->kind == ACT_MXFP4_PER_BLOCK && act->codes && act->block_scale;
    if (!strcmp(name, "x"))
        return in->x ? lend(in->x, M * K * 4, data, bytes)
                     : refuse(src, data, "%s: the case has no fp32 source activations x", name);
    if (!strcmp(name, "x_bf16"))
        return in->x ? keep(src, name, bf16_bits_of(in->x, M * K), M * K * 2, data, bytes)
                     : refuse(src, data, "%s: the case has no fp32 source activations x", name);
    if (!strcmp(name, "weight_bf16"))
        return in->weight_bf16 ? lend(in->weight_bf16, N * K * 2, data, bytes)
                               : refuse(src, data, "%s: the case has no bf16 weight", name);
    if (!strcmp(name, "x_fp8") || !strcmp(name, "x_scale")) {
        if (!fp8)
            return refuse(src, data, "%s: the activations are not fp8 per token here (declare the "
                                     "operands of an fp8 kernel: MODULE:FUNCTION@KERNEL)", name);
        return name[2] == 'f' ? lend(act->codes, M * K, data, bytes)
                              : lend(act->token_scale, M * 4, data, bytes);
    }
    if (!strcmp(name, "x_mxfp4") || !strcmp(name, "x_mxfp4_scale")) {
        if (!mx)
            return refuse(src, data, "%s: the activations are not MXFP4 here (declare the "
                                     "operands of a W4A4 kernel: MODULE:FUNCTION@KERNEL)", name);
        return name[7] == '_' ? lend(act->block_scale, M * (K / 32), data, bytes)
                              : keep(src, name, pack_e2m1(act->codes, M, K), M * (K / 2), data,
                                     bytes);
    }
    if (!strcmp(name, "weight") || !strcmp(name, "weight_scale") || !strcmp(name, "weight_ref")) {
        const void *p = name[6] == 0 ? (const void *)src->weight.weight
                        : name[7] == 's' ? (const void *)src->weight.scales
                                         : (const void *)src->weight.ref;
        const int64_t n = name[6] == 0 ? N * (K / 2) : name[7] == 's' ? N * (K / 32) : N;
        if (!p)
            return refuse(src, data, "%s: the case has no MXFP4 weight (or the kernel declared "
                                     "no weight_ref)", name);
        return lend(p, n, data, bytes);
    }
    if (!strcmp(name, "w_folded") || !strcmp(name, "w_folded_scale")) {
        if (!in->weight.packed || !in->weight.scales)
            return refuse(src, data, "%s: the case has no MXFP4 weight", name);
        if (build_folded(src, data, bytes))
            return 1;
        c = cached(src, name);
        return lend(c->data, c->bytes, data, bytes);
    }
    return refuse(src, data, "%s: no such operand (kernels/plugin.h lists them)", name);
}
