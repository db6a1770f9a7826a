#include "reduce_slice.h"

#include <stdlib.h>
#include <string.h>

#include "case_io.h"
#include "mxfp4_weight.h"

/* An index list: the given one, or 0..n-1 (owned) when it is NULL. */
typedef struct {
    const int64_t *at;
    int64_t n;
    int64_t *owned;
} index_list_t;

static int index_list(const int64_t *given, int64_t n_given, int64_t all, index_list_t *l)
{
    l->owned = NULL;
    if (given) {
        l->at = given;
        l->n = n_given;
        return 0;
    }
    l->owned = malloc((size_t)(all > 0 ? all : 1) * sizeof *l->owned);
    if (!l->owned)
        return -1;
    for (int64_t i = 0; i < all; i++)
        l->owned[i] = i;
    l->at = l->owned;
    l->n = all;
    return 0;
}

/* Rows `rows` of a row-major [*, src_cols] array of elem-byte elements,
 * each cut to its column groups `groups` of group_w elements, into a new
 * [rows->n, groups->n * group_w] array.  NULL src gives NULL (and no error:
 * *failed is set only when an allocation fails). */
static void *cut2d(const void *src, int64_t src_cols, size_t elem, const index_list_t *rows,
                   const index_list_t *groups, int64_t group_w, int *failed)
{
    if (!src)
        return NULL;
    const size_t run = (size_t)group_w * elem;
    const size_t out_cols = (size_t)groups->n * run;
    unsigned char *out = malloc(out_cols * (size_t)rows->n + 1);
    if (!out) {
        *failed = 1;
        return NULL;
    }
    const unsigned char *s = src;
    for (int64_t i = 0; i < rows->n; i++) {
        const unsigned char *row = s + (size_t)rows->at[i] * (size_t)src_cols * elem;
        unsigned char *dst = out + (size_t)i * out_cols;
        for (int64_t g = 0; g < groups->n; g++)
            memcpy(dst + (size_t)g * run, row + (size_t)groups->at[g] * run, run);
    }
    return out;
}

static char *dup_or_null(const char *s, int *failed)
{
    if (!s)
        return NULL;
    char *d = strdup(s);
    if (!d)
        *failed = 1;
    return d;
}

static void copy_provenance(const case_t *c, case_t *o, int *failed)
{
    o->path = dup_or_null(c->path, failed);
    o->kernel_path = dup_or_null(c->kernel_path, failed);
    o->layer = dup_or_null(c->layer, failed);
    o->model = dup_or_null(c->model, failed);
    o->capture_time = dup_or_null(c->capture_time, failed);
    o->env_flags = dup_or_null(c->env_flags, failed);
    o->route = dup_or_null(c->route, failed);
    o->tp_rank = dup_or_null(c->tp_rank, failed);
    o->versions = dup_or_null(c->versions, failed);
    o->gpu_arch = dup_or_null(c->gpu_arch, failed);
    o->extension_path = dup_or_null(c->extension_path, failed);
    o->capture_time_source = dup_or_null(c->capture_time_source, failed);
}

uint8_t *reduce_weight_checkpoint(const case_t *c, kr_error_t *err)
{
    const size_t bytes = (size_t)c->N * (size_t)(c->K / 2);
    uint8_t *w = malloc(bytes + 1);
    if (!w) {
        kr_fail(err, "%s: out of memory for the weight", c->path);
        return NULL;
    }
    if (c->weight_order == WEIGHT_ORDER_CHECKPOINT) {
        memcpy(w, c->weight, bytes);
    } else if (wperm_unpermute(c->weight, c->N, c->K, w)) {
        free(w);
        kr_fail(err, "%s: weight: fragment order needs N and K divisible by 16 (N=%lld K=%lld)",
                c->path, (long long)c->N, (long long)c->K);
        return NULL;
    }
    return w;
}

int reduce_weight_store(case_t *c, const uint8_t *w, kr_error_t *err)
{
    const size_t bytes = (size_t)c->N * (size_t)(c->K / 2);
    if (c->weight_order == WEIGHT_ORDER_CHECKPOINT) {
        memcpy(c->weight, w, bytes);
        return 0;
    }
    if (wperm_permute(w, c->N, c->K, c->weight))
        return kr_fail(err, "%s: weight: fragment order needs N and K divisible by 16 (N=%lld "
                            "K=%lld); a reduction keeps whole 16-column units",
                       c->path, (long long)c->N, (long long)c->K);
    return 0;
}

/* The MXFP4 weight and its scales, cut to the kept columns and K-blocks. */
static int slice_weight(const case_t *c, const index_list_t *cols, const index_list_t *kb,
                        case_t *o, int *failed, kr_error_t *err)
{
    const index_list_t one = {.at = (const int64_t[]){0}, .n = 1};
    if (c->weight_ref)
        o->weight_ref = c->weight_ref_len == c->N
                            ? cut2d(c->weight_ref, c->N, 1, &one, cols, 1, failed)
                            : cut2d(c->weight_ref, c->weight_ref_len, 1, &one, &one,
                                    c->weight_ref_len, failed);
    o->weight_ref_len = c->weight_ref_len == c->N ? cols->n : c->weight_ref_len;
    if (!c->weight)
        return 0;
    const int64_t nb = c->K / 32;
    o->weight_scale = c->scale_layout == SCALE_LAYOUT_NK
                          ? cut2d(c->weight_scale, nb, 1, cols, kb, 1, failed)
                          : cut2d(c->weight_scale, c->N, 1, kb, cols, 1, failed);
    uint8_t *w = reduce_weight_checkpoint(c, err);
    if (!w)
        return -1;
    /* 16 packed bytes hold one 32-block of a row. */
    o->weight = cut2d(w, c->K / 2, 1, cols, kb, 16, failed);
    free(w);
    if (*failed || o->weight_order == WEIGHT_ORDER_CHECKPOINT)
        return 0;
    /* Cut in checkpoint order; the layout is applied again to the cut. */
    uint8_t *cut = o->weight;
    o->weight = malloc((size_t)cols->n * (size_t)(16 * kb->n) + 1);
    if (!o->weight) {
        o->weight = cut;
        *failed = 1;
        return 0;
    }
    const int rc = reduce_weight_store(o, cut, err);
    free(cut);
    return rc;
}

int reduce_slice(const case_t *c, const reduce_keep_t *keep, int keep_recorded, case_t *out,
                 kr_error_t *err)
{
    memset(out, 0, sizeof *out);
    index_list_t rows, cols, kb;
    if (index_list(keep->rows, keep->n_rows, c->M, &rows) ||
        index_list(keep->cols, keep->n_cols, c->N, &cols) ||
        index_list(keep->kblocks, keep->n_kblocks, c->K / 32, &kb))
        return kr_fail(err, "out of memory for a reduced case");
    int failed = 0;
    out->M = rows.n;
    out->N = cols.n;
    out->K = 32 * kb.n;
    out->x_storage = c->x_storage;
    out->x_fp8_format = c->x_fp8_format;
    out->weight_order = c->weight_order;
    out->scale_layout = c->scale_layout;
    copy_provenance(c, out, &failed);
    const index_list_t one = {.at = (const int64_t[]){0}, .n = 1};
    out->x = cut2d(c->x, c->K, sizeof(float), &rows, &kb, 32, &failed);
    out->x_fp8 = cut2d(c->x_fp8, c->K, 1, &rows, &kb, 32, &failed);
    out->x_scale = cut2d(c->x_scale, 1, sizeof(float), &rows, &one, 1, &failed);
    out->weight_bf16 = cut2d(c->weight_bf16, c->K, sizeof(uint16_t), &cols, &kb, 32, &failed);
    int rc = slice_weight(c, &cols, &kb, out, &failed, err);
    if (keep_recorded) {
        out->out = cut2d(c->out, c->N, sizeof(uint16_t), &rows, &cols, 1, &failed);
        out->out_rerun = cut2d(c->out_rerun, c->N, sizeof(uint16_t), &rows, &cols, 1, &failed);
        out->aiter = cut2d(c->aiter, c->N, sizeof(uint16_t), &rows, &cols, 1, &failed);
        out->ref_recorded = cut2d(c->ref_recorded, c->N, sizeof(float), &rows, &cols, 1, &failed);
    }
    free(rows.owned);
    free(cols.owned);
    free(kb.owned);
    if (rc == 0 && failed)
        rc = kr_fail(err, "out of memory for a reduced case");
    if (rc)
        case_free(out);
    return rc;
}

int reduce_copy(const case_t *c, int keep_recorded, case_t *out, kr_error_t *err)
{
    const reduce_keep_t all = {0};
    return reduce_slice(c, &all, keep_recorded, out, err);
}
