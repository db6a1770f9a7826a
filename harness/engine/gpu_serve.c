/* The GPU worker: gpu_proto.h's requests answered on one device. */
#include "gpu_serve.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"
#include "formats.h"
#include "gemm_ref.h"
#include "gpu_device.h"
#include "gpu_launch.h"
#include "gpu_plugin_launch.h"
#include "gpu_proto.h"
#include "kr_string.h"
#include "plugin_loader.h"
#include "shm_arena.h"

typedef struct {
    gw_blob_t id;
    void *ptr;                  /* on the device */
} slot_t;

/* What the references derive from one weight: its fp32 (and fp64) values on
 * the device, or the stand-in's reference context (reference/gemm_ref.h). */
typedef struct {
    gw_blob_t a, b;             /* the blobs it came from (packed + scales, or the bf16 weight) */
    int layout, zero_is_zero;
    float *f32;
    double *f64;
    gemm_ref_ctx_t *ref_ctx;
} derived_t;

struct gpu_serve_state {
    gpu_device_t dev;
    int opened;
    slot_t *slots;
    int64_t n_slots, cap;
    derived_t mxfp4, dense;
};

static int same_blob(gw_blob_t a, gw_blob_t b)
{
    return a.bytes == b.bytes && a.hash == b.hash;
}

static void *arena_at(const gpu_serve_ctx_t *c, uint64_t offset)
{
    return offset == GW_NONE ? NULL : c->arena + offset;
}

static void derived_drop(gpu_serve_state_t *s, derived_t *d)
{
    gpu_dev_free(&s->dev, d->f32);
    gpu_dev_free(&s->dev, d->f64);
    gemm_ref_ctx_free(d->ref_ctx);
    memset(d, 0, sizeof *d);
}

static void evict(gpu_serve_state_t *s, gw_blob_t id)
{
    if (same_blob(id, s->mxfp4.a) || same_blob(id, s->mxfp4.b))
        derived_drop(s, &s->mxfp4);
    if (same_blob(id, s->dense.a))
        derived_drop(s, &s->dense);
    for (int64_t i = 0; i < s->n_slots; i++)
        if (same_blob(s->slots[i].id, id)) {
            gpu_dev_free(&s->dev, s->slots[i].ptr);
            s->slots[i] = s->slots[--s->n_slots];
            return;
        }
}

/* The device copy of an operand: held, or uploaded from the arena now. */
static int resolve(const gpu_serve_ctx_t *c, const gw_operand_t *o, const void **ptr, kr_error_t *err)
{
    gpu_serve_state_t *s = c->state;
    *ptr = NULL;
    if (o->id.bytes == 0)
        return 0;
    for (int64_t i = 0; i < s->n_slots; i++)
        if (same_blob(s->slots[i].id, o->id)) {
            *ptr = s->slots[i].ptr;
            return 0;
        }
    if (o->offset == GW_RESIDENT)
        return kr_fail(err, "GPU worker: blob %016llx (%llu bytes) named resident but not held",
                       (unsigned long long)o->id.hash, (unsigned long long)o->id.bytes);
    slot_t *slots = array_reserve_one(s->slots, s->n_slots, &s->cap, sizeof *slots, 16);
    if (!slots)
        return kr_fail(err, "GPU worker: out of memory for its blob table");
    s->slots = slots;
    void *p = NULL;
    int st = gpu_dev_alloc(&s->dev, &p, o->id.bytes);
    if (st == KR_GPU_OK)
        st = gpu_dev_upload(&s->dev, p, c->arena + o->offset, o->id.bytes);
    if (st != KR_GPU_OK) {
        gpu_dev_free(&s->dev, p);
        return kr_fail(err, "GPU worker: uploading %llu bytes: %s: %s",
                       (unsigned long long)o->id.bytes, kr_gpu_status_name(st), gpu_dev_error(&s->dev));
    }
    s->slots[s->n_slots++] = (slot_t){.id = o->id, .ptr = p};
    *ptr = p;
    return 0;
}

static const kernel_desc_t *find_kernel(const gpu_serve_ctx_t *c, const char *name)
{
    const kernel_desc_t *k = kernel_find(name);
    for (int i = 0; !k && i < c->n_extra; i++)
        if (!strcmp(c->extra[i]->name, name))
            k = c->extra[i];
    return k;
}

/* cuBLAS loaded and its handle made now, while kreplay reads its first
 * case, not inside the first reference: one 1 x 1 x 32 product (a failure
 * here shows again, with its message, at the first real reference). */
static void warm_references(gpu_serve_state_t *s)
{
    float *buf = NULL;
    if (gpu_dev_alloc(&s->dev, (void **)&buf, 66 * sizeof(float)) != KR_GPU_OK)
        return;
    if (gpu_dev_fill_u8(&s->dev, buf, 0, 66 * sizeof(float)) == KR_GPU_OK &&
        gpu_dev_gemm_f32(&s->dev, buf, buf + 32, 1, 1, 32, buf + 64) == KR_GPU_OK)
        (void)gpu_dev_sync(&s->dev);
    gpu_dev_free(&s->dev, buf);
}

static int op_hello(gpu_serve_ctx_t *c, const gw_hello_req_t *q, kr_error_t *err)
{
    gpu_serve_state_t *s = c->state;
    if (!s->opened) {
        if (gpu_device_open(&s->dev, q->standin, q->device, err))
            return -1;
        s->opened = 1;
        if (!q->standin && !strcmp(s->dev.backend, "cuda"))
            warm_references(s);
        if (!q->standin) {
            /* A Python kernel's interpreter, started by this worker, uses the same GPU. */
            char dev[32];
            snprintf(dev, sizeof dev, "cuda:%d", q->device);
            setenv("KREPLAY_PY_DEVICE", dev, 1);
        }
    }
    gw_hello_reply_t *r = (gw_hello_reply_t *)arena_at(c, q->head.reply);
    kr_strlcpy(r->name, s->dev.name, sizeof r->name);
    kr_strlcpy(r->backend, s->dev.backend, sizeof r->backend);
    r->mem_free = s->dev.mem_free;
    r->mem_total = s->dev.mem_total;
    r->device_count = s->dev.count;
    return 0;
}

static int need_device(const gpu_serve_ctx_t *c, kr_error_t *err)
{
    return c->state->opened ? 0 : kr_fail(err, "GPU worker: no device opened (hello first)");
}

/* The weight's device operands, into a kr_gpu_mxfp4_t. */
static int resolve_weight(const gpu_serve_ctx_t *c, const gw_weight_t *w, int64_t N, int64_t K,
                          kr_gpu_operands_t *op, kr_error_t *err)
{
    const void *packed, *scales, *ref, *bf16;
    if (resolve(c, &w->packed, &packed, err) || resolve(c, &w->scales, &scales, err) ||
        resolve(c, &w->case_ref, &ref, err) || resolve(c, &w->bf16, &bf16, err))
        return -1;
    op->w = (kr_gpu_mxfp4_t){.packed = packed, .scales = scales, .scale_layout = w->scale_layout,
                             .e8m0_zero_is_zero = w->e8m0_zero_is_zero, .N = N, .K = K};
    op->case_ref = ref;
    op->w_bf16 = bf16;
    return 0;
}

static int op_twin(gpu_serve_ctx_t *c, const gw_twin_req_t *q, kr_error_t *err)
{
    gpu_serve_state_t *s = c->state;
    const kernel_desc_t *k = find_kernel(c, q->kernel);
    if (!k)
        return kr_fail(err, "GPU worker: no kernel %s", q->kernel);
    if (need_device(c, err))
        return -1;
    kr_gpu_operands_t op = {.M = q->M, .N = q->N, .K = q->K, .dispatch_M = q->dispatch_M,
                            .x_fmt = q->x_fmt};
    if (resolve(c, &q->x, (const void **)&op.x, err) || resolve(c, &q->xs, (const void **)&op.xs, err) ||
        resolve(c, &q->a_scales, (const void **)&op.a_scales, err) ||
        resolve(c, &q->xf, (const void **)&op.xf, err) ||
        resolve(c, &q->x_bf16, (const void **)&op.x_bf16, err) ||
        resolve(c, &q->x_dequant, (const void **)&op.x_dequant, err) ||
        resolve_weight(c, &q->w, q->N, q->K, &op, err))
        return -1;
    gpu_run_options_t opt;
    gpu_run_options_default(&opt);
    opt.device = s->dev.index;
    opt.variant = (gpu_variant_t)q->variant;
    opt.reruns = q->reruns > 0 ? q->reruns : 1;
    opt.timed_runs = q->timed_runs;
    opt.canary_bytes = (size_t)q->canary_bytes;
    opt.fault = q->fault[0] ? q->fault : NULL;
    gw_twin_reply_t *r = (gw_twin_reply_t *)arena_at(c, q->head.reply);
    memset(r, 0, sizeof *r);
    r->out_offset = q->head.reply + shm_arena_align(sizeof *r);
    const size_t out_bytes = gpu_launch_out_bytes(k, q->M, q->N, q->K);
    r->scale_offset = r->out_offset + shm_arena_align(out_bytes);
    if (r->scale_offset + gpu_launch_scale_bytes(k, q->M, q->K) - q->head.reply > q->head.reply_cap)
        return kr_fail(err, "GPU worker: the reply for %s does not fit its %llu bytes", k->name,
                       (unsigned long long)q->head.reply_cap);
    gpu_run_result_init(&r->res, k, q->M, q->N, q->K, &opt, s->dev.standin);
    kr_strlcpy(r->res.device, s->dev.name, sizeof r->res.device);
    kr_error_t e = {{0}};
    r->ran = gpu_run_declined(k, &opt, &r->res) == 0 &&
             gpu_launch_twin(&s->dev, k, &q->kopt, &op, &opt, &r->res, c->arena + r->out_offset,
                             c->arena + r->scale_offset, &e) == 0;
    kr_strlcpy(r->err, e.msg[0] ? e.msg : r->res.note, sizeof r->err);
    r->retire = !r->ran && r->res.verdict == VERDICT_ERROR && !s->dev.standin;
    return 0;
}

/* The fp32 (or fp64) values of the request's weight on the device, kept
 * while the weight is. */
static int derived_weight(gpu_serve_ctx_t *c, const gw_ref_req_t *q, const void *b0, const void *b1,
                          const void **out, kr_error_t *err)
{
    gpu_serve_state_t *s = c->state;
    derived_t *d = q->dense_bf16 ? &s->dense : &s->mxfp4;
    const gw_blob_t a = q->dense_bf16 ? q->w.bf16.id : q->w.packed.id;
    const gw_blob_t b = q->dense_bf16 ? (gw_blob_t){0, 0} : q->w.scales.id;
    if (!same_blob(d->a, a) || !same_blob(d->b, b) || d->layout != q->w.scale_layout ||
        d->zero_is_zero != q->w.e8m0_zero_is_zero) {
        derived_drop(s, d);
        *d = (derived_t){.a = a, .b = b, .layout = q->w.scale_layout,
                         .zero_is_zero = q->w.e8m0_zero_is_zero};
    }
    const size_t n = (size_t)q->N * (size_t)q->K;
    int st = KR_GPU_OK;
    if (!d->f32 && (st = gpu_dev_alloc(&s->dev, (void **)&d->f32, n * sizeof(float))) == KR_GPU_OK) {
        const kr_gpu_mxfp4_t w = {.packed = b0, .scales = b1, .scale_layout = q->w.scale_layout,
                                  .e8m0_zero_is_zero = q->w.e8m0_zero_is_zero, .N = q->N, .K = q->K};
        st = q->dense_bf16 ? gpu_dev_bf16_widen(&s->dev, b0, d->f32, n) : gpu_dev_dequant(&s->dev, &w, d->f32);
    }
    if (st == KR_GPU_OK && q->f64 && !d->f64 &&
        (st = gpu_dev_alloc(&s->dev, (void **)&d->f64, n * sizeof(double))) == KR_GPU_OK)
        st = gpu_dev_f32_widen(&s->dev, d->f32, d->f64, n);
    if (st != KR_GPU_OK) {
        kr_error_t e = {{0}};
        kr_fail(&e, "GPU reference: the weight's values: %s: %s", kr_gpu_status_name(st),
                gpu_dev_error(&s->dev));
        derived_drop(s, d);
        *err = e;
        return -1;
    }
    *out = q->f64 ? (const void *)d->f64 : (const void *)d->f32;
    return 0;
}

/* The reference on the GPU: cuBLAS on the resident operands, C downloaded once. */
static int ref_on_gpu(gpu_serve_ctx_t *c, const gw_ref_req_t *q, const void *A, const void *b0,
                      const void *b1, void *C_host, kr_error_t *err)
{
    gpu_serve_state_t *s = c->state;
    const void *B;
    if (derived_weight(c, q, b0, b1, &B, err))
        return -1;
    const size_t elem = q->f64 ? sizeof(double) : sizeof(float);
    void *C = NULL, *A64 = NULL;
    int st = gpu_dev_alloc(&s->dev, &C, (size_t)q->M * (size_t)q->N * elem);
    if (st == KR_GPU_OK && q->f64 &&
        (st = gpu_dev_alloc(&s->dev, &A64, (size_t)q->M * (size_t)q->K * sizeof(double))) == KR_GPU_OK)
        st = gpu_dev_f32_widen(&s->dev, A, A64, (size_t)q->M * (size_t)q->K);
    if (st == KR_GPU_OK)
        st = q->f64 ? gpu_dev_gemm_f64(&s->dev, A64, B, q->M, q->N, q->K, C)
                    : gpu_dev_gemm_f32(&s->dev, A, B, q->M, q->N, q->K, C);
    if (st == KR_GPU_OK)
        st = gpu_dev_sync(&s->dev);
    if (st == KR_GPU_OK)
        st = gpu_dev_download(&s->dev, C_host, C, (size_t)q->M * (size_t)q->N * elem);
    gpu_dev_free(&s->dev, C);
    gpu_dev_free(&s->dev, A64);
    if (st != KR_GPU_OK)
        return kr_fail(err, "GPU reference: %s%s: %s: %s", q->f64 ? "DGEMM" : "SGEMM",
                       q->dense_bf16 ? " (bf16 weight)" : "", kr_gpu_status_name(st),
                       gpu_dev_error(&s->dev));
    return 0;
}

/* The stand-in's reference: reference/gemm_ref.h's grid of sgemm calls on
 * its host buffers, the CPU path's bits exactly. */
static int ref_standin(gpu_serve_ctx_t *c, const gw_ref_req_t *q, const float *A, const void *b0,
                       const void *b1, void *C, kr_error_t *err)
{
    gpu_serve_state_t *s = c->state;
    if (q->dense_bf16) {
        const void *wf;
        derived_t *d = &s->dense;
        if (!same_blob(d->a, q->w.bf16.id)) {
            derived_drop(s, d);
            d->a = q->w.bf16.id;
        }
        const size_t n = (size_t)q->N * (size_t)q->K;
        if (!d->f32) {
            if (!(d->f32 = malloc(n * sizeof(float))))
                return kr_fail(err, "stand-in reference: out of memory for the bf16 weight's values");
            for (size_t i = 0; i < n; i++)
                d->f32[i] = bf16_decode(((const uint16_t *)b0)[i]);
        }
        wf = d->f32;
        gemm_dense_f32_panels(A, wf, q->M, q->N, q->K, q->panel_rows, C);
        return 0;
    }
    const mxfp4_weight_t W = {.packed = b0, .scales = b1,
                              .layout = q->w.scale_layout ? SCALE_LAYOUT_KN : SCALE_LAYOUT_NK,
                              .e8m0_mode = q->w.e8m0_zero_is_zero ? E8M0_ZERO_IS_ZERO : E8M0_SPEC,
                              .N = q->N, .K = q->K};
    if (q->f64)
        return gemm_ref_f64(A, q->M, &W, 0, C, err);
    derived_t *d = &s->mxfp4;
    if (!same_blob(d->a, q->w.packed.id) || !same_blob(d->b, q->w.scales.id) ||
        d->layout != q->w.scale_layout || d->zero_is_zero != q->w.e8m0_zero_is_zero) {
        derived_drop(s, d);
        *d = (derived_t){.a = q->w.packed.id, .b = q->w.scales.id, .layout = q->w.scale_layout,
                         .zero_is_zero = q->w.e8m0_zero_is_zero};
    }
    if (!d->ref_ctx && gemm_ref_ctx_init(&d->ref_ctx, &W, 0, err))
        return -1;
    gemm_ref_ctx_set_panel_rows(d->ref_ctx, q->panel_rows);
    gemm_ref_ctx_set_park_blas(d->ref_ctx, 1);
    return gemm_ref_ctx_f32(d->ref_ctx, A, q->M, C, err);
}

static int op_ref(gpu_serve_ctx_t *c, const gw_ref_req_t *q, kr_error_t *err)
{
    if (need_device(c, err))
        return -1;
    const size_t elem = q->f64 ? sizeof(double) : sizeof(float);
    if ((uint64_t)q->M * (uint64_t)q->N * elem > q->head.reply_cap)
        return kr_fail(err, "GPU worker: the reference does not fit its reply");
    const void *A, *b0, *b1 = NULL;
    if (resolve(c, &q->a, &A, err) ||
        resolve(c, q->dense_bf16 ? &q->w.bf16 : &q->w.packed, &b0, err) ||
        (!q->dense_bf16 && resolve(c, &q->w.scales, &b1, err)))
        return -1;
    if (!A || !b0 || (!q->dense_bf16 && !b1))
        return kr_fail(err, "GPU worker: a reference without its operands");
    void *C = arena_at(c, q->head.reply);
    return c->state->dev.standin ? ref_standin(c, q, A, b0, b1, C, err)
                                 : ref_on_gpu(c, q, A, b0, b1, C, err);
}

static int op_plugin(gpu_serve_ctx_t *c, const gw_plugin_req_t *q, kr_error_t *err)
{
    const kernel_desc_t *k = find_kernel(c, q->kernel);
    if (!k || !plugin_kernel_is_gpu(k))
        return kr_fail(err, "GPU worker: no GPU plugin kernel %s", q->kernel);
    if (need_device(c, err))
        return -1;
    gpu_plugin_operands_t op = {.M = q->M, .N = q->N, .K = q->K};
    if (resolve(c, &q->x, &op.x, err) || resolve(c, &q->xs, &op.xs, err) ||
        resolve(c, &q->weight, &op.weight, err) || resolve(c, &q->scales, &op.scales, err) ||
        resolve(c, &q->ref, &op.ref, err))
        return -1;
    gw_launch_reply_t *r = (gw_launch_reply_t *)arena_at(c, q->head.reply);
    memset(r, 0, sizeof *r);
    r->out_offset = q->head.reply + shm_arena_align(sizeof *r);
    if (r->out_offset + (uint64_t)q->M * (uint64_t)q->N * 2 - q->head.reply > q->head.reply_cap)
        return kr_fail(err, "GPU worker: the output of %s does not fit its reply", k->name);
    return gpu_plugin_launch(&c->state->dev, k, &op, q->runs, q->row_offset,
                             (uint16_t *)(void *)(c->arena + r->out_offset), &r->outcome, &r->retire,
                             err);
}

/* run_cpu's inputs, pointing into the arena. */
static void host_inputs(const gpu_serve_ctx_t *c, const gw_host_req_t *q, kernel_inputs_t *in,
                        kernel_act_t *act)
{
    *in = (kernel_inputs_t){
        .M = q->M, .N = q->N, .K = q->K, .dispatch_M = q->dispatch_M,
        .x = arena_at(c, q->x), .x_fp8 = arena_at(c, q->x_fp8), .x_scale = arena_at(c, q->x_scale),
        .x_fp8_format = (fp8_format_t)q->x_fp8_format,
        .weight = {.packed = arena_at(c, q->packed), .scales = arena_at(c, q->scales),
                   .layout = (scale_layout_t)q->scale_layout, .e8m0_mode = (e8m0_mode_t)q->e8m0_mode,
                   .N = q->N, .K = q->K},
        .weight_ref = arena_at(c, q->weight_ref), .weight_ref_len = q->weight_ref_len,
        .weight_bf16 = arena_at(c, q->weight_bf16),
    };
    *act = (kernel_act_t){.kind = (act_kind_t)q->act_kind, .M = q->M, .K = q->K,
                          .codes = arena_at(c, q->codes), .token_scale = arena_at(c, q->token_scale),
                          .block_scale = arena_at(c, q->block_scale),
                          .fp8_format = (fp8_format_t)q->act_fp8_format,
                          .dequant = arena_at(c, q->dequant)};
    kr_strlcpy(act->origin, q->act_origin, sizeof act->origin);
}

static int op_host(gpu_serve_ctx_t *c, const gw_host_req_t *q, kr_error_t *err)
{
    const kernel_desc_t *k = find_kernel(c, q->kernel);
    if (!k || !k->run_cpu)
        return kr_fail(err, "worker: no kernel %s to run", q->kernel);
    kernel_inputs_t in;
    kernel_act_t act;
    host_inputs(c, q, &in, &act);
    gw_launch_reply_t *r = (gw_launch_reply_t *)arena_at(c, q->head.reply);
    memset(r, 0, sizeof *r);
    r->out_offset = q->head.reply + shm_arena_align(sizeof *r);
    const launch_plan_t plan = {.fault = q->has_fault ? &q->fault : NULL, .isolate = 0,
                                .runs = q->runs > 0 ? q->runs : 1, .row_offset = q->row_offset};
    return launch_kernel(k, &in, &act, &q->kopt, &plan,
                         (uint16_t *)(void *)(c->arena + r->out_offset), &r->outcome, err);
}

/* The request's op, once its size is checked against the op's record. */
static int dispatch(gpu_serve_ctx_t *c, const gw_head_t *h, size_t bytes, kr_error_t *err)
{
    static const size_t sizes[] = {
        [GW_OP_HELLO] = sizeof(gw_hello_req_t), [GW_OP_TWIN] = sizeof(gw_twin_req_t),
        [GW_OP_REF] = sizeof(gw_ref_req_t),     [GW_OP_PLUGIN] = sizeof(gw_plugin_req_t),
        [GW_OP_HOST] = sizeof(gw_host_req_t),   [GW_OP_PING] = sizeof(gw_head_t),
    };
    if (h->op < GW_OP_HELLO || h->op > GW_OP_PING || bytes != sizes[h->op])
        return kr_fail(err, "GPU worker: a malformed request (op %u, %zu bytes)", h->op, bytes);
    switch ((gw_op_t)h->op) {
    case GW_OP_HELLO: return op_hello(c, (const gw_hello_req_t *)h, err);
    case GW_OP_TWIN: return op_twin(c, (const gw_twin_req_t *)h, err);
    case GW_OP_REF: return op_ref(c, (const gw_ref_req_t *)h, err);
    case GW_OP_PLUGIN: return op_plugin(c, (const gw_plugin_req_t *)h, err);
    case GW_OP_HOST: return op_host(c, (const gw_host_req_t *)h, err);
    case GW_OP_PING: return 0;
    }
    return -1;
}

int gpu_serve(void *ctx, const void *request, size_t request_bytes, kr_error_t *err)
{
    gpu_serve_ctx_t *c = ctx;
    if (request_bytes < sizeof(gw_head_t))
        return kr_fail(err, "GPU worker: a request of %zu bytes", request_bytes);
    if (!c->state && !(c->state = calloc(1, sizeof *c->state)))
        return kr_fail(err, "GPU worker: out of memory");
    /* Aligned copy: the request buffer's alignment is the worker's business. */
    _Alignas(max_align_t) unsigned char buf[sizeof(gw_twin_req_t) > sizeof(gw_host_req_t)
                                                ? sizeof(gw_twin_req_t) + 64
                                                : sizeof(gw_host_req_t) + 64];
    if (request_bytes > sizeof buf)
        return kr_fail(err, "GPU worker: a request of %zu bytes", request_bytes);
    memcpy(buf, request, request_bytes);
    const gw_head_t *h = (const gw_head_t *)buf;
    for (uint32_t i = 0; i < h->n_evict && i < GW_EVICT_MAX; i++)
        evict(c->state, h->evict[i]);
    return dispatch(c, h, request_bytes, err);
}

void gpu_serve_ctx_release(gpu_serve_ctx_t *ctx)
{
    gpu_serve_state_t *s = ctx->state;
    if (!s)
        return;
    derived_drop(s, &s->mxfp4);
    derived_drop(s, &s->dense);
    for (int64_t i = 0; i < s->n_slots; i++)
        gpu_dev_free(&s->dev, s->slots[i].ptr);
    free(s->slots);
    if (s->opened)
        gpu_device_close(&s->dev);
    free(s);
    ctx->state = NULL;
}
