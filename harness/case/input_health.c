#include "input_health.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "quant_fp8.h"
#include "quant_mxfp4.h"

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

/* ---- Maps ---- */

static void nf_add(nonfinite_t *nf, float v)
{
    if (isnan(v))
        nf->nan++;
    else if (v > 0)
        nf->pos_inf++;
    else
        nf->neg_inf++;
}

static int64_t nf_total(const nonfinite_t *nf)
{
    return nf->nan + nf->pos_inf + nf->neg_inf;
}

void input_map_free(input_map_t *m)
{
    free(m->row_count);
    free(m->col_count);
    free(m->blocks);
    memset(m, 0, sizeof *m);
}

/* A run of non-finite columns in one row and the block it belongs to
 * (-1: a block counted but not stored). */
typedef struct {
    int64_t c0, c1, block;
} nf_run_t;

static void map_propagation(const float *x, int64_t M, int64_t K, input_map_t *m, uint8_t *q)
{
    input_propagation_t *p = &m->prop;
    const int64_t nblocks = K / 32;
    for (int64_t r = 0; r < M; r++) {
        if (m->row_count[r] == 0)
            continue;
        const float *xr = x + r * K;
        float s;
        fp8_token_quant_row(xr, K, FP8_TOKEN_VLLM, FP8_E4M3FN, q, &s);
        if (!isfinite(s))
            p->vllm_scale_nonfinite++;
        for (int64_t k = 0; k < K; k++) {
            if (isfinite(xr[k]))
                continue;
            float v = e4m3fn_decode(q[k]);
            if (isnan(v)) {
                p->vllm_to_nan++;
            } else if (v == E4M3FN_MAX) {
                p->vllm_to_pos_max++;
                p->vllm_from_nan_to_pos_max += isnan(xr[k]) ? 1 : 0;
            } else if (v == -E4M3FN_MAX) {
                p->vllm_to_neg_max++;
            } else {
                p->vllm_to_other++;
            }
        }
        fp8_token_quant_row(xr, K, FP8_TOKEN_TRACED, FP8_E4M3FN, q, &s);
        int64_t nan_codes = 0;
        for (int64_t k = 0; k < K; k++)
            nan_codes += isnan(e4m3fn_decode(q[k])) ? 1 : 0;
        p->traced_nan_codes += nan_codes;
        if (nan_codes == K)
            p->traced_rows_all_nan++;
        else if (nan_codes > 0)
            p->traced_rows_some_nan++;
        for (int64_t b = 0; b < nblocks; b++) {
            const float *xb = xr + b * 32;
            int nan = 0, inf = 0;
            for (int i = 0; i < 32; i++) {
                nan += isnan(xb[i]) ? 1 : 0;
                inf += isinf(xb[i]) ? 1 : 0;
            }
            if (nan + inf == 0)
                continue;
            uint8_t codes[32], scale;
            mxfp4_quant_block(xb, MXFP4_AITER_EVEN, codes, &scale);
            p->mx_blocks_hit++;
            if (nan == 32) {
                p->mx_blocks_all_nan++;
                p->mx_all_nan_scale_254 += scale == 254 ? 1 : 0;
            } else if (inf) {
                p->mx_blocks_inf++;
                p->mx_inf_scale_254 += scale == 254 ? 1 : 0;
            } else {
                p->mx_blocks_partial_nan++;
            }
            mxfp4_quant_block(xb, MXFP4_OCP, codes, &scale);
            p->ocp_nan_scale_blocks += scale == 0xFF ? 1 : 0;
        }
    }
    m->propagation_done = 1;
}

int input_map_compute(const float *x, int64_t M, int64_t K, input_map_t *m, kr_error_t *err)
{
    memset(m, 0, sizeof *m);
    m->M = M;
    m->K = K;
    m->row_count = calloc((size_t)(M > 0 ? M : 1), sizeof(int64_t));
    m->col_count = calloc((size_t)(K > 0 ? K : 1), sizeof(int64_t));
    nf_run_t *prev = malloc((size_t)(K / 2 + 2) * sizeof(nf_run_t));
    nf_run_t *cur = malloc((size_t)(K / 2 + 2) * sizeof(nf_run_t));
    uint8_t *q = malloc((size_t)(K > 0 ? K : 1));
    if (!m->row_count || !m->col_count || !prev || !cur || !q) {
        free(prev);
        free(cur);
        free(q);
        input_map_free(m);
        return kr_fail(err, "out of memory mapping non-finite activations");
    }
    int64_t nprev = 0;
    for (int64_t r = 0; r < M; r++) {
        const float *xr = x + r * K;
        int64_t ncur = 0, ip = 0;
        for (int64_t k = 0; k < K;) {
            if (isfinite(xr[k])) {
                k++;
                continue;
            }
            int64_t c0 = k;
            nonfinite_t run_nf = {0, 0, 0};
            while (k < K && !isfinite(xr[k])) {
                nf_add(&run_nf, xr[k]);
                m->col_count[k]++;
                k++;
            }
            int64_t c1 = k - 1;
            m->row_count[r] += c1 - c0 + 1;
            m->nf.nan += run_nf.nan;
            m->nf.pos_inf += run_nf.pos_inf;
            m->nf.neg_inf += run_nf.neg_inf;
            /* Does the previous row have exactly this run?  Both lists ascend in c0. */
            while (ip < nprev && prev[ip].c0 < c0)
                ip++;
            int64_t block;
            if (ip < nprev && prev[ip].c0 == c0 && prev[ip].c1 == c1) {
                block = prev[ip].block;
            } else {
                m->block_count++;
                block = -1;
                if (m->blocks_stored < INPUT_MAP_MAX_BLOCKS) {
                    if (!m->blocks) {
                        m->blocks = calloc(INPUT_MAP_MAX_BLOCKS, sizeof(nf_block_t));
                        if (!m->blocks) {
                            free(prev);
                            free(cur);
                            free(q);
                            input_map_free(m);
                            return kr_fail(err, "out of memory mapping non-finite activations");
                        }
                    }
                    block = m->blocks_stored++;
                    m->blocks[block] = (nf_block_t){.r0 = r, .r1 = r, .c0 = c0, .c1 = c1};
                }
            }
            if (block >= 0) {
                nf_block_t *b = &m->blocks[block];
                b->r1 = r;
                b->nf.nan += run_nf.nan;
                b->nf.pos_inf += run_nf.pos_inf;
                b->nf.neg_inf += run_nf.neg_inf;
            }
            cur[ncur++] = (nf_run_t){c0, c1, block};
        }
        m->rows_hit += m->row_count[r] > 0 ? 1 : 0;
        nf_run_t *t = prev;
        prev = cur;
        cur = t;
        nprev = ncur;
    }
    for (int64_t k = 0; k < K; k++)
        m->cols_hit += m->col_count[k] > 0 ? 1 : 0;
    if (nf_total(&m->nf) > 0 && K % 32 == 0)
        map_propagation(x, M, K, m, q);
    free(prev);
    free(cur);
    free(q);
    return 0;
}

int64_t index_ranges_format(const unsigned char *mask, int64_t n, int max_ranges, char *buf,
                            int cap)
{
    return index_ranges_format_from(mask, n, 0, max_ranges, buf, cap);
}

int64_t index_ranges_format_from(const unsigned char *mask, int64_t n, int64_t first,
                                 int max_ranges, char *buf, int cap)
{
    int len = 0;
    int64_t ranges = 0;
    buf[0] = '\0';
    for (int64_t i = 0; i < n;) {
        if (!mask[i]) {
            i++;
            continue;
        }
        int64_t j = i;
        while (j + 1 < n && mask[j + 1])
            j++;
        if (ranges < max_ranges && len < cap) {
            if (j > i)
                len += snprintf(buf + len, (size_t)(cap - len), "%s%lld-%lld", ranges ? ", " : "",
                                (long long)(first + i), (long long)(first + j));
            else
                len += snprintf(buf + len, (size_t)(cap - len), "%s%lld", ranges ? ", " : "",
                                (long long)(first + i));
        }
        ranges++;
        i = j + 1;
    }
    if (ranges > max_ranges && len < cap)
        snprintf(buf + len, (size_t)(cap - len), ", ... (%lld ranges)", (long long)ranges);
    return ranges;
}

/* "2176 NaN", "10 NaN, 2 +Inf", ... */
static int nf_kinds(const nonfinite_t *nf, char *buf, int cap)
{
    int len = 0;
    const char *names[3] = {"NaN", "+Inf", "-Inf"};
    const int64_t counts[3] = {nf->nan, nf->pos_inf, nf->neg_inf};
    buf[0] = '\0';
    for (int i = 0; i < 3; i++)
        if (counts[i] && len < cap)
            len += snprintf(buf + len, (size_t)(cap - len), "%s%lld %s", len ? ", " : "",
                            (long long)counts[i], names[i]);
    return len;
}

int nf_block_describe(const nf_block_t *b, char *buf, int cap)
{
    char kinds[96];
    nf_kinds(&b->nf, kinds, sizeof kinds);
    const int64_t h = b->r1 - b->r0 + 1, w = b->c1 - b->c0 + 1;
    char rows[48], cols[48];
    if (h > 1)
        snprintf(rows, sizeof rows, "rows %lld-%lld", (long long)b->r0, (long long)b->r1);
    else
        snprintf(rows, sizeof rows, "row %lld", (long long)b->r0);
    if (w > 1)
        snprintf(cols, sizeof cols, "columns %lld-%lld", (long long)b->c0, (long long)b->c1);
    else
        snprintf(cols, sizeof cols, "column %lld", (long long)b->c0);
    return snprintf(buf, (size_t)cap, "%s x %s (%lld x %lld = %s)", rows, cols, (long long)h,
                    (long long)w, kinds);
}

/* What a block's width suggests: a head of a power-of-two width it is aligned to. */
static int block_shape_note(const nf_block_t *b, int64_t M, char *buf, int cap)
{
    const int64_t h = b->r1 - b->r0 + 1, w = b->c1 - b->c0 + 1;
    int len;
    if ((w == 64 || w == 128 || w == 256) && b->c0 % w == 0)
        len = snprintf(buf, (size_t)cap, "one %lld-wide block, a whole GDN head if heads are %lld wide",
                       (long long)w, (long long)w);
    else if (w % 32 == 0 && b->c0 % 32 == 0)
        len = snprintf(buf, (size_t)cap, "%lld whole 32-blocks of K per row", (long long)(w / 32));
    else
        len = snprintf(buf, (size_t)cap, "%lld column%s wide", (long long)w, w == 1 ? "" : "s");
    if (b->r0 == 0 && h == M && h > 1 && len >= 0 && len < cap)
        len += snprintf(buf + len, (size_t)(cap - len), "; every row (all %lld)", (long long)M);
    return len;
}

#define APPEND(...)                                                                     \
    do {                                                                                \
        if (len < cap)                                                                  \
            len += snprintf(buf + len, (size_t)(cap - len), __VA_ARGS__);               \
    } while (0)

static int describe_propagation(const input_map_t *m, char *buf, int cap)
{
    const input_propagation_t *p = &m->prop;
    int len = 0;
    const int64_t bad = nf_total(&m->nf);
    APPEND("propagation: fp8 vllm: ");
    if (p->vllm_to_pos_max == bad && p->vllm_from_nan_to_pos_max == bad)
        APPEND("%lld NaN -> +448 (finite)", (long long)bad);
    else {
        APPEND("%lld non-finite -> %lld +448", (long long)bad, (long long)p->vllm_to_pos_max);
        if (p->vllm_from_nan_to_pos_max)
            APPEND(" (%lld of them NaN)", (long long)p->vllm_from_nan_to_pos_max);
        if (p->vllm_to_neg_max)
            APPEND(", %lld -448", (long long)p->vllm_to_neg_max);
        if (p->vllm_to_nan)
            APPEND(", %lld NaN codes", (long long)p->vllm_to_nan);
        if (p->vllm_to_other)
            APPEND(", %lld other codes", (long long)p->vllm_to_other);
    }
    if (p->vllm_scale_nonfinite)
        APPEND(", %lld rows with a non-finite scale (an Inf makes amax Inf)",
               (long long)p->vllm_scale_nonfinite);
    APPEND("; fp8 traced: %lld of %lld rows entirely NaN", (long long)p->traced_rows_all_nan,
           (long long)m->rows_hit);
    if (p->traced_rows_some_nan)
        APPEND(", %lld partly NaN", (long long)p->traced_rows_some_nan);
    APPEND("; mxfp4 aiter-even: finite codes");
    if (p->mx_blocks_all_nan) {
        if (p->mx_all_nan_scale_254 == p->mx_blocks_all_nan)
            APPEND(", %lld all-NaN blocks got scale 2^127", (long long)p->mx_blocks_all_nan);
        else
            APPEND(", %lld all-NaN blocks (%lld got scale 2^127)", (long long)p->mx_blocks_all_nan,
                   (long long)p->mx_all_nan_scale_254);
    }
    if (p->mx_blocks_inf)
        APPEND(", %lld blocks with an Inf got scale 2^127%s (their finite elements ~0)",
               (long long)p->mx_blocks_inf,
               p->mx_inf_scale_254 == p->mx_blocks_inf ? "" : " (some)");
    if (p->mx_blocks_partial_nan)
        APPEND(", %lld partly-NaN blocks keep a finite scale", (long long)p->mx_blocks_partial_nan);
    if (p->ocp_nan_scale_blocks)
        APPEND("; mxfp4 ocp/ceil: %lld blocks get the NaN scale 0xFF",
               (long long)p->ocp_nan_scale_blocks);
    return len;
}

int input_map_describe(const input_map_t *m, char *buf, int cap)
{
    int len = 0;
    buf[0] = '\0';
    const int64_t bad = nf_total(&m->nf);
    if (bad == 0) {
        APPEND("x: all finite");
        return len;
    }
    APPEND("x: %lld non-finite (%lld NaN, %lld +Inf, %lld -Inf) in %lld rows x %lld columns",
           (long long)bad, (long long)m->nf.nan, (long long)m->nf.pos_inf, (long long)m->nf.neg_inf,
           (long long)m->rows_hit, (long long)m->cols_hit);
    char line[256], note[160];
    if (m->block_count == 1 && m->blocks_stored == 1) {
        nf_block_describe(&m->blocks[0], line, sizeof line);
        block_shape_note(&m->blocks[0], m->M, note, sizeof note);
        APPEND("\nblock: %s: %s", line, note);
    } else {
        APPEND("\nblocks: %lld", (long long)m->block_count);
        const int64_t show = m->blocks_stored < 16 ? m->blocks_stored : 16;
        for (int64_t i = 0; i < show; i++) {
            nf_block_describe(&m->blocks[i], line, sizeof line);
            block_shape_note(&m->blocks[i], m->M, note, sizeof note);
            APPEND("\n  %s: %s", line, note);
        }
        if (m->block_count > show)
            APPEND("\n  ... and %lld more", (long long)(m->block_count - show));
    }
    unsigned char *mask = malloc((size_t)(m->M > m->K ? m->M : m->K));
    if (mask) {
        char ranges[256];
        for (int64_t r = 0; r < m->M; r++)
            mask[r] = m->row_count[r] > 0;
        index_ranges_format(mask, m->M, 8, ranges, sizeof ranges);
        APPEND("\nrows hit: %s", ranges);
        if (m->rows_hit == m->M)
            APPEND(" (all %lld)", (long long)m->M);
        for (int64_t k = 0; k < m->K; k++)
            mask[k] = m->col_count[k] > 0;
        index_ranges_format(mask, m->K, 8, ranges, sizeof ranges);
        APPEND("; columns hit: %s", ranges);
        free(mask);
    }
    if (m->propagation_done && len < cap) {
        APPEND("\n");
        len += describe_propagation(m, buf + len, cap - len);
    }
    return len < cap ? len : cap - 1;
}
