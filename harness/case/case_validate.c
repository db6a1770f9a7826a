/* Schema-v1 rules for a case held in memory (cases/SCHEMA.md), the attribute
 * vocabulary the reader and writer share, and case_free.
 *
 * The reader checks the same rules against the file before it allocates
 * anything; this file is the single place that says what a valid case is,
 * so the writer can never produce a file the reader refuses. */
#include "case_io.h"

#include <stdlib.h>
#include <string.h>

/* ---- vocabulary ---- */

/* Index of s in names[0..n), -1 for NULL or an unknown name. */
static int name_index(const char *s, const char *const *names, int n)
{
    for (int i = 0; s && i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

static const char *const WEIGHT_ORDER_NAMES[] = {"checkpoint", "fragment"};
static const char *const FP8_FORMAT_NAMES[] = {"e4m3fn", "e4m3fnuz"};

const char *case_weight_order_attr(weight_order_t o)
{
    return WEIGHT_ORDER_NAMES[o == WEIGHT_ORDER_FRAGMENT];
}

const char *case_fp8_format_attr(fp8_format_t f)
{
    return FP8_FORMAT_NAMES[f == FP8_E4M3FNUZ];
}

/* On an unknown name *out is left as it was. */
int case_weight_order_from_attr(const char *s, weight_order_t *out)
{
    int i = name_index(s, WEIGHT_ORDER_NAMES, 2);
    *out = i == 1 ? WEIGHT_ORDER_FRAGMENT : i == 0 ? WEIGHT_ORDER_CHECKPOINT : *out;
    return i < 0 ? -1 : 0;
}

int case_fp8_format_from_attr(const char *s, fp8_format_t *out)
{
    int i = name_index(s, FP8_FORMAT_NAMES, 2);
    *out = i == 1 ? FP8_E4M3FNUZ : i == 0 ? FP8_E4M3FN : *out;
    return i < 0 ? -1 : 0;
}

/* ---- dimensions ---- */

int case_mul_i64(int64_t a, int64_t b, int64_t *out)
{
    if (a < 0 || b < 0)
        return -1;
    if (a != 0 && b > INT64_MAX / a)
        return -1;
    *out = a * b;
    return 0;
}

/* One array's element count against the cap.  Reported with the raw
 * numbers, because a header that claims 2^40 x 2^40 is exactly the kind of
 * corruption the user needs to see. */
static int check_count(int64_t a, int64_t b, const char *an, const char *bn,
                       const char *array, const char *what, kr_error_t *err)
{
    int64_t n;
    if (case_mul_i64(a, b, &n) != 0 || n > CASE_MAX_ELEMENTS)
        return kr_fail(err,
                       "%s: %s, %s: %s=%lld and %s=%lld give %s more than 2^40 elements; "
                       "expected at most 2^40 (%lld) elements per array",
                       what, an, bn, an, (long long)a, bn, (long long)b, array,
                       (long long)CASE_MAX_ELEMENTS);
    return 0;
}

int case_check_dims(int64_t M, int64_t N, int64_t K, const char *what, kr_error_t *err)
{
    if (!what)
        what = "(case)";
    const int64_t v[3] = {M, N, K};
    const char *names[3] = {"M", "N", "K"};
    for (int i = 0; i < 3; i++)
        if (v[i] <= 0)
            return kr_fail(err, "%s: %s: %s=%lld is not positive; expected %s > 0",
                           what, names[i], names[i], (long long)v[i], names[i]);
    if (K % 32 != 0)
        return kr_fail(err,
                       "%s: K: K=%lld is not a multiple of 32; expected K %% 32 == 0 "
                       "(the MX block size)",
                       what, (long long)K);
    if (check_count(M, K, "M", "K", "x [M, K]", what, err) ||
        check_count(N, K, "N", "K", "the weight [N, K]", what, err) ||
        check_count(M, N, "M", "N", "the output [M, N]", what, err))
        return -1;
    return 0;
}

/* ---- the whole case ---- */

/* The MXFP4 weight's own rules (only when the case has one). */
static int validate_mxfp4_weight(const case_t *c, const char *what, kr_error_t *err)
{
    if (c->weight_order != WEIGHT_ORDER_CHECKPOINT && c->weight_order != WEIGHT_ORDER_FRAGMENT)
        return kr_fail(err, "%s: weight: order %d is unknown; expected checkpoint or fragment",
                       what, (int)c->weight_order);
    /* WPERM views the weight as (N/16, 16, K/16, 2, 4): anything else cannot
     * have been produced by permute_w. */
    if (c->weight_order == WEIGHT_ORDER_FRAGMENT && (c->N % 16 != 0 || c->K % 16 != 0))
        return kr_fail(err,
                       "%s: weight: fragment order with N=%lld, K=%lld; expected N %% 16 == 0 "
                       "and K %% 16 == 0 for order \"fragment\"",
                       what, (long long)c->N, (long long)c->K);

    if (!c->weight_scale)
        return kr_fail(err, "%s: weight_scale: missing; expected an e8m0 uint8 array "
                            "[N, K/32] or [K/32, N]", what);
    if (c->scale_layout != SCALE_LAYOUT_NK && c->scale_layout != SCALE_LAYOUT_KN)
        return kr_fail(err, "%s: weight_scale: layout %d is unknown; expected \"N,K/32\" or "
                            "\"K/32,N\"", what, (int)c->scale_layout);
    return 0;
}

/* Everything but the weights. */
static int validate_rest(const case_t *c, const char *what, kr_error_t *err)
{
    if (c->weight_ref) {
        int64_t len = c->weight_ref_len;
        if (len != c->N && len != 2 && len != 1)
            return kr_fail(err,
                           "%s: weight_ref: length %lld is not a known route; expected [%lld] "
                           "(N, folded), [2] (per-block) or [1] (aiter) uint8",
                           what, (long long)len, (long long)c->N);
    } else if (c->weight_ref_len != 0) {
        return kr_fail(err, "%s: weight_ref: NULL with length %lld; expected length 0 when absent",
                       what, (long long)c->weight_ref_len);
    }

    if (c->x_bf16_in_file && (c->x || c->x_storage != X_STORED_BF16))
        return kr_fail(err, "%s: x: bf16 bits left in the file beside a decoded x or with "
                       "storage %d; expected one x, stored as bf16", what, (int)c->x_storage);
    if (c->x && c->x_storage != X_STORED_BF16 && c->x_storage != X_STORED_F32)
        return kr_fail(err, "%s: x: storage %d is unknown; expected bf16 or float32", what,
                       (int)c->x_storage);
    if (c->x_fp8 && !c->x_scale)
        return kr_fail(err, "%s: x_scale: missing while x_fp8 is present; expected x_scale [%lld] "
                            "float32 with x_fp8", what, (long long)c->M);
    if (c->x_scale && !c->x_fp8)
        return kr_fail(err, "%s: x_fp8: missing while x_scale is present; expected x_fp8 [%lld, "
                            "%lld] uint8 with x_scale", what, (long long)c->M, (long long)c->K);
    if (c->x_fp8 && c->x_fp8_format != FP8_E4M3FN && c->x_fp8_format != FP8_E4M3FNUZ)
        return kr_fail(err, "%s: x_fp8: format %d is unknown; expected e4m3fn or e4m3fnuz", what,
                       (int)c->x_fp8_format);
    if (!c->x && !c->x_bf16_in_file && !c->x_fp8)
        return kr_fail(err, "%s: x: neither x nor x_fp8 is present; expected x [%lld, %lld] "
                            "(bf16 or float32) and/or x_fp8 [%lld, %lld] uint8 + x_scale [%lld]",
                       what, (long long)c->M, (long long)c->K, (long long)c->M,
                       (long long)c->K, (long long)c->M);
    return 0;
}

int case_validate(const case_t *c, const char *what, kr_error_t *err)
{
    if (!what)
        what = (c && c->path) ? c->path : "(case)";
    if (!c)
        return kr_fail(err, "%s: case: NULL; expected a case", what);
    if (case_check_dims(c->M, c->N, c->K, what, err) != 0)
        return -1;

    /* A case has an MXFP4 weight (weight + weight_scale), a bf16 weight
     * (weight_bf16), or both. */
    if (!c->weight && !c->weight_bf16)
        return kr_fail(err, "%s: weight: missing and no weight_bf16; expected an MXFP4 weight "
                            "[%lld, %lld] (N, K/2) uint8 with weight_scale, and/or weight_bf16 "
                            "[%lld, %lld] (N, K) bf16 bits", what, (long long)c->N,
                       (long long)(c->K / 2), (long long)c->N, (long long)c->K);
    if (!c->weight && c->weight_scale)
        return kr_fail(err, "%s: weight: missing while weight_scale is present; expected weight "
                            "[%lld, %lld] (N, K/2) uint8 with weight_scale", what,
                       (long long)c->N, (long long)(c->K / 2));
    if (c->weight)
        return validate_mxfp4_weight(c, what, err) ? -1 : validate_rest(c, what, err);
    return validate_rest(c, what, err);
}

int case_owns(const case_t *c, const void *p)
{
    return p && !case_mapping_holds(&c->mapping, p, 1);
}

void case_free(case_t *c)
{
    if (!c)
        return;
    void *owned[] = {
        c->path,
        c->x,
        c->x_fp8,
        c->x_scale,
        c->weight,
        c->weight_scale,
        c->weight_ref,
        c->out,
        c->out_rerun,
        c->aiter,
        c->kernel_path,
        c->layer,
        c->model,
        c->capture_time,
        c->env_flags,
        c->route,
        c->tp_rank,
        c->versions,
        c->gpu_arch,
        c->extension_path,
        c->capture_time_source,
        c->weight_bf16,
        c->ref_recorded,
    };
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        if (case_owns(c, owned[i]))
            free(owned[i]);
    case_mapping_unmap(&c->mapping);
    memset(c, 0, sizeof *c);
}
