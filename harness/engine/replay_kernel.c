/* The replay's kernels: one selected kernel on a case's rows -- a
 * quantizer's row, a GEMM launched on the CPU (or sliced from its
 * whole-case launch) or handed to its GPU twin (replay_gpu.c), its rows
 * against the references, the --vs model's row.  Separate from the case's
 * plan (replay.c), which walks the kernels, and from the rows and
 * references it writes through (replay_row.c, replay_refs.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_name.h"
#include "external_launch.h"
#include "formats.h"
#include "gpu_run.h"
#include "kr_string.h"
#include "metrics.h"
#include "output_store.h"
#include "kr_alloc.h"
#include "replay_ctx.h"
#include "row_reference.h"

/* How a quantizer treated the case's non-finite inputs, and whether its
 * codes reproduce the fp8 activations the case recorded: counts over the
 * rows replayed, which add up over row blocks (row_blocks counts). */
enum {
    QC_NAN_IN, QC_NAN_TO_FINITE, QC_NAN_OUT, QC_ROWS_ALL_NAN,
    QC_VS_RECORDED, QC_CODES_SAME, QC_CODES, QC_SCALES_SAME, QC_ROWS, QC_COUNT
};
_Static_assert(QC_COUNT <= ROW_BLOCK_COUNTS, "a row accumulator keeps every quantizer count");

static void count_quantizer_run(replay_ctx_t *rc, const kernel_desc_t *k, const kernel_act_t *act,
                                int64_t counts[QC_COUNT])
{
    const case_t *c = rc->c;
    const int64_t M = c->M, K = c->K;
    memset(counts, 0, QC_COUNT * sizeof counts[0]);
    for (int64_t m = 0; m < M; m++) {
        int64_t row_nan = 0;
        for (int64_t k2 = 0; k2 < K; k2++) {
            const int64_t i = m * K + k2;
            const int in_bad = !isfinite(c->x[i]);
            const int out_nan = isnan(act->dequant[i]);
            counts[QC_NAN_IN] += in_bad;
            counts[QC_NAN_TO_FINITE] += in_bad && !out_nan && isfinite(act->dequant[i]);
            counts[QC_NAN_OUT] += out_nan;
            row_nan += out_nan;
        }
        counts[QC_ROWS_ALL_NAN] += row_nan == K;
    }
    if (k->op == KERNEL_OP_QUANT && act->kind == ACT_FP8_PER_TOKEN && c->x_fp8 &&
        c->x_fp8_format == act->fp8_format) {
        counts[QC_VS_RECORDED] = 1;
        for (int64_t i = 0; i < M * K; i++)
            counts[QC_CODES_SAME] += act->codes[i] == c->x_fp8[i];
        for (int64_t m = 0; m < M; m++)
            counts[QC_SCALES_SAME] += memcmp(&act->token_scale[m], &c->x_scale[m], sizeof(float)) == 0;
        counts[QC_CODES] = M * K;
        counts[QC_ROWS] = M;
    }
}

void replay_describe_quantizer_counts(const int64_t *counts, char *buf, int cap)
{
    int n = snprintf(buf, (size_t)cap, "non-finite in x: %lld -> finite codes: %lld; NaN operands: %lld (%lld rows entirely NaN)",
                     (long long)counts[QC_NAN_IN], (long long)counts[QC_NAN_TO_FINITE],
                     (long long)counts[QC_NAN_OUT], (long long)counts[QC_ROWS_ALL_NAN]);
    if (counts[QC_VS_RECORDED] && n > 0 && n < cap)
        snprintf(buf + n, (size_t)(cap - n), "; vs recorded x_fp8: %.4f%% codes and %lld/%lld scales bit-identical",
                 100.0 * (double)counts[QC_CODES_SAME] / (double)counts[QC_CODES],
                 (long long)counts[QC_SCALES_SAME], (long long)counts[QC_ROWS]);
}

/* A quantizer kernel: its dequantized operand against x. */
int replay_quantizer(replay_ctx_t *rc, const kernel_desc_t *k, kr_error_t *err)
{
    const case_t *c = rc->c;
    if (!c->x) {
        replay_note_row(rc, k->name, VERDICT_UNSUPPORTED, "the case has no source activations x");
        return 0;
    }
    kernel_act_t act;
    kr_error_t kerr = {{0}};
    double t0 = replay_now_seconds();
    if (k->prepare_act(k, &rc->in, &rc->opt->kernel, &act, &kerr)) {
        replay_note_row(rc, k->name, VERDICT_ERROR, kerr.msg);
        return 0;
    }
    double seconds = replay_now_seconds() - t0;
    if (rc->launches && rc->opt->model_reruns > 1) {
        launch_reruns_t rr;
        if (launch_quantizer_reruns(k, &rc->in, &rc->opt->kernel, &act, rc->opt->model_reruns,
                                    rc->blocks ? rc->blocks->block_offset : 0, &rr, err) ||
            launch_table_merge_reruns(rc->launches, k, &rr, err)) {
            replay_release_act(rc, &act);
            return -1;
        }
    }
    const int64_t MK = c->M * c->K;
    result_t *r = result_list_add(rc->out);
    uint16_t *a = malloc((size_t)MK * sizeof(uint16_t)), *b = malloc((size_t)MK * sizeof(uint16_t));
    if (!r || !a || !b) {
        free(a);
        free(b);
        replay_release_act(rc, &act);
        return kr_fail(err, "out of memory");
    }
    replay_row_header(rc, r, k->name, ROW_REF_INPUT);
    kr_strlcpy(r->act_origin, act.origin, sizeof r->act_origin);
    /* Rows and columns here are the activation matrix [M, K]. */
    metrics_sums_t sums;
    int mask_failed;
    unsigned char *apart = replay_rows_nonfinite(c->x, c->M, c->K, &mask_failed);
    if (mask_failed) {
        free(a);
        free(b);
        replay_release_act(rc, &act);
        return kr_fail(err, "out of memory for the poisoned-row mask");
    }
    metrics_compute_apart(act.dequant, NULL, c->x, c->M, c->K, apart, &r->metrics, &sums);
    free(apart);
    for (int64_t i = 0; i < MK; i++) {
        a[i] = bf16_encode(act.dequant[i]);
        b[i] = bf16_encode(c->x[i]);
    }
    ulp_stats_bf16(a, b, MK, &r->ulp);
    free(a);
    free(b);
    r->seconds = seconds;
    replay_judge_row(rc->opt, rc->policy, rc->poison, r, k->rel_tol_source);
    int64_t counts[QC_COUNT];
    char how[384];
    count_quantizer_run(rc, k, &act, counts);
    replay_describe_quantizer_counts(counts, how, sizeof how);
    replay_release_act(rc, &act);
    replay_append_text(r->note, sizeof r->note, how);
    /* The row compares the activation matrix: its columns are K. */
    int st = replay_fold_row(rc, r, ROW_KIND_QUANT, &sums, c->K, 0, NULL, err);
    if (st == 0 && rc->blocks)
        row_blocks_add_counts(rc->blocks, r, counts, QC_COUNT);
    return st;
}

/* Verdict and note of a --vs row from its metrics and histogram, by the
 * one judgement (which fails an element NaN on one side only). */
void replay_vs_row_finish(const replay_options_t *opt, const policy_t *policy, result_t *r,
                          const char *vs_name, double fallback_tol)
{
    if (r->ulp.identical == r->ulp.count) {
        r->verdict = VERDICT_PASS;
        snprintf(r->note, sizeof r->note, "bit-identical to %s", vs_name);
        return;
    }
    char judged[384];
    r->verdict = VERDICT_PASS;
    replay_judge_row(opt, policy, NULL, r, fallback_tol);
    kr_strlcpy(judged, r->note, sizeof judged);
    const int64_t disagree = r->ulp.bins[ULP_BIN_NONFINITE];
    snprintf(r->note, sizeof r->note,
             "differs from %s in %lld of %lld elements (max %llu ULP over finite pairs; 1 ULP: %lld, 2: %lld, "
             "3-4: %lld; non-finite on one side: %lld): %s",
             vs_name, (long long)(r->ulp.count - r->ulp.identical), (long long)r->ulp.count,
             (unsigned long long)r->ulp.max_ulp, (long long)r->ulp.bins[ULP_BIN_1],
             (long long)r->ulp.bins[ULP_BIN_2], (long long)r->ulp.bins[ULP_BIN_3_4], (long long)disagree, judged);
}

/* --vs: one kernel's output against another model's, bit by bit.  Models
 * that share operands but not accumulation order differ by a few ULPs;
 * the histogram shows how many and how far. */
static int add_vs_row(replay_ctx_t *rc, const kernel_desc_t *k, const uint16_t *out,
                      kr_error_t *err)
{
    const int64_t MN = rc->c->M * rc->c->N;
    result_t *r = result_list_add(rc->out);
    float *a = replay_bf16_to_f32(out, MN), *b = replay_bf16_to_f32(rc->vs_out, MN);
    if (!r || !a || !b) {
        free(a);
        free(b);
        return kr_fail(err, "out of memory");
    }
    char ref[32];
    snprintf(ref, sizeof ref, ROW_REF_MODEL_PREFIX "%.24s", rc->vs->name);
    replay_row_header(rc, r, k->name, ref);
    metrics_sums_t sums;
    metrics_compute_sums(a, b, rc->c->M, rc->c->N, &r->metrics, &sums);
    ulp_stats_bf16(out, rc->vs_out, MN, &r->ulp);
    free(a);
    free(b);
    replay_vs_row_finish(rc->opt, rc->policy, r, rc->vs->name,
                  k->rel_tol_exact > 0 ? k->rel_tol_exact : k->rel_tol_source);
    return replay_fold_row(rc, r, ROW_KIND_VS, &sums, rc->c->N, 0, NULL, err);
}

/* Runs the --vs model once per case and keeps its output bits. */
void replay_prepare_vs_model(replay_ctx_t *rc)
{
    const kernel_desc_t *k = rc->vs;
    const case_t *c = rc->c;
    char why[256];
    if (!k || k->op != KERNEL_OP_GEMM ||
        kernel_unsupported_reason(k, rc->full_M, c->N, c->K, why, sizeof why))
        return;
    if ((k->weight_kind == WEIGHT_KIND_MXFP4 && !rc->in.weight.packed) ||
        (k->weight_kind == WEIGHT_KIND_BF16 && !rc->in.weight_bf16))
        return;
    kernel_act_t act;
    kr_error_t kerr = {{0}};
    if (k->prepare_act(k, &rc->in, &rc->opt->kernel, &act, &kerr))
        return;
    rc->vs_out = kr_alloc_array((size_t)c->M * (size_t)c->N * sizeof(uint16_t));
    kernel_run_info_t info = {{0}};
    if (rc->vs_out && k->run_cpu(k, &rc->in, &act, &rc->opt->kernel, rc->vs_out, &info, &kerr)) {
        free(rc->vs_out);
        rc->vs_out = NULL;
    }
    replay_release_act(rc, &act);
}

/* Run 1's output of k on this block's rows: sliced from the whole-case
 * launch when the kernel had one (external kernels of a row-block replay),
 * else launched here, its reruns merged into the case's launch table. */
static int launch_cpu_or_slice(replay_ctx_t *rc, const kernel_desc_t *k, const kernel_act_t *act,
                               uint16_t *out, launch_outcome_t *lo, kr_error_t *err)
{
    const int64_t row0 = rc->blocks ? rc->blocks->block_offset : 0;
    const launch_entry_t *whole = launch_table_find(rc->launches, k);
    if (whole && whole->whole) {
        *lo = whole->outcome;
        if (row0 > 0)
            lo->seconds = 0;    /* the launch is counted once, with the first block */
        if (lo->ok)
            memcpy(out, whole->out + row0 * rc->c->N,
                   (size_t)rc->c->M * (size_t)rc->c->N * sizeof(uint16_t));
        return 0;
    }
    launch_plan_t plan;
    launch_plan_for(k, rc->opt, row0, &plan);
    if (launch_kernel(k, &rc->in, act, &rc->opt->kernel, &plan, out, lo, err))
        return -1;
    if (lo->ok && rc->launches)
        return launch_table_merge_reruns(rc->launches, k, &lo->reruns, err);
    return 0;
}

int replay_kernel(replay_ctx_t *rc, const kernel_desc_t *k, kr_error_t *err)
{
    const case_t *c = rc->c;
    char why[256];
    /* Whether a kernel serves a shape depends on the case's M, not a block's. */
    if (kernel_unsupported_reason(k, rc->full_M, c->N, c->K, why, sizeof why)) {
        replay_note_row(rc, k->name, VERDICT_UNSUPPORTED, why);
        return 0;
    }
    if (k->op == KERNEL_OP_QUANT) {
        /* A GPU run checks the quantizer as the CPU run does, and its twin too. */
        const int st = replay_quantizer(rc, k, err);
        return st || !rc->opt->device_gpu ? st : replay_gpu_quantizer(rc, k, err);
    }
    if (k->weight_kind == WEIGHT_KIND_MXFP4 && !rc->in.weight.packed) {
        replay_note_row(rc, k->name, VERDICT_UNSUPPORTED, "the case has no MXFP4 weight");
        return 0;
    }
    if (k->weight_kind == WEIGHT_KIND_BF16 && !rc->in.weight_bf16) {
        replay_note_row(rc, k->name, VERDICT_UNSUPPORTED, "the case has no bf16 weight (weight_bf16)");
        return 0;
    }
    kernel_act_t act;
    kr_error_t kerr = {{0}};
    if (k->prepare_act(k, &rc->in, &rc->opt->kernel, &act, &kerr)) {
        replay_note_row(rc, k->name, VERDICT_UNSUPPORTED, kerr.msg);
        return 0;
    }
    /* A kernel without a GPU twin runs its CPU model in a GPU run too. */
    if (rc->opt->device_gpu && gpu_kernel_runs(k, GPU_VARIANT_SIMT)) {
        const int st = replay_gpu_kernel(rc, k, &act, err);
        replay_release_act(rc, &act);
        return st;
    }
    uint16_t *out = kr_alloc_array((size_t)c->M * (size_t)c->N * sizeof(uint16_t));
    if (!out) {
        replay_release_act(rc, &act);
        return kr_fail(err, "out of memory for the output of %s", k->name);
    }
    launch_outcome_t lo;
    if (launch_cpu_or_slice(rc, k, &act, out, &lo, err)) {
        free(out);
        replay_release_act(rc, &act);
        return -1;
    }
    if (!lo.ok && lo.verdict != VERDICT_ERROR) {
        /* CRASHED, TIMEOUT or OOB_WRITE: one row, and on. */
        replay_note_row(rc, k->name, lo.verdict, lo.message);
        rc->out->rows[rc->out->count - 1].seconds = lo.seconds;
        free(out);
        replay_release_act(rc, &act);
        return 0;
    }
    const int failed = !lo.ok;
    kr_strlcpy(kerr.msg, lo.message, sizeof kerr.msg);
    const kernel_run_info_t info = lo.info;
    const double seconds = lo.seconds;
    int status = 0;
    if (failed) {
        replay_note_row(rc, k->name, VERDICT_ERROR, kerr.msg);
    } else {
        int64_t first_row = rc->out->count;
        status = replay_compare_refs(rc, k->name, &act, k->weight_kind, out, k->rel_tol_exact,
                                         k->rel_tol_source, k->refs & rc->opt->refs, seconds, err);
        for (int64_t i = first_row; info.note[0] && i < rc->out->count; i++)
            replay_append_note(rc, &rc->out->rows[i], info.note, 0);
        if (status == 0 && rc->vs_out && rc->vs != k)
            status = add_vs_row(rc, k, out, err);
        if (status == 0 && rc->opt->save_outputs_path) {
            char name[128];
            case_short_name(c->path ? c->path : "case", name, sizeof name);
            status = output_store_save(rc->opt->save_outputs_path, name, k->name, &act, out, c->M,
                                       c->N, err);
        }
    }
    free(out);
    replay_release_act(rc, &act);
    return status;
}
