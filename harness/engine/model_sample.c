#include "model_sample.h"

#include <stdlib.h>
#include <string.h>

int64_t model_sample_count(int64_t M, int64_t want)
{
    if (want < 0 || want >= M)
        return M;
    return want;
}

/* Rows `rows` of an [M, width] array of elem-byte elements, gathered (NULL
 * stays NULL; *failed set when out of memory). */
static void *gather(const void *src, const int64_t *rows, int64_t n, size_t row_bytes, int *failed)
{
    if (!src)
        return NULL;
    unsigned char *dst = malloc((size_t)n * row_bytes + 1);
    if (!dst) {
        *failed = 1;
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        memcpy(dst + (size_t)i * row_bytes, (const unsigned char *)src + (size_t)rows[i] * row_bytes,
               row_bytes);
    return dst;
}

/* The model on every row: the full run, nothing gathered. */
static int run_all(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                   const kernel_options_t *kopt, model_sample_t *s, kr_error_t *err)
{
    for (int64_t i = 0; i < s->n; i++)
        s->rows[i] = i;
    kernel_run_info_t info = {{0}};
    const int rc = k->run_cpu(k, in, act, kopt, s->model, &info, err);
    memcpy(s->note, info.note, sizeof s->note);
    return rc == 0 || rc == KERNEL_RUN_UNSUPPORTED ? rc : -1;
}

int model_sample_run(const kernel_desc_t *k, const kernel_inputs_t *in, const kernel_act_t *act,
                     const kernel_options_t *kopt, int64_t want, model_sample_t *s, kr_error_t *err)
{
    memset(s, 0, sizeof *s);
    const int64_t M = in->M, N = in->N, K = in->K;
    s->n = model_sample_count(M, want);
    if (s->n == 0)
        return 0;
    s->rows = malloc((size_t)s->n * sizeof *s->rows);
    s->model = malloc((size_t)s->n * (size_t)N * sizeof(uint16_t));
    if (!s->rows || !s->model) {
        model_sample_free(s);
        return kr_fail(err, "out of memory for the model check of %s", k->name);
    }
    if (s->n == M) {
        const int rc = run_all(k, in, act, kopt, s, err);
        if (rc)
            model_sample_free(s);
        return rc;
    }
    for (int64_t i = 0; i < s->n; i++)
        s->rows[i] = s->n == 1 ? 0 : i * (M - 1) / (s->n - 1);
    int failed = 0;
    const size_t sk = (size_t)K;
    kernel_inputs_t sub = *in;
    sub.M = s->n;
    sub.dispatch_M = in->dispatch_M > 0 ? in->dispatch_M : M;
    sub.x_fp8_parts = NULL;
    sub.x_scale_parts = NULL;
    sub.parts = 0;
    void *x = gather(in->x, s->rows, s->n, sk * sizeof(float), &failed);
    void *x_fp8 = gather(in->x_fp8, s->rows, s->n, sk, &failed);
    void *x_scale = gather(in->x_scale, s->rows, s->n, sizeof(float), &failed);
    kernel_act_t a = *act;
    a.M = s->n;
    a.codes = gather(act->codes, s->rows, s->n, sk, &failed);
    a.token_scale = gather(act->token_scale, s->rows, s->n, sizeof(float), &failed);
    a.block_scale = gather(act->block_scale, s->rows, s->n, sk / 32, &failed);
    a.dequant = gather(act->dequant, s->rows, s->n, sk * sizeof(float), &failed);
    sub.x = x;
    sub.x_fp8 = x_fp8;
    sub.x_scale = x_scale;
    int st = failed ? kr_fail(err, "out of memory for the model check of %s", k->name) : 0;
    kernel_run_info_t info = {{0}};
    if (st == 0 && (st = k->run_cpu(k, &sub, &a, kopt, s->model, &info, err)) != 0)
        st = st == KERNEL_RUN_UNSUPPORTED ? st : -1;
    memcpy(s->note, info.note, sizeof s->note);
    free(x);
    free(x_fp8);
    free(x_scale);
    kernel_act_free(&a);
    if (st)
        model_sample_free(s);
    return st;
}

int model_sample_take(model_sample_t *s, const uint16_t *out, int64_t N)
{
    free(s->out);
    s->out = malloc((size_t)s->n * (size_t)N * sizeof(uint16_t) + 1);
    if (!s->out)
        return -1;
    for (int64_t i = 0; i < s->n; i++)
        memcpy(s->out + i * N, out + s->rows[i] * N, (size_t)N * sizeof(uint16_t));
    return 0;
}

void model_sample_free(model_sample_t *s)
{
    free(s->rows);
    free(s->model);
    free(s->out);
    memset(s, 0, sizeof *s);
}
