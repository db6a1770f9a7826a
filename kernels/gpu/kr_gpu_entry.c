/* The GPU twins of kr_gpu_entry.h: one row per kernel_gpu_entry_t, mapping
 * the operands the runner uploaded onto the launch of kr_gpu.h. */
#include "kr_gpu_entry.h"

#include <string.h>

static int launch_w4a8_perblock(const kr_gpu_operands_t *o, kr_gpu_stream_t s)
{
    return kr_gpu_w4a8_perblock(o->x, o->x_fmt, o->xs, o->M, &o->w, o->out, s);
}

static int launch_w4a8_folded(const kr_gpu_operands_t *o, kr_gpu_stream_t s)
{
    return kr_gpu_w4a8_folded(o->x, o->x_fmt, o->xs, o->M, &o->w, o->ref, o->out, s);
}

/* The folded path on the matrix units: gfx12 WMMA on ROCm, mma.sync on CUDA. */
static int launch_w4a8_folded_matrix(const kr_gpu_operands_t *o, kr_gpu_stream_t s)
{
    if (strcmp(kr_gpu_backend(), "hip") == 0)
        return kr_gpu_w4a8_wmma_gfx12(o->x, o->xs, o->M, o->w8, o->ref, o->w.e8m0_zero_is_zero, o->N,
                                      o->K, o->out, s);
    return kr_gpu_w4a8_mma(o->x, o->xs, o->M, o->w8, o->ref, o->w.e8m0_zero_is_zero, o->N, o->K,
                           o->out, s);
}

/* The matrix units read the weight pre-shifted to e4m3, one byte per element. */
static int prepare_w4a8_folded(kr_gpu_operands_t *o, kr_gpu_prepare_t *p)
{
    if (!p->matrix)
        return KR_GPU_OK;
    if (o->x_fmt != 0) {
        p->decline = "the matrix units take e4m3fn activations only";
        return KR_GPU_ERR_UNSUPPORTED;
    }
    void *w8;
    p->step = "alloc w8";
    int st = p->alloc(p->owner, &w8, (size_t)o->N * (size_t)o->K);
    if (st != KR_GPU_OK)
        return st;
    p->step = "preshift";
    if ((st = kr_gpu_w4a8_preshift(&o->w, o->ref, w8, p->stream)) != KR_GPU_OK)
        return st;
    o->w8 = w8;
    p->extra_bytes = (double)o->N * (double)o->K / 2 - (double)o->N * (double)o->K / 32;
    return KR_GPU_OK;
}

static int launch_w4a8_decode(const kr_gpu_operands_t *o, kr_gpu_stream_t s)
{
    return kr_gpu_w4a8_decode(o->x, o->x_fmt, o->xs, o->M, &o->w, o->wdec, o->ref, o->splits, o->scratch,
                              o->scratch_bytes, o->counters, o->n_counters, o->out, s);
}

/* Split-K scratch, zeroed block counters and the load-time (WPERM-like)
 * weight permutation the decode kernel reads. */
static int prepare_w4a8_decode(kr_gpu_operands_t *o, kr_gpu_prepare_t *p)
{
    void *scratch, *counters, *dec;
    const size_t scratch_bytes = kr_gpu_w4a8_decode_scratch_bytes(o->M, o->N, o->splits);
    const int64_t n_counters = kr_gpu_w4a8_decode_counters(o->N);
    int st;
    p->step = "alloc split-K scratch";
    if ((st = p->alloc(p->owner, &scratch, scratch_bytes)) != KR_GPU_OK)
        return st;
    p->step = "alloc block counters";
    if ((st = p->alloc(p->owner, &counters, (size_t)n_counters * sizeof(int))) != KR_GPU_OK)
        return st;
    p->step = "zero block counters";
    if ((st = kr_gpu_memset(counters, 0, (size_t)n_counters * sizeof(int), p->stream)) != KR_GPU_OK)
        return st;
    p->step = "alloc decode layout";
    if ((st = p->alloc(p->owner, &dec, kr_gpu_w4a8_decode_layout_bytes(o->N, o->K))) != KR_GPU_OK)
        return st;
    p->step = "decode layout";
    if ((st = kr_gpu_w4a8_decode_layout(&o->w, dec, p->stream)) != KR_GPU_OK)
        return st;
    o->scratch = scratch;
    o->scratch_bytes = scratch_bytes;
    o->counters = counters;
    o->n_counters = n_counters;
    o->wdec = dec;
    return KR_GPU_OK;
}

static int launch_w4a4_aiter(const kr_gpu_operands_t *o, kr_gpu_stream_t s)
{
    return kr_gpu_w4a4_aiter(o->x, o->a_scales, o->M, &o->w, o->out, s);
}

static int launch_bf16_splitk(const kr_gpu_operands_t *o, kr_gpu_stream_t s)
{
    return kr_gpu_bf16_skinny(o->x_bf16, o->w_bf16, o->M, o->N, o->K, o->splits, o->out, s);
}

static int launch_quant_fp8_token(const kr_gpu_operands_t *o, kr_gpu_stream_t s)
{
    return kr_gpu_quant_fp8_token(o->xf, o->M, o->K, o->out, o->scale_out, s);
}

static int launch_quant_mxfp4(const kr_gpu_operands_t *o, kr_gpu_stream_t s)
{
    return kr_gpu_quant_mxfp4(o->xf, o->M, o->K, o->out, o->scale_out, s);
}

static const kr_gpu_entry_t entries[] = {
    {.entry = KERNEL_GPU_W4A8_PERBLOCK, .launch = launch_w4a8_perblock},
    {.entry = KERNEL_GPU_W4A8_FOLDED, .launch = launch_w4a8_folded,
     .launch_matrix = launch_w4a8_folded_matrix, .prepare = prepare_w4a8_folded, .fault_host = 1},
    {.entry = KERNEL_GPU_W4A8_DECODE, .launch = launch_w4a8_decode, .prepare = prepare_w4a8_decode,
     .uses_splits = 1},
    {.entry = KERNEL_GPU_W4A4_AITER, .launch = launch_w4a4_aiter},
    {.entry = KERNEL_GPU_BF16_SPLITK, .launch = launch_bf16_splitk, .uses_splits = 1},
    {.entry = KERNEL_GPU_QUANT_FP8_TOKEN, .launch = launch_quant_fp8_token},
    {.entry = KERNEL_GPU_QUANT_MXFP4, .launch = launch_quant_mxfp4},
};

const kr_gpu_entry_t *kr_gpu_entry_find(kernel_gpu_entry_t entry)
{
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (entries[i].entry == entry && entry != KERNEL_GPU_NONE)
            return &entries[i];
    return NULL;
}

kernel_gpu_entry_t kr_gpu_entry_fault_host(void)
{
    for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++)
        if (entries[i].fault_host)
            return entries[i].entry;
    return KERNEL_GPU_NONE;
}
