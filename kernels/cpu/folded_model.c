#include "folded_model.h"

#include <stdio.h>

#include "scratch.h"

typedef struct {
    const folded_model_t *model;
    int64_t N, K;
    uint16_t *out;
} folded_job_t;

/* k per chunk: a tile's decoded weight is K x TILE_N floats (640 KB at
 * K = 5120), more than a core's L2; walked whole for every group of
 * FOLDED_MB rows it streamed from L3 each time.  A chunk of it (32 KB) is
 * used by all the task's rows before the next. */
#define FOLDED_KC 256

/* Rows [m0, m1) of tile t for one copy's columns [j0, j1): acc and part
 * hold m1 - m0 rows.  Each sum runs over its split in ascending k, chunk
 * after chunk (continued from the stored sums), and the splits are added in
 * split order. */
static void folded_rows(const folded_job_t *job, const folded_tile_t *t, const folded_act_t *a,
                        int64_t m0, int64_t m1, int64_t j0, int64_t j1, float (*acc)[TILE_N],
                        float (*part)[TILE_N])
{
    const folded_model_t *model = job->model;
    const int64_t span = job->K / model->splits;
    for (int s = 0; s < model->splits; s++) {
        float (*sums)[TILE_N] = s == 0 ? acc : part;               /* acc = partial[0] */
        for (int64_t c0 = s * span; c0 < (s + 1) * span; c0 += FOLDED_KC) {
            const int64_t c1 = (s + 1) * span - c0 < FOLDED_KC ? (s + 1) * span : c0 + FOLDED_KC;
            for (int64_t m = m0; m < m1; m += FOLDED_MB) {
                const int mb = (int)(m1 - m < FOLDED_MB ? m1 - m : FOLDED_MB);
                folded_dot(t, a, m, mb, c0, c1, c0 == s * span, sums + (m - m0));
            }
        }
        if (s > 0)
            for (int64_t i = 0; i < m1 - m0; i++)
                for (int j = 0; j < TILE_N; j++)
                    acc[i][j] += part[i][j];                          /* split order */
    }
    for (int64_t i = 0; i < m1 - m0; i++)
        folded_store(t, acc[i], a->scale[m0 + i], job->out + (m0 + i) * job->N, j0, j1);
}

/* folded_run's task: rows [m0, m1) of tile t, copy by copy over the
 * columns each serves. */
static void folded_model_rows(void *ctx, const folded_tile_t *t, int64_t m0, int64_t m1)
{
    const folded_job_t *job = ctx;
    const folded_model_t *model = job->model;
    const int64_t N = job->N;
    scratch_t scratch = {0};
    float (*rows)[TILE_N] = scratch_get(&scratch, (size_t)(2 * (m1 - m0)) * sizeof *rows);
    for (int p = 0; p < model->parts; p++) {
        const int64_t lo = p == 0 ? 0 : model->part_end[p - 1];
        const int64_t hi = p == model->parts - 1 ? N : model->part_end[p];
        const int64_t j0 = lo > t->n0 ? lo - t->n0 : 0;
        const int64_t j1 = hi - t->n0 < t->width ? hi - t->n0 : t->width;
        if (j0 >= j1)
            continue;
        const folded_act_t *a = &model->act[p];
        if (rows) {
            folded_rows(job, t, a, m0, m1, j0, j1, rows, rows + (m1 - m0));
            continue;
        }
        /* No memory for the task's rows: a group of rows at a time, each
         * walking the whole tile (the same sums, only slower). */
        float acc[FOLDED_MB][TILE_N], part[FOLDED_MB][TILE_N];
        for (int64_t m = m0; m < m1; m += FOLDED_MB)
            folded_rows(job, t, a, m, m1 - m < FOLDED_MB ? m1 : m + FOLDED_MB, j0, j1, acc, part);
    }
    scratch_put(&scratch);
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
