/* --device gpu in the replay: a kernel's GPU twin run by the run's GPU worker
 * (gpu_session.h), checked against its CPU model on a sample of rows and
 * compared with the references like any output (replay_ctx.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_run.h"
#include "gpu_session.h"
#include "isolate_kernel.h"
#include "kr_string.h"
#include "metrics.h"
#include "model_sample.h"
#include "replay_ctx.h"
#include "row_reference.h"

/* What the GPU runner measured, on a row it produced: device, reruns,
 * canary and timing. */
static void gpu_stamp_measures(result_t *r, const gpu_run_result_t *gr)
{
    kr_strlcpy(r->device, gr->device, sizeof r->device);
    r->reruns = gr->reruns;
    r->rerun_diff = gr->rerun_diff;
    r->canary_ok = gr->canary_bad == 0;
    r->time_ms = gr->ms_median;
    r->tflops = gr->tflops;
    r->gbps = gr->gbps;
}

/* The GPU's output against the kernel's own CPU model on the sampled rows:
 * a bit-faithful kernel must match it exactly (MODEL_MISMATCH otherwise).
 * A matrix-unit variant is measured, not judged: its difference is a
 * finding. */
static void add_model_row(replay_ctx_t *rc, const char *kernel, const kernel_desc_t *k,
                          const gpu_run_result_t *gr, const model_sample_t *ms, int judged)
{
    const int64_t n = ms->n * rc->c->N;
    result_t *r = result_list_add(rc->out);
    float *a = replay_bf16_to_f32(ms->out, n), *b = replay_bf16_to_f32(ms->model, n);
    if (!r || !a || !b) {
        free(a);
        free(b);
        return;
    }
    char ref[32], scope[96] = "";
    snprintf(ref, sizeof ref, ROW_REF_MODEL_PREFIX "%.24s", k->name);
    if (ms->n < rc->c->M)
        snprintf(scope, sizeof scope, " on %lld of %lld rows (--model-rows)", (long long)ms->n,
                 (long long)rc->c->M);
    replay_row_header(rc, r, kernel, ref);
    metrics_compute(a, b, ms->n, rc->c->N, &r->metrics);
    ulp_stats_bf16(ms->out, ms->model, n, &r->ulp);
    if (!rc->opt->skip_identities)
        bf16_digest(gr->out, rc->c->M * rc->c->N, r->out_digest);
    free(a);
    free(b);
    gpu_stamp_measures(r, gr);
    const int64_t differ = r->ulp.count - r->ulp.identical;
    if (differ == 0) {
        r->verdict = VERDICT_PASS;
        snprintf(r->note, sizeof r->note, "bit-identical to the CPU model%s", scope);
    } else {
        r->verdict = judged ? VERDICT_MODEL_MISMATCH : VERDICT_PASS;
        snprintf(r->note, sizeof r->note,
                 "%s%lld of %lld elements differ from the CPU model%s (max %llu ULP; 1 ULP: %lld, 2: %lld)",
                 judged ? "" : "matrix units, measured: ", (long long)differ, (long long)r->ulp.count,
                 scope, (unsigned long long)r->ulp.max_ulp, (long long)r->ulp.bins[ULP_BIN_1],
                 (long long)r->ulp.bins[ULP_BIN_2]);
    }
    if (gr->verdict != VERDICT_PASS) {
        r->verdict = gr->verdict;
        kr_strlcpy(r->note, gr->note, sizeof r->note);
    }
}

/* Marks the rows a GPU run produced with what the runner saw. */
static void stamp_gpu_rows(replay_ctx_t *rc, int64_t first, const gpu_run_result_t *gr)
{
    for (int64_t i = first; i < rc->out->count; i++) {
        result_t *r = &rc->out->rows[i];
        gpu_stamp_measures(r, gr);
        if (gr->verdict != VERDICT_PASS && !verdict_is_failure(r->verdict)) {
            r->verdict = gr->verdict;
            kr_strlcpy(r->note, gr->note, sizeof r->note);
        }
    }
}

/* The twin's run, in the worker (or in process without a session).
 * Returns 1 when it produced an output (gr to free), 0 when a row said why
 * it did not, -1 with err when the harness failed. */
static int run_twin(replay_ctx_t *rc, const kernel_desc_t *k, const kernel_act_t *act,
                    gpu_variant_t variant, gpu_run_result_t *gr, kr_error_t *err)
{
    gpu_run_options_t go;
    gpu_run_options_default(&go);
    go.reruns = rc->opt->gpu_reruns;
    go.timed_runs = 0;   /* the reruns are timed: their warm launches give the time */
    go.variant = variant;
    kr_error_t ge = {{0}};
    if (!rc->opt->gpu) {
        if (gpu_run_kernel(k, &rc->in, act, &rc->opt->kernel, &go, gr, &ge) == 0)
            return 1;
        replay_note_row(rc, gr->kernel[0] ? gr->kernel : k->name, gr->verdict,
                        gr->note[0] ? gr->note : ge.msg);
        gpu_run_result_free(gr);
        return 0;
    }
    isolate_result_t ir;
    if (gpu_session_twin(rc->opt->gpu, k, &rc->in, act, &rc->opt->kernel, &go, gr, &ir, &ge))
        return kr_fail(err, "%s: %s", k->name, ge.msg);
    if (ir.status == ISOLATE_CRASHED || ir.status == ISOLATE_TIMEOUT) {
        replay_note_row(rc, k->name, isolate_verdict(&ir), ir.message);
        return 0;
    }
    if (ir.status == ISOLATE_FAILED) {
        replay_note_row(rc, gr->kernel[0] ? gr->kernel : k->name,
                        gr->verdict != VERDICT_PASS ? gr->verdict : VERDICT_ERROR,
                        gr->note[0] ? gr->note : ir.message);
        gpu_run_result_free(gr);
        return 0;
    }
    return 1;
}

/* The model on the sampled rows, first: a model that declines the case (or
 * fails) gives the CPU run's row and the twin does not run.  1 when the
 * twin should run. */
static int sample_model(replay_ctx_t *rc, const kernel_desc_t *k, const kernel_act_t *act,
                        model_sample_t *ms)
{
    kr_error_t kerr = {{0}};
    const int st = model_sample_run(k, &rc->in, act, &rc->opt->kernel, rc->opt->model_rows, ms, &kerr);
    if (st == 0)
        return 1;
    if (st == KERNEL_RUN_UNSUPPORTED) {
        replay_note_row(rc, k->name, VERDICT_UNSUPPORTED, kerr.msg);
    } else {
        char note[sizeof kerr.msg + 32];
        snprintf(note, sizeof note, "the CPU model failed: %s", kerr.msg);
        replay_note_row(rc, k->name, VERDICT_ERROR, note);
    }
    return 0;
}

static int replay_twin(replay_ctx_t *rc, const kernel_desc_t *k, const kernel_act_t *act,
                       gpu_variant_t variant, model_sample_t *ms, kr_error_t *err)
{
    gpu_run_result_t gr;
    const int ran = run_twin(rc, k, act, variant, &gr, err);
    if (ran <= 0)
        return ran;
    const int64_t first = rc->out->count;
    if (ms->n && model_sample_take(ms, gr.out, rc->c->N)) {
        gpu_run_result_free(&gr);
        return kr_fail(err, "out of memory for the model check of %s", k->name);
    }
    if (ms->n)
        add_model_row(rc, gr.kernel, k, &gr, ms, variant == GPU_VARIANT_SIMT);
    const int64_t compared = rc->out->count;
    const int status = replay_compare_refs(rc, gr.kernel, act, k->weight_kind, gr.out,
                                           k->rel_tol_exact, k->rel_tol_source,
                                           k->refs & rc->opt->refs, 0.0, err);
    /* What the model says of its configuration (split-K, the folded weight's
     * underflow): the weight's and the shape's, the same on any rows. */
    for (int64_t i = compared; status == 0 && ms->note[0] && i < rc->out->count; i++)
        replay_append_note(rc, &rc->out->rows[i], ms->note, 0);
    stamp_gpu_rows(rc, first, &gr);
    gpu_run_result_free(&gr);
    return status;
}

int replay_gpu_kernel(replay_ctx_t *rc, const kernel_desc_t *k, const kernel_act_t *act,
                      kr_error_t *err)
{
    model_sample_t ms;
    memset(&ms, 0, sizeof ms);
    if (rc->opt->model_rows != 0 && !sample_model(rc, k, act, &ms))
        return 0;
    int st = replay_twin(rc, k, act, GPU_VARIANT_SIMT, &ms, err);
    if (st == 0 && rc->opt->gpu_matrix && gpu_kernel_runs(k, GPU_VARIANT_MATRIX))
        st = replay_twin(rc, k, act, GPU_VARIANT_MATRIX, &ms, err);
    model_sample_free(&ms);
    return st;
}

/* Codes and scales identical to the CPU model's (NaN scales agree). */
static void quantizer_row(replay_ctx_t *rc, const kernel_act_t *act, const gpu_run_result_t *gr,
                          result_t *r)
{
    const int64_t M = rc->c->M, K = rc->c->K, MK = M * K;
    int64_t same = 0;
    for (int64_t i = 0; i < MK; i++)
        same += gr->q_codes[i] == act->codes[i];
    const int per_token = act->kind == ACT_FP8_PER_TOKEN;
    const int64_t n_scales = per_token ? M : M * (K / 32);
    int64_t scales_same = 0;
    for (int64_t i = 0; i < n_scales; i++)
        scales_same += per_token ? memcmp(&gr->q_token_scale[i], &act->token_scale[i], sizeof(float)) == 0 ||
                                       (isnan(gr->q_token_scale[i]) && isnan(act->token_scale[i]))
                                 : gr->q_block_scale[i] == act->block_scale[i];
    r->ulp.count = MK;
    r->ulp.identical = same;
    r->ulp.identical_frac = (double)same / (double)MK;
    r->verdict = (same == MK && scales_same == n_scales) ? VERDICT_PASS : VERDICT_MODEL_MISMATCH;
    snprintf(r->note, sizeof r->note, "codes %lld/%lld and scales %lld/%lld identical to the CPU model",
             (long long)same, (long long)MK, (long long)scales_same, (long long)n_scales);
}

int replay_gpu_quantizer(replay_ctx_t *rc, const kernel_desc_t *k, kr_error_t *err)
{
    if (!rc->c->x || !gpu_kernel_runs(k, GPU_VARIANT_SIMT))
        return 0;
    kernel_act_t act;
    kr_error_t kerr = {{0}};
    if (k->prepare_act(k, &rc->in, &rc->opt->kernel, &act, &kerr))
        return 0;   /* the quantizer's own row said why */
    gpu_run_result_t gr;
    const int ran = run_twin(rc, k, &act, GPU_VARIANT_SIMT, &gr, err);
    int status = ran < 0 ? -1 : 0;
    if (ran > 0) {
        result_t *r = result_list_add(rc->out);
        if (!r) {
            status = kr_fail(err, "out of memory");
        } else {
            replay_row_header(rc, r, gr.kernel, ROW_REF_MODEL_PREFIX "codes");
            quantizer_row(rc, &act, &gr, r);
            stamp_gpu_rows(rc, rc->out->count - 1, &gr);
        }
        gpu_run_result_free(&gr);
    }
    replay_release_act(rc, &act);
    return status;
}
