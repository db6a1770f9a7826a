#include "folded_model.h"

#include <stdio.h>

typedef struct {
    const folded_model_t *model;
    int64_t N, K;
    uint16_t *out;
} folded_job_t;

/* folded_run's task: rows [m0, m1) of tile t, copy by copy over the
 * columns each serves. */
static void folded_model_rows(void *ctx, const folded_tile_t *t, int64_t m0, int64_t m1)
{
    const folded_job_t *job = ctx;
    const folded_model_t *model = job->model;
    const int64_t N = job->N, span = job->K / model->splits;
    float acc[FOLDED_MB][TILE_N], part[FOLDED_MB][TILE_N];
    for (int p = 0; p < model->parts; p++) {
        const int64_t lo = p == 0 ? 0 : model->part_end[p - 1];
        const int64_t hi = p == model->parts - 1 ? N : model->part_end[p];
        const int64_t j0 = lo > t->n0 ? lo - t->n0 : 0;
        const int64_t j1 = hi - t->n0 < t->width ? hi - t->n0 : t->width;
        if (j0 >= j1)
            continue;
        const folded_act_t *a = &model->act[p];
        for (int64_t m = m0; m < m1; m += FOLDED_MB) {
            const int mb = (int)(m1 - m < FOLDED_MB ? m1 - m : FOLDED_MB);
            folded_dot(t, a, m, mb, 0, span, acc);                      /* acc = partial[0] */
            for (int s = 1; s < model->splits; s++) {
                folded_dot(t, a, m, mb, s * span, (s + 1) * span, part);
                for (int i = 0; i < mb; i++)
                    for (int j = 0; j < TILE_N; j++)
                        acc[i][j] += part[i][j];                          /* split order */
            }
            for (int i = 0; i < mb; i++)
                folded_store(t, acc[i], a->scale[m + i], job->out + (m + i) * N, j0, j1);
        }
    }
}

int folded_model_run(const folded_model_t *model, const kernel_inputs_t *in,
                     const kernel_options_t *opt, uint16_t *out, kernel_run_info_t *info,
                     kr_error_t *err)
{
    folded_plan_t plan;
    if (folded_plan_init(&plan, in, model->wlayout, err))
        return -1;
    folded_job_t job = {.model = model, .N = in->N, .K = in->K, .out = out};
    int rc = 0;
    if (folded_run(&plan, in->M, opt->threads, folded_model_rows, &job)) {
        rc = kr_fail(err, "out of memory for weight tiles");
    } else if (info) {
        const char *layout = model->layout_note;
        snprintf(info->note, sizeof info->note, "%s%s%s", layout,
                 *layout && plan.ref_from_case ? "; " : "",
                 plan.ref_from_case ? "ref = case weight_ref" : "");
        folded_stats_note(&plan, info->note, (int)sizeof info->note);
    }
    folded_plan_free(&plan);
    return rc;
}
