/* The replay's recorded outputs: what the case recorded in production
 * (out, out_rerun, the serve's reference, aiter's output) against the same
 * references as the kernels, judged as the route that produced them, and
 * the rerun race check.  Separate from the kernels (replay_kernel.c): it
 * launches nothing, it fits a route. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "act_prepare.h"
#include "formats.h"
#include "metrics.h"
#include "kr_alloc.h"
#include "replay_ctx.h"
#include "row_reference.h"

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
        replay_row_header(rc, r, "recorded.out", ROW_REF_RERUN);
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
            uint16_t *bits = kr_alloc_array((size_t)MN * sizeof(uint16_t));
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
