#include "input_health.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"

void input_health_compute(const case_t *c, input_health_t *h)
{
    memset(h, 0, sizeof *h);
    const int64_t M = c->M, K = c->K;
    if (c->x) {
        nonfinite_count(c->x, M * K, &h->x_nf);
        if (h->x_nf.nan + h->x_nf.pos_inf + h->x_nf.neg_inf > 0) {
            unsigned char *col_hit = calloc((size_t)K, 1);
            for (int64_t m = 0; m < M; m++) {
                int row_hit = 0;
                for (int64_t k = 0; k < K; k++) {
                    if (!isfinite(c->x[m * K + k])) {
                        row_hit = 1;
                        if (col_hit)
                            col_hit[k] = 1;
                    }
                }
                h->rows_hit += row_hit;
            }
            if (col_hit) {
                for (int64_t k = 0; k < K; k++)
                    h->cols_hit += col_hit[k];
                free(col_hit);
            }
        }
    }
    if (c->x_fp8) {
        for (int64_t i = 0; i < M * K; i++) {
            float v = c->x_fp8_format == FP8_E4M3FN ? e4m3fn_decode(c->x_fp8[i])
                                                     : e4m3fnuz_decode(c->x_fp8[i]);
            h->x_fp8_nan += isnan(v) ? 1 : 0;
        }
    }
    if (c->x_scale)
        for (int64_t m = 0; m < M; m++)
            h->x_scale_nonfinite += isfinite(c->x_scale[m]) ? 0 : 1;
}

void input_health_describe(const input_health_t *h, char *buf, int cap)
{
    const int64_t xbad = h->x_nf.nan + h->x_nf.pos_inf + h->x_nf.neg_inf;
    int n = 0;
    buf[0] = '\0';
    if (xbad)
        n += snprintf(buf + n, (size_t)(cap - n),
                      "x: %lld non-finite (%lld NaN, %lld +Inf, %lld -Inf) in %lld rows x %lld columns; ",
                      (long long)xbad, (long long)h->x_nf.nan, (long long)h->x_nf.pos_inf,
                      (long long)h->x_nf.neg_inf, (long long)h->rows_hit, (long long)h->cols_hit);
    if (h->x_fp8_nan && n < cap)
        n += snprintf(buf + n, (size_t)(cap - n), "x_fp8: %lld NaN codes; ", (long long)h->x_fp8_nan);
    if (h->x_scale_nonfinite && n < cap)
        n += snprintf(buf + n, (size_t)(cap - n), "x_scale: %lld non-finite; ",
                      (long long)h->x_scale_nonfinite);
    if (n == 0)
        snprintf(buf, (size_t)cap, "all activations finite");
    else if (n >= 2 && n < cap)
        buf[n - 2] = '\0';
}
