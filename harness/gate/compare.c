#include "compare.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"
#include "case_io.h"
#include "case_name.h"
#include "formats.h"
#include "gemm_ref.h"
#include "judge.h"
#include "kr_string.h"
#include "metrics.h"
#include "replay.h"
#include "result.h"

double compare_rel(double err2, double ref2)
{
    return ref2 > 0 ? sqrt(err2 / ref2) : NAN;
}

void compare_free(compare_t *cmp)
{
    result_list_free(&cmp->rows);
    if (cmp->default_loaded)
        policy_free(&cmp->default_policy);
    cmp->default_loaded = 0;
    free(cmp->groups);
    cmp->groups = NULL;
    cmp->count = cmp->cap = 0;
}

static compare_group_t *group_for(compare_t *cmp, const char *shape, int64_t N, int64_t K,
                                  const char *band)
{
    for (int i = 0; i < cmp->count; i++) {
        compare_group_t *g = &cmp->groups[i];
        if (g->N == N && g->K == K && !strcmp(g->band, band) && !strcmp(g->shape, shape))
            return g;
    }
    compare_group_t *g = ARRAY_APPEND_ZEROED(cmp->groups, cmp->count, cmp->cap, 16);
    if (!g)
        return NULL;
    kr_strlcpy(g->shape, shape, sizeof g->shape);
    g->N = N;
    g->K = K;
    kr_strlcpy(g->band, band, sizeof g->band);
    return g;
}

/* Runs one kernel's model: out[M, N] in fp32 (decoded bf16) and, for
 * R_exact, its own operands' product. */
static int run_model(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_options_t *opt,
                     float *out, float *r_exact, kr_error_t *err)
{
    const int64_t MN = in->M * in->N;
    kernel_act_t act;
    if (k->prepare_act(k, in, opt, &act, err))
        return -1;
    uint16_t *bits = malloc((size_t)MN * sizeof(uint16_t));
    kernel_run_info_t info = {{0}};
    int st = bits ? k->run_cpu(k, in, &act, opt, bits, &info, err)
                  : kr_fail(err, "out of memory");
    if (st == 0) {
        for (int64_t i = 0; i < MN; i++)
            out[i] = bf16_decode(bits[i]);
        st = gemm_ref_f32(act.dequant, in->M, &in->weight, 0, r_exact, err);
    }
    free(bits);
    kernel_act_free(&act);
    return st;
}

static void accumulate(const float *o, const float *r, int64_t n, double *err2, double *ref2)
{
    double e = 0, d = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!isfinite(o[i]) || !isfinite(r[i]))
            continue;
        double diff = (double)o[i] - (double)r[i];
        e += diff * diff;
        d += (double)r[i] * (double)r[i];
    }
    *err2 += e;
    if (ref2)
        *ref2 += d;
}

int compare_add_case(compare_t *cmp, const case_t *c, const char *shape_name,
                     const kernel_options_t *opt, kr_error_t *err)
{
    const char *what = c->path ? c->path : "case";
    if (!c->x)
        return kr_fail(err, "%s: compare needs the source activations x", what);
    if (!cmp->a->run_cpu || !cmp->b->run_cpu)
        return kr_fail(err, "compare needs two GEMM kernels");
    char why[256];
    const kernel_desc_t *ks[2] = {cmp->a, cmp->b};
    for (int i = 0; i < 2; i++)
        if (kernel_unsupported_reason(ks[i], c->M, c->N, c->K, why, sizeof why))
            return kr_fail(err, "%s: %s cannot run it: %s", what, ks[i]->name, why);

    uint8_t *owned = NULL;
    const uint8_t *w = case_weight_checkpoint(c, &owned, err);
    if (!w)
        return -1;
    kernel_inputs_t in = {
        .M = c->M, .N = c->N, .K = c->K, .x = c->x,
        .weight = {.packed = w, .scales = c->weight_scale, .layout = c->scale_layout,
                   .e8m0_mode = E8M0_SPEC, .N = c->N, .K = c->K},
        .weight_ref = c->weight_ref, .weight_ref_len = c->weight_ref_len,
    };
    /* Both from the same source activations: each kernel quantizes x its own way. */
    kernel_options_t o = *opt;
    o.act_source = ACT_SOURCE_QUANTIZE;
    const int64_t MN = c->M * c->N;
    float *r_source = malloc((size_t)MN * sizeof(float));
    float *out_a = malloc((size_t)MN * sizeof(float)), *out_b = malloc((size_t)MN * sizeof(float));
    float *ex_a = malloc((size_t)MN * sizeof(float)), *ex_b = malloc((size_t)MN * sizeof(float));
    uint16_t *bits = malloc((size_t)MN * sizeof(uint16_t));
    int st = (r_source && out_a && out_b && ex_a && ex_b && bits) ? 0 : kr_fail(err, "out of memory");
    const policy_t *policy = cmp->policy;
    if (st == 0 && !policy) {
        if (!cmp->default_loaded && judge_default_policy(&cmp->default_policy, err) == 0)
            cmp->default_loaded = 1;
        policy = cmp->default_loaded ? &cmp->default_policy : NULL;
        if (!policy)
            st = -1;
    }
    if (st == 0)
        st = gemm_ref_f32(c->x, c->M, &in.weight, 0, r_source, err);
    if (st == 0)
        st = run_model(cmp->a, &in, &o, out_a, ex_a, err);
    if (st == 0)
        st = run_model(cmp->b, &in, &o, out_b, ex_b, err);
    if (st == 0) {
        char shape[48];
        if (shape_name)
            kr_strlcpy(shape, shape_name, sizeof shape);
        else
            snprintf(shape, sizeof shape, "%lldx%lld", (long long)c->N, (long long)c->K);
        compare_group_t *g = group_for(cmp, shape, c->N, c->K, m_band_name(c->M));
        if (!g) {
            st = kr_fail(err, "out of memory");
        } else {
            g->cases++;
            accumulate(out_a, r_source, MN, &g->a_err2, &g->ref2);
            accumulate(out_b, r_source, MN, &g->b_err2, NULL);
            /* A against B, normalized by R_source's norm like the others. */
            double unused = 0;
            accumulate(out_b, out_a, MN, &g->ab_err2, &unused);
            accumulate(out_a, ex_a, MN, &g->a_exact_err2, &g->a_exact_ref2);
            accumulate(out_b, ex_b, MN, &g->b_exact_err2, &g->b_exact_ref2);
            /* The same comparisons as rows, for the report's plots. */
            const kernel_desc_t *ks2[2] = {cmp->a, cmp->b};
            const float *outs[2] = {out_a, out_b}, *exacts[2] = {ex_a, ex_b};
            for (int i = 0; i < 2 && st == 0; i++) {
                for (int j = 0; j < 2; j++) {
                    result_t *r = result_list_add(&cmp->rows);
                    if (!r) {
                        st = kr_fail(err, "out of memory");
                        break;
                    }
                    kr_strlcpy(r->case_path, c->path ? c->path : shape, sizeof r->case_path);
                    case_short_name(r->case_path, r->case_name, sizeof r->case_name);
                    r->M = c->M;
                    r->N = c->N;
                    r->K = c->K;
                    kr_strlcpy(r->band, m_band_name(c->M), sizeof r->band);
                    kr_strlcpy(r->kernel, ks2[i]->name, sizeof r->kernel);
                    kr_strlcpy(r->reference, j == 0 ? "R_source" : "R_exact", sizeof r->reference);
                    const float *ref = j == 0 ? r_source : exacts[i];
                    metrics_compute(outs[i], ref, c->M, c->N, &r->metrics);
                    /* The outputs are bf16 values: their bits, for the ULP checks. */
                    for (int64_t e = 0; e < MN; e++)
                        bits[e] = bf16_encode(outs[i][e]);
                    ulp_stats_bf16_vs_f32(bits, ref, MN, &r->ulp);
                    nonfinite_count(c->x, c->M * c->K, &r->input_nf);
                    policy_rule_t rule;
                    judge_rule_for(policy, ks2[i], r, j == 0 ? ks2[i]->rel_tol_source : ks2[i]->rel_tol_exact,
                                   &rule);
                    r->threshold = rule.rel_fro;
                    char judged[384];
                    r->verdict = judge_row(&rule, r, NULL, judged, sizeof judged);
                    snprintf(r->note, sizeof r->note, "compare: %s vs %s: %s", cmp->a->name, cmp->b->name,
                             judged);
                }
            }
        }
    }
    free(r_source);
    free(out_a);
    free(out_b);
    free(ex_a);
    free(ex_b);
    free(bits);
    free(owned);
    return st;
}
