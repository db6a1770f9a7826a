/* The replay's rows: a row's header, its judgement (the one rule, the
 * diagnosis of a failing row), its notes, its fold into the case's row in a
 * row-block replay, and the rows that compare one output with the
 * references.  Separate from the kernels and the references it is handed so
 * that every part of the replay (CPU, GPU, recorded outputs) writes its rows
 * through one place and none of them calls back up (replay_ctx.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "case_name.h"
#include "diagnose.h"
#include "diag_family.h"
#include "diag_party.h"
#include "diagnosis/acc_fit.h"
#include "formats.h"
#include "kr_string.h"
#include "metrics.h"
#include "kr_alloc.h"
#include "replay_ctx.h"
#include "row_reference.h"
#include "verdict.h"

double replay_now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}


void replay_row_header(replay_ctx_t *rc, result_t *r, const char *kernel, const char *reference)
{
    const case_t *c = rc->c;
    kr_strlcpy(r->case_path, c->path ? c->path : "", sizeof r->case_path);
    case_short_name(r->case_path, r->case_name, sizeof r->case_name);
    r->M = rc->full_M;
    r->N = c->N;
    r->K = c->K;
    kr_strlcpy(r->band, rc->opt->band_of ? rc->opt->band_of(rc->opt->band_ctx, rc->full_M)
                                         : m_band_name(rc->full_M),
               sizeof r->band);
    kr_strlcpy(r->kernel, kernel, sizeof r->kernel);
    kr_strlcpy(r->reference, reference, sizeof r->reference);
    r->input_nf = rc->source_nf;
}

/* In a row-block replay, folds a finished row into the case's row (a failure
 * to allocate the accumulator is reported, not ignored). */
int replay_fold_row(replay_ctx_t *rc, const result_t *r, row_kind_t kind, const metrics_sums_t *sums,
                    int64_t cols, int input_nf_blockwise, const uint16_t *out_bits, kr_error_t *err)
{
    if (!rc->blocks)
        return 0;
    if (row_blocks_fold(rc->blocks, r, kind, sums, cols, input_nf_blockwise, out_bits,
                        out_bits ? rc->c->M * rc->c->N : 0))
        return kr_fail(err, "out of memory for the row accumulators");
    return 0;
}

float *replay_bf16_to_f32(const uint16_t *bits, int64_t n)
{
    float *f = kr_alloc_array((size_t)n * sizeof(float));
    if (f)
        for (int64_t i = 0; i < n; i++)
            f[i] = bf16_decode(bits[i]);
    return f;
}


/* The descriptor of a row's kernel: the registry's, or a plugin's; a
 * recorded output is judged as the route it was fitted to (its activations
 * say which: MXFP4 for W4A4). */
static const kernel_desc_t *desc_of(const replay_options_t *opt, const result_t *r)
{
    const char *name = r->kernel;
    if (!strncmp(name, "recorded.out", 12))
        return kernel_for_role(!strncmp(r->act_origin, "x quantized to MXFP4", 20) ? COMPARE_ROLE_W4A4_EMULATION
                                                                                   : COMPARE_ROLE_W4A8_MODEL);
    const kernel_desc_t *k = kernel_find(name);
    for (int i = 0; !k && i < opt->n_extra_kernels; i++)
        if (!strcmp(opt->extra_kernels[i]->name, name))
            k = opt->extra_kernels[i];
    return k;
}

/* The row's verdict by the one judgement; fallback_tol: the descriptor's
 * tolerance, the rule of last resort. */
void replay_judge_row(const replay_options_t *opt, const policy_t *policy,
                            const judge_poison_t *poison, result_t *r, double fallback_tol)
{
    policy_rule_t rule;
    judge_rule_for(policy, desc_of(opt, r), r, fallback_tol, &rule);
    r->threshold = rule.rel_fro;
    r->verdict = judge_row(&rule, r, poison, r->note, sizeof r->note);
    kr_strlcpy(r->poison_where, poison ? poison->where : "", sizeof r->poison_where);
}

/* Rows [0, M) of activations a [M, K] that hold a non-finite value (malloc'd),
 * or NULL when none does or a is NULL; *failed set when out of memory. */
unsigned char *replay_rows_nonfinite(const float *a, int64_t M, int64_t K, int *failed)
{
    *failed = 0;
    if (!a)
        return NULL;
    unsigned char *mask = malloc((size_t)(M > 0 ? M : 1));
    if (!mask) {
        *failed = 1;
        return NULL;
    }
    int64_t any = 0;
    for (int64_t m = 0; m < M; m++) {
        unsigned char bad = 0;
        for (int64_t k = 0; k < K && !bad; k++)
            bad = !isfinite(a[m * K + k]);
        mask[m] = bad;
        any += bad;
    }
    if (!any) {
        free(mask);
        return NULL;
    }
    return mask;
}

/* Compares an output (bf16 bits; out_f32: its fp32 values when they are not
 * the bits' decode, else NULL) with an fp32 reference
 * and appends the row. */
int replay_add_compared_row(replay_ctx_t *rc, const char *kernel, const char *reference,
                            const kernel_act_t *act, const char *act_origin,
                            const uint16_t *out_bits, const float *out_f32,
                            const float *ref, const float *ref_operand, const float *apart_src,
                            const nonfinite_t *input_nf, double threshold, double seconds,
                            kr_error_t *err)
{
    const int64_t MN = rc->c->M * rc->c->N;
    result_t *r = result_list_add(rc->out);
    if (!r)
        return kr_fail(err, "out of memory for results");
    replay_row_header(rc, r, kernel, reference);
    if (out_bits == rc->digest_bits)
        kr_strlcpy(r->out_digest, rc->digest, sizeof r->out_digest);
    else if (!rc->opt->skip_identities)
        bf16_digest(out_bits, MN, r->out_digest);
    r->input_nf = *input_nf;
    kr_strlcpy(r->act_origin, act_origin ? act_origin : "", sizeof r->act_origin);
    /* Outputs are measured from their bf16 bits directly: no fp32 copy of
     * an M x N output, and no bf16 copy of the reference. */
    /* Rows whose inputs (apart_src [M, K]) are non-finite are judged apart. */
    unsigned char *apart = NULL;
    if (nonfinite_total(input_nf) > 0) {
        int failed;
        apart = replay_rows_nonfinite(apart_src, rc->c->M, rc->c->K, &failed);
        if (failed)
            return kr_fail(err, "out of memory for the poisoned-row mask");
    }
    metrics_sums_t sums;
    metrics_compute_apart(out_f32, out_f32 ? NULL : out_bits, ref, rc->c->M, rc->c->N, apart, &r->metrics,
                          &sums);
    ulp_stats_bf16_vs_f32_apart(out_bits, ref, rc->c->M, rc->c->N, apart, &r->ulp);
    /* How the kernel accumulates, from the operands R_exact was built from
     * (judged); a kernel without R_exact (bf16) on its R_source row. */
    const kernel_desc_t *kd = desc_of(rc->opt, r);
    const weight_kind_t wk = kd ? kd->weight_kind : WEIGHT_KIND_MXFP4;
    if ((!strcmp(reference, "R_exact") || (!strcmp(reference, "R_source") && wk == WEIGHT_KIND_BF16)) &&
        acc_fit_measure(&rc->in, act, wk, out_bits, out_f32, apart, &r->acc_fit, err)) {
        free(apart);
        return -1;
    }
    free(apart);
    r->seconds = seconds;
    replay_judge_row(rc->opt, rc->policy, rc->poison, r, threshold);
    /* Only a failing row is diagnosed: no line blames a kernel whose rows pass. */
    if (rc->opt->diagnose && diag_wanted(r->verdict) && verdict_is_failure(r->verdict)) {
        float *decoded = out_f32 ? NULL : replay_bf16_to_f32(out_bits, MN);
        if (!out_f32 && !decoded)
            return kr_fail(err, "out of memory for the diagnosis");
        diag_input_t d = {.c = rc->c, .in = &rc->in, .act = act, .kernel = kernel, .fit = &r->acc_fit, .failed = 1,
                          .out = out_f32 ? out_f32 : decoded,
                          .ref = ref, .ref_name = reference, .threshold = r->threshold,
                          .kopt = &rc->opt->kernel,
                          .row_offset = rc->blocks ? rc->blocks->block_offset : 0};
        diag_result_t dr;
        kr_error_t derr = {{0}};
        const double t0 = replay_now_seconds();
        const clock_t c0 = clock();
        const int drc = diagnose(&d, &dr, &derr);
        if (getenv("KREPLAY_DIAG_DEBUG"))   /* what a diagnosis costs, measured */
            fprintf(stderr, "diagnosis: %.3f s wall, %.3f s CPU\n", replay_now_seconds() - t0,
                    (double)(clock() - c0) / CLOCKS_PER_SEC);
        if (drc == 0 && dr.hypothesis != DIAG_CLEAN && dr.line[0]) {
            kr_strlcpy(r->diagnosis, dr.line, sizeof r->diagnosis);
            kr_strlcpy(r->diagnosis_family, diag_family(&dr), sizeof r->diagnosis_family);
            kr_strlcpy(r->diag_party, party_name(diag_party_of(&d, &dr)), sizeof r->diag_party);
            r->diagnosis_checked = dr.checked;
            r->verdict = diag_refine_verdict(&dr, r->verdict);
        }
        free(decoded);
    }
    if (rc->opt->oracle && ref_operand)
        r->ref_f32_vs_f64 = replay_reference_error_vs_f64(rc, ref_operand, ref, err);
    if (replay_fold_row(rc, r, ROW_KIND_COMPARED, &sums, rc->c->N, input_nf != &rc->source_nf,
                 rc->opt->skip_identities ? NULL : out_bits, err))
        return -1;
    if (nonfinite_total(&rc->source_nf) > 0 && nonfinite_total(input_nf) == 0 && act) {
        /* x was poisoned but the kernel's quantizer handed it finite codes:
         * R_exact on those codes judges every row. */
        char text[448];
        snprintf(text, sizeof text,
                 "x holds %lld non-finite%s%s; the kernel's activations (%s) are finite there, so every row is judged",
                 (long long)nonfinite_total(&rc->source_nf), rc->poison && rc->poison->where[0] ? " at " : "",
                 rc->poison && rc->poison->where[0] ? rc->poison->where + 3 : "", act->origin);
        replay_append_note(rc, r, text, 0);
    }
    return 0;
}

/* Adds "; <text>" to a note. */
void replay_append_text(char *note, size_t cap, const char *text)
{
    size_t len = strlen(note);
    if (!text || !text[0] || len + 3 >= cap)
        return;
    if (len) {
        kr_strlcpy(note + len, "; ", cap - len);
        len += 2;
    }
    kr_strlcpy(note + len, text, cap - len);
}

/* Adds "; <text>" to a row's note after its verdict (what the model reports
 * about its run).  rows_scoped: the text counts things in the rows replayed,
 * which in a row-block replay are one block's. */
void replay_append_note(replay_ctx_t *rc, result_t *r, const char *text, int rows_scoped)
{
    replay_append_text(r->note, sizeof r->note, text);
    if (rc->blocks)
        row_blocks_extra_note(rc->blocks, r, text, rows_scoped);
}

void replay_note_row(replay_ctx_t *rc, const char *kernel, verdict_t v, const char *note)
{
    result_t *r = result_list_add(rc->out);
    if (!r)
        return;
    replay_row_header(rc, r, kernel, ROW_REF_NONE);
    r->verdict = v;
    kr_strlcpy(r->note, note, sizeof r->note);
    kr_error_t ignored = {{0}};
    replay_fold_row(rc, r, ROW_KIND_NOTE, NULL, 0, 0, NULL, &ignored);
}


/* Rows for one output against the references the options ask for. */
int replay_compare_refs(replay_ctx_t *rc, const char *kernel, const kernel_act_t *act,
                                   weight_kind_t wk, const uint16_t *out_bits, double tol_exact,
                                   double tol_source, unsigned refs, double seconds,
                                   kr_error_t *err)
{
    const source_refs_t *src = &rc->src[wk];
    const int oracle_ok = wk == WEIGHT_KIND_MXFP4; /* the fp64 oracle multiplies MXFP4 weights */
    int rc_ = 0;
    rc->digest[0] = '\0';
    if (!rc->opt->skip_identities)
        bf16_digest(out_bits, rc->c->M * rc->c->N, rc->digest);
    rc->digest_bits = out_bits;
    if ((refs & REF_EXACT) && act && rc->in.weight.packed) {
        const float *r_exact = replay_reference_exact(rc, act, err);
        if (!r_exact)
            rc_ = -1;
        else
        {
            /* R_exact asks whether the kernel computed right on what it was
             * given: its own operands decide whether the input was poisoned. */
            nonfinite_t operand_nf;
            nonfinite_count(act->dequant, act->M * act->K, &operand_nf);
            rc_ = replay_add_compared_row(rc, kernel, ref_kind_name(REF_EXACT), act, act->origin, out_bits,
                                   NULL, r_exact, act->dequant, act->dequant, &operand_nf, tol_exact,
                                   seconds, err);
        }
    }
    if (rc_ == 0 && (refs & REF_SOURCE))
        rc_ = replay_ensure_source_refs(rc, wk, err);
    if (rc_ == 0 && (refs & REF_SOURCE) && src->r_source)
        rc_ = replay_add_compared_row(rc, kernel, ref_kind_name(REF_SOURCE), act, act ? act->origin : "",
                               out_bits, NULL, src->r_source, oracle_ok ? src->x : NULL, src->x,
                               &rc->source_nf, tol_source, seconds, err);
    if (rc_ == 0 && (refs & REF_SOURCE) && src->r_sanitized)
        rc_ = replay_add_compared_row(rc, kernel, ROW_REF_SANITIZED, act, act ? act->origin : "", out_bits, NULL,
                               src->r_sanitized, oracle_ok ? src->x_sanitized : NULL, src->x,
                               &rc->source_nf, tol_source, seconds, err);
    rc->digest_bits = NULL;
    return rc_;
}
