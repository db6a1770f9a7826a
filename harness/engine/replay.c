/* The replay of one case: its plan (the kernels' inputs, the input health,
 * which kernel is the last to use a reference, the --vs model), the walk
 * over the selected kernels and the recorded outputs, and a large case in
 * blocks of rows, each block's rows folded into the case's.  The phases it
 * drives live below it (replay_ctx.h): the kernels (replay_kernel.c,
 * replay_gpu.c), the recorded outputs (replay_recorded.c), the rows
 * (replay_row.c) and the references (replay_refs.c). */
#include "replay.h"

#include <stdlib.h>
#include <string.h>

#include "case_identity.h"
#include "diagnose.h"
#include "formats.h"
#include "gpu_session.h"
#include "kr_string.h"
#include "mem_budget.h"
#include "progress.h"
#include "kr_alloc.h"
#include "replay_ctx.h"
#include "verdict.h"

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
    uint8_t *w = kr_alloc_array((size_t)c->N * (size_t)(c->K / 2));
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
