#include "external_launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "array_grow.h"
#include "gpu_session.h"
#include "isolate_kernel.h"
#include "kr_string.h"
#include "plugin_loader.h"
#include "kr_alloc.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int launch_kernel_is_external(const kernel_desc_t *k)
{
    return kernel_is_plugin(k);
}

typedef struct {
    kernel_call_t call;
    const fault_t *fault;
} launch_job_t;

static int run_job(const launch_job_t *j, uint16_t *out, kernel_run_info_t *info, kr_error_t *err)
{
    if (j->fault)
        return fault_run_kernel(j->fault, j->call.k, j->call.in, j->call.opt, j->call.act, out, info, err);
    return j->call.k->run_cpu(j->call.k, j->call.in, j->call.act, j->call.opt, out, info, err);
}

/* What an isolated run sends back before the output bits: its note and
 * its return code (which says why it failed: PLUGIN_RUN_OUT_OF_BOUNDS). */
typedef struct {
    kernel_run_info_t info;
    int rc;
} launch_record_t;

#define RECORD_BYTES ((sizeof(launch_record_t) + 63) / 64 * 64)

static int launch_child(void *ctx, void *region, size_t bytes, kr_error_t *err)
{
    (void)bytes;
    launch_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.rc = run_job(ctx, (uint16_t *)(void *)((char *)region + RECORD_BYTES), &rec.info, err);
    memcpy(region, &rec, sizeof rec);
    return rec.rc;
}

static verdict_t failure_verdict(const kernel_desc_t *k, int rc)
{
    if (kernel_is_plugin(k))
        return rc == PLUGIN_RUN_OUT_OF_BOUNDS ? VERDICT_OOB_WRITE : VERDICT_ERROR;
    /* One rule for every registry kernel: one that cannot take the case says so. */
    return rc == KERNEL_RUN_UNSUPPORTED ? VERDICT_UNSUPPORTED : VERDICT_ERROR;
}

/* One run.  region: RECORD_BYTES + the output, for an isolated run. */
static int run_once(const launch_job_t *j, const launch_plan_t *plan, void *region,
                    uint16_t *out, launch_outcome_t *res, kr_error_t *err)
{
    memset(res, 0, sizeof *res);
    kr_error_t kerr = {{0}};
    const double t0 = now_seconds();
    if (!plan->isolate) {
        const int rc = run_job(j, out, &res->info, &kerr);
        res->seconds = now_seconds() - t0;
        res->ok = rc == 0;
        if (!res->ok) {
            res->verdict = failure_verdict(j->call.k, rc);
            kr_strlcpy(res->message, kerr.msg[0] ? kerr.msg : "failed without a message",
                       sizeof res->message);
        }
        return 0;
    }
    const size_t out_bytes = (size_t)j->call.in->M * (size_t)j->call.in->N * sizeof(uint16_t);
    isolate_result_t ir;
    if (isolate_run_returned(launch_child, (void *)j, region, RECORD_BYTES + out_bytes,
                             plan->timeout_s, &ir, err))
        return -1;
    res->seconds = ir.seconds;
    launch_record_t rec;
    switch (ir.status) {
    case ISOLATE_OK:
        res->ok = 1;
        memcpy(&rec, region, sizeof rec);
        res->info = rec.info;
        memcpy(out, (char *)region + RECORD_BYTES, out_bytes);
        break;
    case ISOLATE_FAILED:
        memcpy(&rec, region, sizeof rec);
        res->info = rec.info;
        res->verdict = failure_verdict(j->call.k, rec.rc);
        kr_strlcpy(res->message, ir.message, sizeof res->message);
        break;
    default:
        res->verdict = isolate_verdict(&ir);
        kr_strlcpy(res->message, ir.message, sizeof res->message);
        break;
    }
    return 0;
}

/* Marks the elements of b that differ from a (bits) in mask; counts new ones. */
static void mark_differences(const uint16_t *a, const uint16_t *b, int64_t n, unsigned char *mask)
{
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i])
            mask[i] = 1;
}

void launch_reruns_summarize(const unsigned char *mask, int64_t n, int64_t N, int64_t row_offset,
                             launch_reruns_t *r)
{
    r->differ = 0;
    r->n_pos = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!mask[i])
            continue;
        if (r->n_pos < LAUNCH_DIFF_POSITIONS) {
            r->pos[r->n_pos][0] = row_offset + i / N;
            r->pos[r->n_pos][1] = i % N;
            r->n_pos++;
        }
        r->differ++;
    }
}

/* Appends what run 1's fault did to the output (against the same kernel
 * run clean) to its note; a fault that did nothing must not look tested. */
static void note_fault_effect(const uint16_t *faulty, const uint16_t *clean, int64_t n, kernel_run_info_t *info)
{
    int64_t changed = 0;
    for (int64_t i = 0; i < n; i++)
        changed += faulty[i] != clean[i];
    char what[128];
    if (changed == 0)
        snprintf(what, sizeof what, "%s", FAULT_NO_EFFECT_NOTE);
    else
        snprintf(what, sizeof what, "injected fault changed %lld of %lld output elements", (long long)changed,
                 (long long)n);
    /* The effect is kept whole: the fault's own description gives way. */
    const size_t room = sizeof info->note - strlen(what) - 3;
    if (strlen(info->note) > room)
        info->note[room] = '\0';
    size_t len = strlen(info->note);
    snprintf(info->note + len, sizeof info->note - len, "%s%s", len ? "; " : "", what);
}

/* A faulty run 1 is launched once more without the fault, as plan says
 * otherwise; its effect goes into res's note. */
static int measure_fault_effect(const launch_job_t *job, const launch_plan_t *plan, void *region,
                                const uint16_t *out, int64_t MN, launch_outcome_t *res, kr_error_t *err)
{
    uint16_t *clean = malloc((size_t)MN * sizeof *clean);
    if (!clean)
        return kr_fail(err, "out of memory for the clean run of %s", job->call.k->name);
    launch_job_t honest = *job;
    honest.fault = NULL;
    launch_outcome_t o;
    int st = run_once(&honest, plan, region, clean, &o, err);
    if (st == 0 && o.ok)
        note_fault_effect(out, clean, MN, &res->info);
    free(clean);
    return st;
}

int launch_kernel(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                  const kernel_options_t *kopt, const launch_plan_t *plan, uint16_t *out,
                  launch_outcome_t *res, kr_error_t *err)
{
    if (!k->run_cpu)
        return kr_fail(err, "kernel %s has no run function", k->name);
    if (plan->session)
        return gpu_session_plugin(plan->session, k, in, act, kopt, plan, out, res, err);
    const int64_t MN = in->M * in->N;
    const size_t out_bytes = (size_t)MN * sizeof(uint16_t);
    const int runs = plan->runs > 1 ? plan->runs : 1;
    launch_job_t job = {.call = {.k = k, .in = in, .act = act, .opt = kopt}, .fault = plan->fault};
    void *region = plan->isolate ? malloc(RECORD_BYTES + out_bytes) : NULL;
    uint16_t *again = runs > 1 ? malloc(out_bytes) : NULL;
    unsigned char *mask = runs > 1 ? calloc((size_t)MN, 1) : NULL;
    int status = 0;
    if ((plan->isolate && !region) || (runs > 1 && (!again || !mask))) {
        status = kr_fail(err, "out of memory for the runs of %s", k->name);
        goto done;
    }
    if (run_once(&job, plan, region, out, res, err)) {
        status = -1;
        goto done;
    }
    if (res->ok && plan->fault && measure_fault_effect(&job, plan, region, out, MN, res, err)) {
        status = -1;
        goto done;
    }
    res->reruns.runs = 1;
    res->reruns.elements = MN;
    for (int r = 2; res->ok && r <= runs; r++) {
        launch_outcome_t rerun;
        if (run_once(&job, plan, region, again, &rerun, err)) {
            status = -1;
            goto done;
        }
        res->reruns.runs = r;
        if (!rerun.ok) {
            snprintf(res->reruns.rerun_failure, sizeof res->reruns.rerun_failure,
                     "run %d of %d on the same inputs: %s: %.180s", r, runs,
                     verdict_name(rerun.verdict), rerun.message);
            break;
        }
        mark_differences(out, again, MN, mask);
    }
    if (mask)
        launch_reruns_summarize(mask, MN, in->N, plan->row_offset, &res->reruns);
done:
    free(region);
    free(again);
    free(mask);
    return status;
}

int launch_quantizer_reruns(const kernel_desc_t *k, const kernel_inputs_t *in,
                            const kernel_options_t *kopt, const kernel_act_t *first, int runs,
                            int64_t row_offset, launch_reruns_t *r, kr_error_t *err)
{
    const int64_t MK = first->M * first->K;
    memset(r, 0, sizeof *r);
    r->runs = 1;
    r->elements = MK;
    if (runs < 2)
        return 0;
    unsigned char *mask = calloc((size_t)MK, 1);
    if (!mask)
        return kr_fail(err, "out of memory for the reruns of %s", k->name);
    for (int run = 2; run <= runs; run++) {
        kernel_act_t again;
        kr_error_t kerr = {{0}};
        if (k->prepare_act(k, in, kopt, &again, &kerr)) {
            snprintf(r->rerun_failure, sizeof r->rerun_failure, "run %d of %d on the same inputs: %.200s",
                     run, runs, kerr.msg);
            break;
        }
        r->runs = run;
        for (int64_t i = 0; i < MK; i++)
            if (memcmp(&first->dequant[i], &again.dequant[i], sizeof(float)) != 0)
                mask[i] = 1;
        kernel_act_free(&again);
    }
    launch_reruns_summarize(mask, MK, first->K, row_offset, r);
    free(mask);
    return 0;
}

void launch_plan_for(const kernel_desc_t *k, const replay_options_t *opt, int64_t row_offset,
                     launch_plan_t *plan)
{
    const int external = launch_kernel_is_external(k);
    const int faulty = opt->fault.kind != FAULT_NONE && kernel_name_matches(k->name, opt->fault_kernels);
    *plan = (launch_plan_t){
        .fault = faulty ? &opt->fault : NULL,
        .isolate = !opt->no_isolate && (opt->isolate_all || external),
        .timeout_s = opt->timeout_s,
        .runs = external ? opt->gpu_reruns : opt->model_reruns,
        .row_offset = row_offset,
        .session = plugin_kernel_is_gpu(k) || plugin_kernel_is_persistent(k) ? opt->gpu : NULL,
    };
    if (plan->runs < 1)
        plan->runs = 1;
}

/* ------------------------------------------------------------ the table */

launch_entry_t *launch_table_find(launch_table_t *t, const kernel_desc_t *k)
{
    for (int i = 0; t && i < t->count; i++)
        if (t->items[i].k == k)
            return &t->items[i];
    return NULL;
}

static launch_entry_t *table_add(launch_table_t *t, const kernel_desc_t *k, kr_error_t *err)
{
    launch_entry_t *e = launch_table_find(t, k);
    if (e)
        return e;
    launch_entry_t *items = array_reserve_one(t->items, t->count, &t->cap, sizeof *items, 8);
    if (!items) {
        kr_fail(err, "out of memory for the launch table");
        return NULL;
    }
    t->items = items;
    e = &t->items[t->count++];
    memset(e, 0, sizeof *e);
    e->k = k;
    return e;
}

int launch_table_put_whole(launch_table_t *t, const kernel_desc_t *k, uint16_t *out,
                           const launch_outcome_t *o, kr_error_t *err)
{
    launch_entry_t *e = table_add(t, k, err);
    if (!e) {
        free(out);
        return -1;
    }
    free(e->out);
    e->whole = 1;
    e->out = out;
    e->outcome = *o;
    return 0;
}

int launch_whole_case(const kernel_desc_t *k, const kernel_inputs_t *in,
                      const replay_options_t *opt, launch_table_t *t, kr_error_t *err)
{
    char why[256];
    if (k->op != KERNEL_OP_GEMM || !k->run_cpu ||
        kernel_unsupported_reason(k, in->M, in->N, in->K, why, sizeof why) ||
        (k->weight_kind == WEIGHT_KIND_MXFP4 && !in->weight.packed) ||
        (k->weight_kind == WEIGHT_KIND_BF16 && !in->weight_bf16))
        return 0;
    kernel_act_t act;
    kr_error_t kerr = {{0}};
    if (k->prepare_act(k, in, &opt->kernel, &act, &kerr))
        return 0;
    uint16_t *out = kr_alloc_array((size_t)in->M * (size_t)in->N * sizeof(uint16_t));
    if (!out) {
        kernel_act_free(&act);
        return kr_fail(err, "out of memory for the output of %s", k->name);
    }
    launch_plan_t plan;
    launch_plan_for(k, opt, 0, &plan);
    launch_outcome_t o;
    const int st = launch_kernel(k, in, &act, &opt->kernel, &plan, out, &o, err);
    kernel_act_free(&act);
    if (st) {
        free(out);
        return -1;
    }
    if (!o.ok) {
        free(out);
        out = NULL;
    }
    return launch_table_put_whole(t, k, out, &o, err);
}

int launch_table_merge_reruns(launch_table_t *t, const kernel_desc_t *k, const launch_reruns_t *r,
                              kr_error_t *err)
{
    launch_entry_t *e = table_add(t, k, err);
    if (!e)
        return -1;
    launch_reruns_t *m = &e->outcome.reruns;
    if (m->runs == 0 || r->runs < m->runs)
        m->runs = r->runs;  /* the fewest any block had */
    m->elements += r->elements;
    m->differ += r->differ;
    for (int i = 0; i < r->n_pos && m->n_pos < LAUNCH_DIFF_POSITIONS; i++) {
        m->pos[m->n_pos][0] = r->pos[i][0];
        m->pos[m->n_pos][1] = r->pos[i][1];
        m->n_pos++;
    }
    if (!m->rerun_failure[0] && r->rerun_failure[0])
        kr_strlcpy(m->rerun_failure, r->rerun_failure, sizeof m->rerun_failure);
    return 0;
}

static void describe_reruns(const launch_reruns_t *r, char *buf, size_t cap)
{
    if (r->rerun_failure[0]) {
        snprintf(buf, cap, "reruns differ: %s, where run 1 succeeded", r->rerun_failure);
        return;
    }
    int n = snprintf(buf, cap, "reruns differ: %lld of %lld elements changed bits across %d runs on "
                     "the same inputs, first at",
                     (long long)r->differ, (long long)r->elements, r->runs);
    for (int i = 0; i < r->n_pos && n > 0 && (size_t)n < cap; i++)
        n += snprintf(buf + n, cap - (size_t)n, " [%lld, %lld]", (long long)r->pos[i][0],
                      (long long)r->pos[i][1]);
}

void launch_table_stamp(const launch_table_t *t, result_list_t *rows, int64_t first)
{
    for (int i = 0; t && i < t->count; i++) {
        const launch_entry_t *e = &t->items[i];
        const launch_reruns_t *r = &e->outcome.reruns;
        if (r->runs < 2 && !r->rerun_failure[0])
            continue;
        const int differ = r->differ > 0 || r->rerun_failure[0];
        for (int64_t j = first; j < rows->count; j++) {
            result_t *row = &rows->rows[j];
            /* Rows with a reference compare the output; a "-" row says why
             * there is none. */
            if (strcmp(row->kernel, e->k->name) != 0 || strcmp(row->reference, "-") == 0)
                continue;
            row->reruns = r->runs;
            row->rerun_diff = r->differ;
            if (!differ)
                continue;
            char what[400], note[sizeof row->note];
            describe_reruns(r, what, sizeof what);
            kr_strlcpy(note, what, sizeof note);
            size_t len = strlen(note);
            snprintf(note + len, sizeof note - len, "; run 1 alone: %s", verdict_name(row->verdict));
            len = strlen(note);
            if (row->note[0] && len + 2 < sizeof note) {
                kr_strlcpy(note + len, ", ", sizeof note - len);
                kr_strlcpy(note + len + 2, row->note, sizeof note - len - 2);
            }
            kr_strlcpy(row->note, note, sizeof row->note);
            row->verdict = VERDICT_NONDETERMINISTIC;
        }
    }
}

void launch_table_free(launch_table_t *t)
{
    for (int i = 0; t && i < t->count; i++)
        free(t->items[i].out);
    if (t)
        free(t->items);
    if (t)
        memset(t, 0, sizeof *t);
}
