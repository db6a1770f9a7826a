#include "act_prepare.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel.h"
#include "kr_alloc.h"

/* Activation passes are independent per row, so they run as row ranges on
 * the thread pool: the same per-row functions, the same bits. */
/* Rough single-core cost of one element of a pass, in nanoseconds (the
 * units of parallel_for_cost): the quantizers and the table decodes. */
#define ACT_NS_PER_QUANT 1.0
#define ACT_NS_PER_DECODE 0.3

typedef struct act_rows act_rows_t;
typedef void (*act_rows_fn)(const act_rows_t *job, int64_t m0, int64_t m1);

struct act_rows {
    act_rows_fn fn;
    int64_t M, K, rows_per_task;
    const kernel_inputs_t *in;
    const kernel_options_t *opt;
    kernel_act_t *act;
    float *value, *scale;       /* act_*_values outputs */
};

static void act_rows_task(void *ctx, int64_t task)
{
    const act_rows_t *job = ctx;
    const int64_t m0 = task * job->rows_per_task;
    const int64_t m1 = job->M - m0 < job->rows_per_task ? job->M : m0 + job->rows_per_task;
    job->fn(job, m0, m1);
}

/* Runs job->fn over all rows, cut into about 4 ranges per thread. */
static void act_rows_run(act_rows_t *job, int threads, double ns_per_element)
{
    if (job->M <= 0)
        return;
    const int p = parallel_thread_count(threads);
    int64_t ranges = 4 * (int64_t)p < job->M ? 4 * (int64_t)p : job->M;
    job->rows_per_task = (job->M + ranges - 1) / ranges;
    ranges = (job->M + job->rows_per_task - 1) / job->rows_per_task;
    parallel_for_cost(ranges, threads,
                      (double)job->rows_per_task * (double)job->K * ns_per_element,
                      act_rows_task, job);
}

static void rows_fp8_quant(const act_rows_t *job, int64_t m0, int64_t m1)
{
    const int64_t K = job->K;
    fp8_token_quant(job->in->x + m0 * K, m1 - m0, K, job->opt->fp8_variant, job->act->fp8_format,
                    job->act->codes + m0 * K, job->act->token_scale + m0);
}

static void rows_fp8_dequant(const act_rows_t *job, int64_t m0, int64_t m1)
{
    const int64_t K = job->K;
    fp8_token_dequant(job->act->codes + m0 * K, job->act->token_scale + m0, m1 - m0, K,
                      job->act->fp8_format, job->act->dequant + m0 * K);
}

static void rows_mxfp4_quant(const act_rows_t *job, int64_t m0, int64_t m1)
{
    const int64_t K = job->K;
    mxfp4_quant(job->in->x + m0 * K, m1 - m0, K, job->opt->mxfp4_variant,
                job->act->codes + m0 * K, job->act->block_scale + m0 * (K / 32));
}

static void rows_mxfp4_dequant(const act_rows_t *job, int64_t m0, int64_t m1)
{
    const int64_t K = job->K;
    mxfp4_act_dequant(job->act->codes + m0 * K, job->act->block_scale + m0 * (K / 32), m1 - m0,
                      K, job->act->dequant + m0 * K);
}

void kernel_act_free(kernel_act_t *a)
{
    free(a->codes);
    free(a->token_scale);
    free(a->block_scale);
    free(a->dequant);
    memset(a, 0, sizeof *a);
}

static int act_alloc(kernel_act_t *act, act_kind_t kind, int64_t M, int64_t K, kr_error_t *err)
{
    memset(act, 0, sizeof *act);
    act->kind = kind;
    act->M = M;
    act->K = K;
    size_t mk = (size_t)M * (size_t)K;
    act->codes = kr_alloc_array(mk);
    act->dequant = kr_alloc_array(mk * sizeof(float));
    if (kind == ACT_FP8_PER_TOKEN)
        act->token_scale = malloc((size_t)M * sizeof(float));
    else
        act->block_scale = malloc((size_t)M * (size_t)(K / 32));
    if (!act->codes || !act->dequant || (!act->token_scale && !act->block_scale)) {
        kernel_act_free(act);
        return kr_fail(err, "out of memory for activations [%lld, %lld]", (long long)M,
                       (long long)K);
    }
    return 0;
}

int act_prepare_fp8_token(const kernel_desc_t *k, const kernel_inputs_t *in,
                          const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err)
{
    (void)k;
    const int have_recorded = in->x_fp8 && in->x_scale;
    const int use_recorded =
        opt->act_source == ACT_SOURCE_RECORDED ||
        (opt->act_source == ACT_SOURCE_AUTO && have_recorded);
    if (use_recorded && !have_recorded)
        return kr_fail(err, "the case has no recorded x_fp8/x_scale to replay");
    if (!use_recorded && !in->x)
        return kr_fail(err, "the case has no source activations x to quantize");

    fp8_format_t fmt = use_recorded ? in->x_fp8_format : FP8_E4M3FN;
    if (act_alloc(act, ACT_FP8_PER_TOKEN, in->M, in->K, err))
        return -1;
    act->fp8_format = fmt;
    if (use_recorded) {
        memcpy(act->codes, in->x_fp8, (size_t)in->M * (size_t)in->K);
        memcpy(act->token_scale, in->x_scale, (size_t)in->M * sizeof(float));
        snprintf(act->origin, sizeof act->origin, "recorded x_fp8/x_scale");
    } else {
        act_rows_t quant = {.fn = rows_fp8_quant, .M = in->M, .K = in->K, .in = in, .opt = opt,
                            .act = act};
        act_rows_run(&quant, opt->threads, ACT_NS_PER_QUANT);
        snprintf(act->origin, sizeof act->origin, "x quantized per token (%s)",
                 fp8_token_variant_name(opt->fp8_variant));
    }
    act_rows_t dequant = {.fn = rows_fp8_dequant, .M = in->M, .K = in->K, .act = act};
    act_rows_run(&dequant, opt->threads, ACT_NS_PER_DECODE);
    return 0;
}

int act_prepare_mxfp4(const kernel_desc_t *k, const kernel_inputs_t *in,
                      const kernel_options_t *opt, kernel_act_t *act, kr_error_t *err)
{
    (void)k;
    if (opt->act_source == ACT_SOURCE_RECORDED)
        return kr_fail(err, "MXFP4 activations are quantized from x; none are recorded");
    if (!in->x)
        return kr_fail(err, "the case has no source activations x to quantize to MXFP4");
    if (act_alloc(act, ACT_MXFP4_PER_BLOCK, in->M, in->K, err))
        return -1;
    act_rows_t quant = {.fn = rows_mxfp4_quant, .M = in->M, .K = in->K, .in = in, .opt = opt,
                        .act = act};
    act_rows_run(&quant, opt->threads, ACT_NS_PER_QUANT);
    act_rows_t dequant = {.fn = rows_mxfp4_dequant, .M = in->M, .K = in->K, .act = act};
    act_rows_run(&dequant, opt->threads, ACT_NS_PER_DECODE);
    snprintf(act->origin, sizeof act->origin, "x quantized to MXFP4 (%s)",
             mxfp4_variant_name(opt->mxfp4_variant));
    return 0;
}

/* Decoded from the bits rather than the table: the loop vectorizes. */
static void rows_fp8_values(const act_rows_t *job, int64_t m0, int64_t m1)
{
    const uint8_t *codes = job->act->codes;
    float *value = job->value;
    if (job->act->fp8_format == FP8_E4M3FN)
        for (int64_t i = m0 * job->K; i < m1 * job->K; i++)
            value[i] = e4m3fn_decode_bits_of(codes[i]);
    else
        for (int64_t i = m0 * job->K; i < m1 * job->K; i++)
            value[i] = e4m3fnuz_decode_bits_of(codes[i]);
}

void act_fp8_values(const kernel_act_t *act, float *value, int threads)
{
    act_rows_t job = {.fn = rows_fp8_values, .M = act->M, .K = act->K,
                      .act = (kernel_act_t *)act, .value = value};
    act_rows_run(&job, threads, ACT_NS_PER_DECODE);
}

static void rows_mxfp4_values(const act_rows_t *job, int64_t m0, int64_t m1)
{
    const int64_t K = job->K, nblocks = K / 32;
    const uint8_t *codes = job->act->codes, *scales = job->act->block_scale;
    for (int64_t i = m0 * K; i < m1 * K; i++)
        job->value[i] = e2m1_decode(codes[i]);
    for (int64_t i = m0 * nblocks; i < m1 * nblocks; i++)
        job->scale[i] = e8m0_decode(scales[i], E8M0_SPEC);
}

void act_mxfp4_values(const kernel_act_t *act, float *value, float *block_factor, int threads)
{
    act_rows_t job = {.fn = rows_mxfp4_values, .M = act->M, .K = act->K,
                      .act = (kernel_act_t *)act, .value = value, .scale = block_factor};
    act_rows_run(&job, threads, ACT_NS_PER_DECODE);
}

int act_prepare_bf16_values(const kernel_inputs_t *in, kernel_act_t *act, kr_error_t *err)
{
    const size_t mk = (size_t)in->M * (size_t)in->K;
    memset(act, 0, sizeof *act);
    act->kind = ACT_FP8_PER_TOKEN;      /* no bf16 kind exists: codes/scales stay NULL */
    act->M = in->M;
    act->K = in->K;
    act->dequant = malloc(mk * sizeof(float));
    if (!act->dequant)
        return kr_fail(err, "out of memory for activations [%lld, %lld]", (long long)in->M,
                       (long long)in->K);
    size_t rounded = 0;
    for (size_t i = 0; i < mk; i++) {
        const float v = bf16_decode(bf16_encode(in->x[i]));
        rounded += f32_bits(v) != f32_bits(in->x[i]) && in->x[i] == in->x[i];
        act->dequant[i] = v;
    }
    if (rounded)
        snprintf(act->origin, sizeof act->origin, ACT_ORIGIN_X_BF16 " (%zu values rounded from fp32)",
                 rounded);
    else
        snprintf(act->origin, sizeof act->origin, ACT_ORIGIN_X_BF16);
    return 0;
}
