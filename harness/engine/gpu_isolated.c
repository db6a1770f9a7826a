#include "gpu_isolated.h"

#include <stdlib.h>
#include <string.h>

#include "isolate_kernel.h"
#include "kr_string.h"

typedef struct {
    int ok;
    char why[256];
} avail_out_t;

static int avail_child(void *ctx, void *out, size_t out_bytes, kr_error_t *err)
{
    (void)ctx;
    (void)out_bytes;
    (void)err;
    avail_out_t *a = out;
    a->ok = gpu_available(a->why, sizeof a->why);
    return 0;
}

int gpu_available_isolated(char *why, size_t cap)
{
    avail_out_t a;
    memset(&a, 0, sizeof a);
    isolate_result_t ir;
    kr_error_t err = {{0}};
    if (isolate_run(avail_child, NULL, &a, sizeof a, 60.0, &ir, &err) || ir.status != ISOLATE_OK) {
        kr_strlcpy(why, err.msg[0] ? err.msg : ir.message, cap);
        return 0;
    }
    kr_strlcpy(why, a.why, cap);
    return a.ok;
}

/* The shared buffer: the result struct (its pointers meaningless across the
 * fork), then the arrays it points to, at fixed offsets. */
typedef struct {
    kernel_call_t call;
    const gpu_run_options_t *opt;
    size_t out_off, codes_off, tscale_off, bscale_off;
} run_ctx_t;

typedef struct {
    int ran;            /* gpu_run_kernel returned 0 */
    gpu_run_result_t res;
    char err[KR_ERROR_MSG_MAX];
} run_header_t;

static int run_child(void *ctx, void *out, size_t out_bytes, kr_error_t *err)
{
    (void)out_bytes;
    run_ctx_t *c = ctx;
    run_header_t *h = out;
    kr_error_t e = {{0}};
    gpu_run_result_t r;
    h->ran = gpu_run_kernel(c->call.k, c->call.in, c->call.act, c->call.opt, c->opt, &r, &e) == 0;
    h->res = r;
    kr_strlcpy(h->err, e.msg, sizeof h->err);
    char *base = out;
    const int64_t MN = c->call.in->M * c->call.in->N, MK = c->call.in->M * c->call.in->K;
    if (r.out)
        memcpy(base + c->out_off, r.out, (size_t)MN * sizeof(uint16_t));
    if (r.q_codes)
        memcpy(base + c->codes_off, r.q_codes, (size_t)MK);
    if (r.q_token_scale)
        memcpy(base + c->tscale_off, r.q_token_scale, (size_t)c->call.in->M * sizeof(float));
    if (r.q_block_scale)
        memcpy(base + c->bscale_off, r.q_block_scale, (size_t)(MK / 32));
    gpu_run_result_free(&r);
    (void)err;
    return 0;
}

static void *dup_bytes(const void *src, size_t n)
{
    void *d = malloc(n ? n : 1);
    if (d && n)
        memcpy(d, src, n);
    return d;
}

int gpu_run_kernel_isolated(const kernel_desc_t *k, const kernel_inputs_t *in,
                            const kernel_act_t *act, const kernel_options_t *kopt,
                            const gpu_run_options_t *opt, double timeout_s,
                            gpu_run_result_t *res, isolate_result_t *ir, kr_error_t *err)
{
    memset(res, 0, sizeof *res);
    const int64_t MN = in->M * in->N, MK = in->M * in->K;
    run_ctx_t c = {.call = {.k = k, .in = in, .act = act, .opt = kopt}, .opt = opt};
    size_t off = (sizeof(run_header_t) + 63) & ~(size_t)63;
    c.out_off = off;
    off += (size_t)MN * sizeof(uint16_t);
    c.codes_off = off;
    off += (size_t)MK;
    c.tscale_off = (off + 7) & ~(size_t)7;
    off = c.tscale_off + (size_t)in->M * sizeof(float);
    c.bscale_off = off;
    off += (size_t)(MK / 32) + 64;
    char *buf = calloc(1, off);
    if (!buf)
        return kr_fail(err, "out of memory for an isolated GPU run");
    if (isolate_run(run_child, &c, buf, off, timeout_s, ir, err)) {
        free(buf);
        return -1;
    }
    if (ir->status == ISOLATE_OK) {
        const run_header_t *h = (const run_header_t *)buf;
        *res = h->res;
        res->out = h->res.out ? dup_bytes(buf + c.out_off, (size_t)MN * sizeof(uint16_t)) : NULL;
        res->q_codes = h->res.q_codes ? dup_bytes(buf + c.codes_off, (size_t)MK) : NULL;
        res->q_token_scale =
            h->res.q_token_scale ? dup_bytes(buf + c.tscale_off, (size_t)in->M * sizeof(float)) : NULL;
        res->q_block_scale = h->res.q_block_scale ? dup_bytes(buf + c.bscale_off, (size_t)(MK / 32)) : NULL;
        if (!h->ran) {
            /* The run could not happen (as an in-process run returning -1). */
            kr_strlcpy(ir->message, h->err, sizeof ir->message);
            ir->status = ISOLATE_FAILED;
        }
    }
    free(buf);
    return 0;
}
