/* The requests a replay sends its GPU worker (gpu_session.h): a twin's
 * run, a reference, a plugin's launches. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault_inject.h"
#include "formats.h"
#include "gpu_bulk.h"
#include "gpu_launch.h"
#include "gpu_session_int.h"
#include "isolate_kernel.h"
#include "kr_string.h"
#include "plugin_loader.h"
#include "kr_alloc.h"
#include "shm_arena.h"

static void *dup_bytes(const void *src, size_t n)
{
    void *d = kr_alloc_array(n ? n : 1);
    if (d && n)
        gpu_bulk_copy(d, src, n);
    return d;
}

/* The case's weight as operands: MXFP4 (checkpoint order), its weight_ref
 * when it has one per row, the bf16 weight. */
static int weight_operands(gpu_session_t *s, const kernel_inputs_t *in, int mxfp4, int bf16,
                           gw_weight_t *w, kr_error_t *err)
{
    const size_t N = (size_t)in->N, K = (size_t)in->K;
    memset(w, 0, sizeof *w);
    w->scale_layout = in->weight.layout == SCALE_LAYOUT_KN;
    w->e8m0_zero_is_zero = in->weight.e8m0_mode == E8M0_ZERO_IS_ZERO;
    if (mxfp4 && (gs_operand(s, in->weight.packed, N * K / 2, 1, &w->packed, err) ||
                  gs_operand(s, in->weight.scales, N * K / 32, 1, &w->scales, err) ||
                  gs_operand(s, in->weight_ref_len == in->N ? in->weight_ref : NULL, N, 1,
                             &w->case_ref, err)))
        return -1;
    if (bf16 && gs_operand(s, in->weight_bf16, N * K * 2, 1, &w->bf16, err))
        return -1;
    return 0;
}

/* The activations the descriptor's formats call for. */
static int twin_operands(gpu_session_t *s, const kernel_desc_t *k, const kernel_inputs_t *in,
                         const kernel_act_t *act, gw_twin_req_t *q, kr_error_t *err)
{
    const size_t M = (size_t)in->M, K = (size_t)in->K;
    if (k->op == KERNEL_OP_QUANT)
        return gs_operand(s, in->x, M * K * sizeof(float), 1, &q->xf, err);
    const int standin = gpu_session_is_standin(s);
    /* The stand-in's models read the fp32 values; R_exact does too, next. */
    if (act && act->dequant && (standin || (k->refs & REF_EXACT)) &&
        gs_operand(s, act->dequant, M * K * sizeof(float), 0, &q->x_dequant, err))
        return -1;
    if (k->act.elem == ELEM_BF16) {
        uint16_t *xb = act && act->dequant ? malloc(M * K * sizeof(uint16_t)) : NULL;
        for (size_t i = 0; xb && i < M * K; i++)
            xb[i] = bf16_encode(act->dequant[i]);   /* already bf16 values: exact */
        const int st = gs_operand(s, xb, M * K * 2, 0, &q->x_bf16, err);
        free(xb);
        return st || weight_operands(s, in, 0, 1, &q->w, err);
    }
    q->x_fmt = act && act->fp8_format == FP8_E4M3FNUZ;
    if (act && (gs_operand(s, act->codes, M * K, 0, &q->x, err) ||
                gs_operand(s, act->kind == ACT_FP8_PER_TOKEN ? act->token_scale : NULL,
                           M * sizeof(float), 0, &q->xs, err) ||
                gs_operand(s, act->kind == ACT_FP8_PER_TOKEN ? NULL : act->block_scale, M * (K / 32),
                           0, &q->a_scales, err)))
        return -1;
    return weight_operands(s, in, 1, 0, &q->w, err);
}

/* The twin's reply into res, its outputs copied out of the arena. */
static int twin_result(gpu_session_t *s, const kernel_desc_t *k, const gw_twin_req_t *q,
                       gpu_run_result_t *res, isolate_result_t *ir, kr_error_t *err)
{
    const gw_twin_reply_t *r = gs_at(s, q->head.reply);
    *res = r->res;
    res->out = NULL;
    res->q_codes = NULL;
    res->q_token_scale = NULL;
    res->q_block_scale = NULL;
    if (r->retire)
        gs_retire(s);
    if (!r->ran) {
        ir->status = ISOLATE_FAILED;
        kr_strlcpy(ir->message, r->err, sizeof ir->message);
        return 0;
    }
    const size_t out_bytes = gpu_launch_out_bytes(k, q->M, q->N, q->K);
    const size_t scale_bytes = gpu_launch_scale_bytes(k, q->M, q->K);
    void *out = dup_bytes(gs_at(s, r->out_offset), out_bytes);
    void *scales = scale_bytes ? dup_bytes(gs_at(s, r->scale_offset), scale_bytes) : NULL;
    if (!out || (scale_bytes && !scales)) {
        free(out);
        free(scales);
        return kr_fail(err, "out of memory for the GPU output of %s", k->name);
    }
    if (k->op != KERNEL_OP_QUANT)
        res->out = out;
    else if ((res->q_codes = out) && k->act.elem == ELEM_E2M1)
        res->q_block_scale = scales;
    else
        res->q_token_scale = (float *)scales;
    return 0;
}

int gpu_session_twin(gpu_session_t *s, const kernel_desc_t *k, const kernel_inputs_t *in,
                     const kernel_act_t *act, const kernel_options_t *kopt,
                     const gpu_run_options_t *opt, gpu_run_result_t *res, isolate_result_t *ir,
                     kr_error_t *err)
{
    memset(res, 0, sizeof *res);
    memset(ir, 0, sizeof *ir);
    gw_twin_req_t *q = calloc(1, sizeof *q);
    if (!q)
        return kr_fail(err, "out of memory");
    q->head.op = GW_OP_TWIN;
    kr_strlcpy(q->kernel, k->name, sizeof q->kernel);
    kr_strlcpy(q->fault, opt->fault ? opt->fault : "", sizeof q->fault);
    q->variant = opt->variant;
    q->reruns = opt->reruns;
    q->timed_runs = opt->timed_runs;
    q->canary_bytes = opt->canary_bytes;
    kernel_options_default(&q->kopt);
    if (kopt)
        q->kopt = *kopt;
    q->M = in->M;
    q->N = in->N;
    q->K = in->K;
    q->dispatch_M = in->dispatch_M;
    const size_t cap = shm_arena_align(sizeof(gw_twin_reply_t)) +
                       shm_arena_align(gpu_launch_out_bytes(k, in->M, in->N, in->K)) +
                       gpu_launch_scale_bytes(k, in->M, in->K);
    const int launches = q->reruns + q->timed_runs;
    int st = gs_begin(s, err) || twin_operands(s, k, in, act, q, err) ||
             gs_reply(s, cap, &q->head, err) || gs_call(s, &q->head, sizeof *q, launches, ir, err)
                 ? -1
                 : 0;
    if (st == 0 && ir->status == ISOLATE_OK)
        st = twin_result(s, k, q, res, ir, err);
    free(q);
    return st;
}

static int ref_call(gpu_session_t *s, gw_ref_req_t *q, void *C, kr_error_t *err)
{
    const size_t bytes = (size_t)q->M * (size_t)q->N * (q->f64 ? sizeof(double) : sizeof(float));
    isolate_result_t ir;
    if (gs_reply(s, bytes, &q->head, err) || gs_call(s, &q->head, sizeof *q, 1, &ir, err))
        return -1;
    if (ir.status != ISOLATE_OK)
        return kr_fail(err, "%s%s", ir.status == ISOLATE_FAILED ? "" : "GPU reference: ", ir.message);
    gpu_bulk_copy(C, gs_at(s, q->head.reply), bytes);
    return 0;
}

int gpu_session_ref_mxfp4(gpu_session_t *s, const float *A, int64_t M, const mxfp4_weight_t *W,
                          int f64, int64_t panel_rows, void *C, kr_error_t *err)
{
    gw_ref_req_t q = {.head = {.op = GW_OP_REF}, .f64 = f64, .M = M, .N = W->N, .K = W->K,
                      .panel_rows = panel_rows};
    const kernel_inputs_t in = {.M = M, .N = W->N, .K = W->K, .weight = *W};
    if (gs_begin(s, err) ||
        gs_operand(s, A, (size_t)M * (size_t)W->K * sizeof(float), 0, &q.a, err) ||
        weight_operands(s, &in, 1, 0, &q.w, err))
        return -1;
    return ref_call(s, &q, C, err);
}

int gpu_session_ref_bf16(gpu_session_t *s, const float *A, int64_t M, const uint16_t *W,
                         int64_t N, int64_t K, int64_t panel_rows, float *C, kr_error_t *err)
{
    gw_ref_req_t q = {.head = {.op = GW_OP_REF}, .dense_bf16 = 1, .M = M, .N = N, .K = K,
                      .panel_rows = panel_rows};
    const kernel_inputs_t in = {.M = M, .N = N, .K = K, .weight_bf16 = W};
    if (gs_begin(s, err) || gs_operand(s, A, (size_t)M * (size_t)K * sizeof(float), 0, &q.a, err) ||
        weight_operands(s, &in, 0, 1, &q.w, err))
        return -1;
    return ref_call(s, &q, C, err);
}

/* The reply of a plugin's launches, or how the worker ended. */
static void launch_result(gpu_session_t *s, const gw_head_t *h, const isolate_result_t *ir,
                          uint16_t *out, size_t out_bytes, launch_outcome_t *o)
{
    memset(o, 0, sizeof *o);
    if (ir->status != ISOLATE_OK) {
        o->verdict = isolate_verdict(ir);
        o->seconds = ir->seconds;
        kr_strlcpy(o->message, ir->message, sizeof o->message);
        return;
    }
    const gw_launch_reply_t *r = gs_at(s, h->reply);
    *o = r->outcome;
    if (o->ok)
        gpu_bulk_copy(out, gs_at(s, r->out_offset), out_bytes);
    if (r->retire)
        gs_retire(s);
}

static int gpu_plugin_launches(gpu_session_t *s, const kernel_desc_t *k, const kernel_inputs_t *in,
                               const kernel_act_t *act, const launch_plan_t *plan, uint16_t *out,
                               launch_outcome_t *o, kr_error_t *err);

/* --inject on a GPU plugin: its operands changed before they are laid out
 * and sent, its output after it comes back, as fault_run_kernel does
 * around a host run. */
static int gpu_plugin_call(gpu_session_t *s, const kernel_desc_t *k, const kernel_inputs_t *in,
                           const kernel_act_t *act, const kernel_options_t *kopt,
                           const launch_plan_t *plan, uint16_t *out, launch_outcome_t *o,
                           kr_error_t *err)
{
    if (!plan->fault)
        return gpu_plugin_launches(s, k, in, act, plan, out, o, err);
    kernel_options_t defaults;
    kernel_options_default(&defaults);
    fault_inputs_t fi;
    if (fault_inputs_apply(plan->fault, in, kopt ? kopt : &defaults, &fi, err))
        return -1;
    kernel_act_t own;
    const int remake = fi.act_changed != 0;
    if (remake && k->prepare_act(k, &fi.in, &fi.opt, &own, err)) {
        fault_inputs_free(&fi);
        return -1;
    }
    int st = gpu_plugin_launches(s, k, &fi.in, remake ? &own : act, plan, out, o, err);
    if (st == 0 && o->ok && fault_output_apply(plan->fault, in, act, out, err))
        st = -1;
    if (st == 0 && o->ok) {
        char d[160];
        fault_describe(plan->fault, d, sizeof d);
        const size_t len = strlen(o->info.note);
        snprintf(o->info.note + len, sizeof o->info.note - len, "%sinjected fault %s",
                 len ? "; " : "", d);
    }
    if (remake)
        kernel_act_free(&own);
    fault_inputs_free(&fi);
    return st;
}

static int gpu_plugin_launches(gpu_session_t *s, const kernel_desc_t *k, const kernel_inputs_t *in,
                               const kernel_act_t *act, const launch_plan_t *plan, uint16_t *out,
                               launch_outcome_t *o, kr_error_t *err)
{
    const size_t M = (size_t)in->M, N = (size_t)in->N, K = (size_t)in->K;
    gw_plugin_req_t q = {.head = {.op = GW_OP_PLUGIN}, .runs = plan->runs, .M = in->M, .N = in->N,
                         .K = in->K, .row_offset = plan->row_offset};
    kr_strlcpy(q.kernel, k->name, sizeof q.kernel);
    plugin_layout_t h;
    if (plugin_layout(k, in, &h, err))
        return -1;
    /* The laid-out weight is the case's when no reordering was needed. */
    const int weight_stable = h.weight == in->weight.packed, scales_stable = h.scales == in->weight.scales;
    isolate_result_t ir;
    int st = gs_begin(s, err) || gs_operand(s, act->codes, M * K, 0, &q.x, err) ||
             gs_operand(s, act->token_scale, M * sizeof(float), 0, &q.xs, err) ||
             gs_operand(s, h.weight, N * K / 2, weight_stable, &q.weight, err) ||
             gs_operand(s, h.scales, N * K / 32, scales_stable, &q.scales, err) ||
             gs_operand(s, h.ref, N, 0, &q.ref, err) ||
             gs_reply(s, shm_arena_align(sizeof(gw_launch_reply_t)) + M * N * 2, &q.head, err) ||
             gs_call(s, &q.head, sizeof q, plan->runs, &ir, err) ? -1 : 0;
    plugin_layout_free(&h);
    if (st == 0)
        launch_result(s, &q.head, &ir, out, M * N * 2, o);
    return st;
}

/* A persistent plugin's run_cpu in the worker, its inputs copied into the arena. */
static int host_call(gpu_session_t *s, const kernel_desc_t *k, const kernel_inputs_t *in,
                     const kernel_act_t *act, const kernel_options_t *kopt,
                     const launch_plan_t *plan, uint16_t *out, launch_outcome_t *o, kr_error_t *err)
{
    const size_t M = (size_t)in->M, N = (size_t)in->N, K = (size_t)in->K;
    gw_host_req_t *q = calloc(1, sizeof *q);
    if (!q)
        return kr_fail(err, "out of memory");
    *q = (gw_host_req_t){.head = {.op = GW_OP_HOST}, .runs = plan->runs, .row_offset = plan->row_offset,
                         .has_fault = plan->fault != NULL, .M = in->M, .N = in->N, .K = in->K,
                         .dispatch_M = in->dispatch_M, .weight_ref_len = in->weight_ref_len,
                         .x_fp8_format = in->x_fp8_format, .scale_layout = in->weight.layout,
                         .e8m0_mode = in->weight.e8m0_mode, .act_kind = act->kind,
                         .act_fp8_format = act->fp8_format};
    kr_strlcpy(q->kernel, k->name, sizeof q->kernel);
    kr_strlcpy(q->act_origin, act->origin, sizeof q->act_origin);
    kernel_options_default(&q->kopt);
    if (kopt)
        q->kopt = *kopt;
    if (plan->fault)
        q->fault = *plan->fault;
    const int has_w = in->weight.packed != NULL;
    isolate_result_t ir;
    int st = gs_begin(s, err) || gs_array(s, in->x, M * K * 4, &q->x, err) ||
             gs_array(s, in->x_fp8, M * K, &q->x_fp8, err) ||
             gs_array(s, in->x_scale, M * 4, &q->x_scale, err) ||
             gs_array(s, in->weight.packed, N * K / 2, &q->packed, err) ||
             gs_array(s, has_w ? in->weight.scales : NULL, N * K / 32, &q->scales, err) ||
             gs_array(s, in->weight_ref, (size_t)in->weight_ref_len, &q->weight_ref, err) ||
             gs_array(s, in->weight_bf16, N * K * 2, &q->weight_bf16, err) ||
             gs_array(s, act->codes, M * K, &q->codes, err) ||
             gs_array(s, act->token_scale, M * 4, &q->token_scale, err) ||
             gs_array(s, act->block_scale, M * (K / 32), &q->block_scale, err) ||
             gs_array(s, act->dequant, M * K * 4, &q->dequant, err) ||
             gs_reply(s, shm_arena_align(sizeof(gw_launch_reply_t)) + M * N * 2, &q->head, err) ||
             gs_call(s, &q->head, sizeof *q, plan->runs, &ir, err) ? -1 : 0;
    if (st == 0)
        launch_result(s, &q->head, &ir, out, M * N * 2, o);
    free(q);
    return st;
}

int gpu_session_plugin(gpu_session_t *s, const kernel_desc_t *k, const kernel_inputs_t *in,
                       const kernel_act_t *act, const kernel_options_t *kopt,
                       const launch_plan_t *plan, uint16_t *out, launch_outcome_t *o,
                       kr_error_t *err)
{
    if (plugin_kernel_is_gpu(k))
        return gpu_plugin_call(s, k, in, act, kopt, plan, out, o, err);
    return host_call(s, k, in, act, kopt, plan, out, o, err);
}
