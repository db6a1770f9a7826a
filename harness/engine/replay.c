#include "replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "act_prepare.h"
#include "case_identity.h"
#include "case_name.h"
#include "diagnose.h"
#include "diag_family.h"
#include "diag_party.h"
#include "diagnosis/acc_fit.h"
#include "external_launch.h"
#include "gpu_run.h"
#include "gpu_session.h"
#include "formats.h"
#include "blas_threads.h"
#include "gemm_ref.h"
#include "input_health.h"
#include "isolate_kernel.h"
#include "mem_budget.h"
#include "plugin_loader.h"
#include "replay_ctx.h"
#include "ref_alloc.h"
#include "metrics.h"
#include "row_blocks.h"
#include "output_store.h"
#include "judge.h"
#include "verdict.h"
#include "kr_string.h"

void replay_options_default(replay_options_t *o)
{
    memset(o, 0, sizeof *o);
    o->refs = REF_EXACT | REF_SOURCE;
    o->include_recorded = 1;
    kernel_options_default(&o->kernel);
    o->weight_e8m0_mode = E8M0_SPEC;
    o->diagnose = 1;
    o->gpu_reruns = 3;
    o->model_reruns = 1;
    o->model_rows = REPLAY_MODEL_ROWS_DEFAULT;
    o->timeout_s = 300.0;
}

const uint8_t *case_weight_checkpoint(const case_t *c, uint8_t **owned, kr_error_t *err)
{
    *owned = NULL;
    if (c->weight_order == WEIGHT_ORDER_CHECKPOINT)
        return c->weight;
    uint8_t *w = ref_alloc_array((size_t)c->N * (size_t)(c->K / 2));
    if (!w) {
        kr_fail(err, "%s: out of memory unpermuting weight", c->path);
        return NULL;
    }
    if (wperm_unpermute(c->weight, c->N, c->K, w)) {
        free(w);
        kr_fail(err, "%s: weight: fragment order needs N and K divisible by 16 (N=%lld K=%lld)",
                c->path, (long long)c->N, (long long)c->K);
        return NULL;
    }
    *owned = w;
    return w;
}

/* Verdict and note of the rerun race check from its histogram. */
void replay_rerun_row_finish(result_t *r)
{
    if (r->ulp.identical == r->ulp.count) {
        r->verdict = VERDICT_PASS;
        snprintf(r->note, sizeof r->note, "rerun bit-identical");
    } else {
        r->verdict = VERDICT_NONDETERMINISTIC;
        snprintf(r->note, sizeof r->note, "rerun differs in %lld of %lld elements (max %llu ULP)",
                 (long long)(r->ulp.count - r->ulp.identical), (long long)r->ulp.count,
                 (unsigned long long)r->ulp.max_ulp);
    }
}

/* Which route produced a recorded output: the case's route attribute when
 * it has one, else the route whose R_exact the output fits (W4A8 on the
 * case's fp8 activations, W4A4 on aiter's MXFP4 quantization of x).
 * Returns 1 for W4A4 (*kd set to it), 0 for W4A8, -1 on error; note says
 * which and why. */
static int recorded_route(replay_ctx_t *rc, const uint16_t *out, const kernel_act_t *w4a8_act,
                          const kernel_desc_t **kd, char *note, int cap, kr_error_t *err)
{
    const kernel_desc_t *w4a4 = kernel_for_role(COMPARE_ROLE_W4A4_EMULATION);
    if (rc->c->route && !strcmp(rc->c->route, "w4a4")) {
        *kd = w4a4;
        snprintf(note, (size_t)cap, "judged as the W4A4 route (the case's route attribute)");
        return 1;
    }
    if (rc->route_fit && *rc->route_fit >= 0) {
        /* Fitted on the case's first block: every block is judged as that route. */
        snprintf(note, (size_t)cap, "route fitted (no route attribute): the output fits %s, not %s",
                 *rc->route_fit ? "W4A4" : "W4A8", *rc->route_fit ? "W4A8" : "W4A4");
        if (*rc->route_fit)
            *kd = w4a4;
        return *rc->route_fit;
    }
    kernel_options_t kopt = rc->opt->kernel;
    kopt.act_source = ACT_SOURCE_QUANTIZE;
    kernel_act_t a4;
    kr_error_t kerr = {{0}};
    if (!w4a8_act || act_prepare_mxfp4(w4a4, &rc->in, &kopt, &a4, &kerr))
        return 0;
    double rel[2] = {NAN, NAN};
    const kernel_act_t *acts[2] = {w4a8_act, &a4};
    for (int i = 0; i < 2; i++) {
        const float *r = replay_reference_exact(rc, acts[i], err);
        if (!r) {
            replay_release_act(rc, &a4);
            return -1;
        }
        metrics_t m;
        metrics_compute_bf16(out, r, rc->c->M, rc->c->N, &m, NULL);
        rel[i] = m.rel_fro;
    }
    replay_release_act(rc, &a4);
    /* W4A8 unless W4A4 fits clearly better (NaN never fits). */
    const int w4a4_fits = rel[1] < 0.5 * rel[0] || (isnan(rel[0]) && !isnan(rel[1]));
    /* No numbers: in a row-block replay the note is the first block's, and
     * the row's metrics say how well the chosen route fits. */
    snprintf(note, (size_t)cap, "route fitted (no route attribute): the output fits %s, not %s",
             w4a4_fits ? "W4A4" : "W4A8", w4a4_fits ? "W4A8" : "W4A4");
    if (w4a4_fits)
        *kd = w4a4;
    if (rc->route_fit)
        *rc->route_fit = w4a4_fits;
    return w4a4_fits;
}

/* The outputs the case recorded in production, replayed against the same
 * references: does replay reproduce what production saw? */
int replay_recorded(replay_ctx_t *rc, kr_error_t *err)
{
    const case_t *c = rc->c;
    const kernel_desc_t *w4a8 = kernel_for_role(COMPARE_ROLE_W4A8_MODEL);
    const kernel_desc_t *w4a4 = kernel_for_role(COMPARE_ROLE_W4A4_EMULATION);
    kernel_options_t kopt = rc->opt->kernel;
    int status = 0;

    if (c->out || c->out_rerun) {
        /* A case's recorded output came from its MXFP4 layer when it has an
         * MXFP4 weight -- on the W4A8 route (fp8 activations) or the W4A4
         * route (MXFP4 activations) -- else from a bf16 layer. */
        const int mxfp4 = rc->in.weight.packed != NULL;
        const kernel_desc_t *kd = mxfp4 ? w4a8 : kernel_for_role(COMPARE_ROLE_BF16_LAYER);
        kernel_act_t act;
        kr_error_t kerr = {{0}};
        kopt.act_source = ACT_SOURCE_AUTO;
        int have_act = mxfp4 && act_prepare_fp8_token(w4a8, &rc->in, &kopt, &act, &kerr) == 0;
        char route_note[256] = "";
        if (mxfp4 && c->x && (!c->route || !strcmp(c->route, "w4a4"))) {
            int st = recorded_route(rc, c->out ? c->out : c->out_rerun, have_act ? &act : NULL, &kd,
                                    route_note, sizeof route_note, err);
            if (st < 0) {
                if (have_act)
                    replay_release_act(rc, &act);
                return -1;
            }
            if (st == 1) {
                /* W4A4: the output is judged against aiter's MXFP4 activations. */
                if (have_act)
                    replay_release_act(rc, &act);
                kopt.act_source = ACT_SOURCE_QUANTIZE;
                have_act = act_prepare_mxfp4(w4a4, &rc->in, &kopt, &act, &kerr) == 0;
            }
        } else if (mxfp4 && c->route) {
            snprintf(route_note, sizeof route_note, "judged as the W4A8 route (the case's route attribute)");
        }
        const uint16_t *outs[2] = {c->out, c->out_rerun};
        const char *names[2] = {"recorded.out", "recorded.out_rerun"};
        for (int i = 0; i < 2 && status == 0; i++) {
            if (!outs[i])
                continue;
            const int64_t first = rc->out->count;
            status = replay_compare_refs(rc, names[i], have_act ? &act : NULL,
                                             mxfp4 ? WEIGHT_KIND_MXFP4 : WEIGHT_KIND_BF16, outs[i],
                                             kd->rel_tol_exact, kd->rel_tol_source, rc->opt->refs,
                                             0.0, err);
            for (int64_t j = first; status == 0 && route_note[0] && j < rc->out->count; j++)
                replay_append_note(rc, &rc->out->rows[j], route_note, 0);
        }
        if (have_act)
            replay_release_act(rc, &act);
    }
    if (status == 0 && c->out && c->out_rerun) {
        /* The rerun race check: the same kernel on the same inputs must give the same bits. */
        const int64_t MN = c->M * c->N;
        result_t *r = result_list_add(rc->out);
        float *a = replay_bf16_to_f32(c->out, MN), *b = replay_bf16_to_f32(c->out_rerun, MN);
        if (!r || !a || !b) {
            free(a);
            free(b);
            return kr_fail(err, "out of memory");
        }
        replay_row_header(rc, r, "recorded.out", "out_rerun");
        metrics_sums_t sums;
        metrics_compute_sums(a, b, c->M, c->N, &r->metrics, &sums);
        ulp_stats_bf16(c->out, c->out_rerun, MN, &r->ulp);
        free(a);
        free(b);
        replay_rerun_row_finish(r);
        status = replay_fold_row(rc, r, ROW_KIND_RERUN, &sums, c->N, 0, NULL, err);
    }
    if (status == 0 && c->ref_recorded && rc->in.weight.packed) {
        /* The reference the serving process computed (the bad-case dump's
         * misnamed "aiter" key) against kreplay's R_exact on the same
         * recorded operands: two fp32 GEMMs that must agree to rounding.  A
         * mismatch means the in-process reference was the wrong one (the
         * dispatch's _exact_ref once read permuted weights). */
        kernel_act_t act;
        kr_error_t kerr = {{0}};
        kopt.act_source = ACT_SOURCE_AUTO;
        if (act_prepare_fp8_token(w4a8, &rc->in, &kopt, &act, &kerr) == 0) {
            const int64_t MN = c->M * c->N;
            const float *r_exact = replay_reference_exact(rc, &act, err);
            uint16_t *bits = ref_alloc_array((size_t)MN * sizeof(uint16_t));
            if (!r_exact || !bits) {
                status = -1;
            } else {
                for (int64_t i = 0; i < MN; i++)
                    bits[i] = bf16_encode(c->ref_recorded[i]);
                nonfinite_t operand_nf;
                nonfinite_count(act.dequant, act.M * act.K, &operand_nf);
                status = replay_add_compared_row(rc, "recorded.ref", ref_kind_name(REF_EXACT), &act,
                                          "the serve's in-process reference", bits, c->ref_recorded,
                                          r_exact, NULL, act.dequant, &operand_nf, 1e-3, 0.0, err);
            }
            free(bits);
            replay_release_act(rc, &act);
        }
    }
    if (status == 0 && c->aiter && rc->in.weight.packed) {
        kernel_act_t act;
        kr_error_t kerr = {{0}};
        kopt.act_source = ACT_SOURCE_QUANTIZE;
        int have_act = act_prepare_mxfp4(w4a4, &rc->in, &kopt, &act, &kerr) == 0;
        status = replay_compare_refs(rc, "recorded.aiter", have_act ? &act : NULL,
                                         WEIGHT_KIND_MXFP4, c->aiter,
                                         w4a4->rel_tol_exact, w4a4->rel_tol_source, rc->opt->refs,
                                         0.0, err);
        if (have_act)
            replay_release_act(rc, &act);
    }
    return status;
}
/* What a kernel is handed for c's rows (weight: in checkpoint order). */
static kernel_inputs_t case_kernel_inputs(const case_t *c, const replay_options_t *opt,
                                          const uint8_t *weight, int64_t full_M)
{
    return (kernel_inputs_t){
        .M = c->M, .N = c->N, .K = c->K,
        .x = c->x, .x_fp8 = c->x_fp8, .x_scale = c->x_scale, .x_fp8_format = c->x_fp8_format,
        .weight = {.packed = weight, .scales = c->weight_scale, .layout = c->scale_layout,
                   .e8m0_mode = opt->weight_e8m0_mode, .N = c->N, .K = c->K},
        .weight_ref = c->weight_ref, .weight_ref_len = c->weight_ref_len,
        .weight_bf16 = c->weight_bf16,
        .dispatch_M = full_M,
    };
}

/* Replays c (a whole case, or one block of a case's rows with `blocks` set)
 * into out.  full_M: the case's rows.  health: the whole case's input health
 * when given (a block's rows must be judged by the case's inputs), else
 * computed here.  weight: the case's weight in checkpoint order, or NULL to
 * take it from c.  launches: the case's launch table (whole-case outputs of
 * external kernels; every kernel's reruns are merged into it). */
static int replay_rows(const case_t *c, const replay_options_t *opt, const policy_t *policy,
                       const judge_poison_t *poison, int *route_fit, row_blocks_t *blocks,
                       int64_t full_M, const input_health_t *health, const uint8_t *weight,
                       gemm_ref_ctx_t **shared_ref, launch_table_t *launches, result_list_t *out,
                       kr_error_t *err)
{
    replay_ctx_t rc = {.c = c, .opt = opt, .out = out, .blocks = blocks, .full_M = full_M,
                       .launches = launches, .policy = policy, .poison = poison, .route_fit = route_fit};
    if (shared_ref)
        rc.ref_ctx = *shared_ref;
    uint8_t *weight_owned = NULL;
    if (c->weight && !weight) {
        weight = case_weight_checkpoint(c, &weight_owned, err);
        if (!weight)
            return -1;
    }
    rc.in = case_kernel_inputs(c, opt, weight, full_M);
    if (health)
        rc.health = *health;
    else
        input_health_compute(c, &rc.health);
    if (c->x) {
        rc.source_nf = rc.health.x_nf;
    } else {
        rc.source_nf.nan = rc.health.x_fp8_nan + rc.health.x_scale_nonfinite;
    }

    int status = 0;
    /* The last kernel that can compare with a reference: when the recorded
     * outputs are not replayed after it, no --vs model shares the case and
     * no second (matrix-unit) GPU variant compares after it. */
    const kernel_desc_t *last = NULL;
    for (int i = 0; i < kernel_count(); i++)
        if (kernel_name_matches(kernel_at(i)->name, opt->kernel_patterns))
            last = kernel_at(i);
    for (int i = 0; i < opt->n_extra_kernels; i++)
        if (kernel_name_matches(opt->extra_kernels[i]->name, opt->kernel_patterns))
            last = opt->extra_kernels[i];
    const int recorded_after = opt->include_recorded && (c->out || c->out_rerun || c->aiter);
    if (recorded_after || opt->vs_kernel || opt->gpu_matrix)
        last = NULL;
    if (status == 0 && opt->vs_kernel) {
        rc.vs = kernel_find(opt->vs_kernel);
        replay_prepare_vs_model(&rc);
    }
    for (int i = 0; status == 0 && i < kernel_count(); i++) {
        const kernel_desc_t *k = kernel_at(i);
        if (kernel_name_matches(k->name, opt->kernel_patterns)) {
            if (opt->progress)
                progress_step(opt->progress, k->name);
            rc.last_reference_user = k == last;
            status = replay_kernel(&rc, k, err);
        }
    }
    for (int i = 0; status == 0 && i < opt->n_extra_kernels; i++) {
        const kernel_desc_t *k = opt->extra_kernels[i];
        if (kernel_name_matches(k->name, opt->kernel_patterns)) {
            if (opt->progress)
                progress_step(opt->progress, k->name);
            rc.last_reference_user = k == last;
            status = replay_kernel(&rc, k, err);
        }
    }
    rc.last_reference_user = 0;
    if (status == 0 && opt->include_recorded)
        status = replay_recorded(&rc, err);
    replay_free_source_refs(&rc.src[WEIGHT_KIND_MXFP4]);
    replay_free_source_refs(&rc.src[WEIGHT_KIND_BF16]);
    free(rc.vs_out);
    replay_exact_cache_free(&rc);
    gpu_session_case_end(opt->gpu);
    if (shared_ref)
        *shared_ref = rc.ref_ctx; /* made here on first use, kept for the next block */
    else
        gemm_ref_ctx_free(rc.ref_ctx);
    free(weight_owned);
    return status;
}

/* Memory a replayed row of the case holds at once, roughly: R_source and
 * R_sanitized, one kernel's output in bf16 and its exact reference (N wide;
 * outputs are measured from their bits, never copied to fp32); the
 * activations in fp32 and as codes, the copy the R_exact cache keeps, and
 * the sanitized x (K wide). */
static int64_t replay_bytes_per_row(const case_t *c)
{
    return c->N * (4 + 4 + 2 + 4) + c->K * (4 + 1 + 4 + 4);
}

int64_t replay_block_rows(const case_t *c, const replay_options_t *opt)
{
    if (opt->device_gpu || opt->oracle || opt->save_outputs_path || opt->fault.kind != FAULT_NONE)
        return c->M; /* these need the whole output at once (see replay.h) */
    int64_t budget = opt->block_bytes > 0 ? opt->block_bytes : mem_budget_default();
    int64_t rows = budget / replay_bytes_per_row(c);
    if (rows >= c->M)
        return c->M;
    /* Whole panels, so every reference call is one the whole case makes. */
    const int64_t panel = opt->ref_panel_rows > 0 ? opt->ref_panel_rows : GEMM_REF_PANEL_ROWS;
    rows = rows / panel * panel;
    if (rows < panel)
        rows = panel;
    return rows < c->M ? rows : c->M;
}

/* The rows [m0, m0 + rows) of c as a case of their own: every per-row array
 * points into c (no copy); the weight and everything else is c's. */
static case_t case_row_block(const case_t *c, int64_t m0, int64_t rows)
{
    case_t b = *c;
    const int64_t K = c->K, N = c->N;
    b.M = rows;
    b.x = c->x ? c->x + m0 * K : NULL;
    b.x_fp8 = c->x_fp8 ? c->x_fp8 + m0 * K : NULL;
    b.x_scale = c->x_scale ? c->x_scale + m0 : NULL;
    b.out = c->out ? c->out + m0 * N : NULL;
    b.out_rerun = c->out_rerun ? c->out_rerun + m0 * N : NULL;
    b.aiter = c->aiter ? c->aiter + m0 * N : NULL;
    b.ref_recorded = c->ref_recorded ? c->ref_recorded + m0 * N : NULL;
    return b;
}

/* The whole case's row from its accumulator: merged metrics, the verdict
 * those give by the row's own rule, and the first block's notes. */
static void finish_block_row(const row_block_acc_t *acc, const replay_options_t *opt,
                             const policy_t *policy, const judge_poison_t *poison, result_t *r)
{
    *r = acc->first;
    r->seconds = acc->seconds;
    if (acc->kind != ROW_KIND_NOTE) {
        r->metrics = acc->metrics;
        r->ulp = acc->ulp;
    }
    if (acc->input_nf_blockwise)
        r->input_nf = acc->input_nf;
    if (acc->has_digest)
        bf16_digest_format(acc->digest, r->out_digest);
    switch (acc->kind) {
    case ROW_KIND_COMPARED:
        r->note[0] = '\0';
        replay_judge_row(opt, policy, poison, r, r->threshold);
        replay_append_text(r->note, sizeof r->note, acc->extra_note);
        break;
    case ROW_KIND_QUANT: {
        char how[384];
        r->note[0] = '\0';
        replay_judge_row(opt, policy, poison, r, r->threshold);
        replay_describe_quantizer_counts(acc->counts, how, sizeof how);
        replay_append_text(r->note, sizeof r->note, how);
        break;
    }
    case ROW_KIND_VS: {
        char vs_name[32];
        const char *colon = strchr(r->reference, ':');
        kr_strlcpy(vs_name, colon ? colon + 1 : r->reference, sizeof vs_name);
        replay_vs_row_finish(opt, policy, r, vs_name, r->threshold);
        break;
    }
    case ROW_KIND_RERUN:
        replay_rerun_row_finish(r);
        break;
    case ROW_KIND_NOTE:
        break;
    }
    if (!diag_wanted(r->verdict) || !verdict_is_failure(r->verdict))
        r->diagnosis[0] = r->diagnosis_family[0] = r->diag_party[0] = '\0';
}

static int replay_case_rows(const case_t *c, const replay_options_t *opt, result_list_t *out, kr_error_t *err);

int replay_case(const case_t *c, const replay_options_t *opt, result_list_t *out, kr_error_t *err)
{
    const int64_t first = out->count;
    case_id_job_t id_job;
    if (!opt->skip_identities)
        case_id_job_start(&id_job, c);
    char id[17] = "";
    const int rc = replay_case_rows(c, opt, out, err);
    if (!opt->skip_identities)
        case_id_job_finish(&id_job, id);
    if (rc)
        return -1;
    for (int64_t i = first; i < out->count; i++) {
        memcpy(out->rows[i].case_id, id, sizeof id);
        /* every failing row says something: one with no output to diagnose too */
        if (!out->rows[i].diagnosis[0] && !diag_wanted(out->rows[i].verdict))
            diag_no_output_line(out->rows[i].verdict, out->rows[i].diagnosis, sizeof out->rows[i].diagnosis);
    }
    return 0;
}

/* The whole case's rows, replayed whole or in blocks of rows. */
static int replay_case_judged(const case_t *c, const replay_options_t *opt, const policy_t *policy,
                              result_list_t *out, kr_error_t *err)
{
    /* Where the poison is, found once on the whole case: a block's rows are
     * described as the case's. */
    judge_poison_t poison;
    if (judge_poison_locate(c->x, c->M, c->K, &poison, err))
        return -1;
    int route_fit = -1;
    const int64_t rows = replay_block_rows(c, opt);
    launch_table_t launches = {.N = c->N};
    if (rows >= c->M) {
        const int64_t first = out->count;
        int st = replay_rows(c, opt, policy, &poison, &route_fit, NULL, c->M, NULL, NULL, NULL, &launches, out, err);
        launch_table_stamp(&launches, out, first);
        launch_table_free(&launches);
        return st;
    }

    /* A case too large to hold its outputs and references whole: replay it
     * in blocks of rows and fold each block's rows into the case's. */
    input_health_t health;
    input_health_compute(c, &health);
    uint8_t *weight_owned = NULL;
    const uint8_t *weight = NULL;
    if (c->weight) {
        weight = case_weight_checkpoint(c, &weight_owned, err);
        if (!weight)
            return -1;
    }
    row_blocks_t blocks = {.full_M = c->M};
    result_list_t block_rows = {0};
    gemm_ref_ctx_t *ref_ctx = NULL; /* one dequant buffer for every block */
    int status = 0;
    /* External kernels pick their configuration from M: each is launched
     * once on the whole case, and the blocks slice its output. */
    const kernel_inputs_t whole_in = case_kernel_inputs(c, opt, weight, c->M);
    for (int i = 0; status == 0 && i < opt->n_extra_kernels; i++) {
        const kernel_desc_t *k = opt->extra_kernels[i];
        if (launch_kernel_is_external(k) && kernel_name_matches(k->name, opt->kernel_patterns))
            status = launch_whole_case(k, &whole_in, opt, &launches, err);
    }
    const int64_t first = out->count;
    for (int64_t m0 = 0; status == 0 && m0 < c->M; m0 += rows) {
        const int64_t n = m0 + rows <= c->M ? rows : c->M - m0;
        const case_t block = case_row_block(c, m0, n);
        blocks.block_offset = m0;
        blocks.block_rows = n;
        status = replay_rows(&block, opt, policy, &poison, &route_fit, &blocks, c->M, &health, weight, &ref_ctx,
                             &launches, &block_rows, err);
        result_list_free(&block_rows);
    }
    for (int64_t i = 0; status == 0 && i < blocks.count; i++) {
        result_t *r = result_list_add(out);
        if (!r) {
            status = kr_fail(err, "out of memory for results");
            break;
        }
        finish_block_row(&blocks.accs[i], opt, policy, &poison, r);
    }
    if (status == 0)
        launch_table_stamp(&launches, out, first);
    launch_table_free(&launches);
    row_blocks_free(&blocks);
    gemm_ref_ctx_free(ref_ctx);
    free(weight_owned);
    return status;
}

static int replay_case_rows(const case_t *c, const replay_options_t *opt, result_list_t *out,
                            kr_error_t *err)
{
    if (opt->policy)
        return replay_case_judged(c, opt, opt->policy, out, err);
    policy_t def;
    if (judge_default_policy(&def, err))
        return -1;
    const int status = replay_case_judged(c, opt, &def, out, err);
    policy_free(&def);
    return status;
}
