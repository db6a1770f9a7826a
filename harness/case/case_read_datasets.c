/* case_read_datasets: each dataset of a case, for case_read
 * (case_read_internal.h): the weights, x in its three forms and the
 * outputs, each checked against M, N, K, its dtype and its attributes
 * (layout, order, format, dtype) as it is read, in an order where a
 * dataset's rules may depend on those before it, and the datasets that only
 * come together (weight and weight_scale, x_fp8 and x_scale) checked
 * together.  Built on case_read_array.c's dataset reads. */
#include "case_read_internal.h"

#include "case_io.h"
#include "kr_alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the datasets of a case ----
 *
 * Each dataset has one reader that gets it open (read_dataset opens and
 * closes it) and one optional `absent` rule for when the file lacks it. */

typedef struct {
    const char *name;
    int (*read)(rd_t *rd, case_t *c, hid_t ds);
    int (*absent)(rd_t *rd, case_t *c); /* NULL: the dataset is optional */
} ds_reader_t;

static int read_dataset(rd_t *rd, case_t *c, const ds_reader_t *r)
{
    hid_t ds = H5I_INVALID_HID;
    int o = case_rd_open_ds(rd, r->name, &ds);
    if (o < 0)
        return -1;
    if (o == 0)
        return r->absent ? r->absent(rd, c) : 0;
    int rc = r->read(rd, c, ds);
    H5Dclose(ds);
    return rc;
}


/* A [M, N] bf16 output (out, out_rerun, aiter). */
static int read_bf16_output(rd_t *rd, const case_t *c, hid_t ds, const char *name,
                            uint16_t **out)
{
    void *buf = NULL;
    int rc = case_rd_read_plain(rd, name, ds, EL_U16, c->M, c->N, "(M, N) bf16 bits as", &buf);
    *out = buf;
    return rc;
}

static int read_out(rd_t *rd, case_t *c, hid_t ds)
{
    return read_bf16_output(rd, c, ds, "out", &c->out);
}

static int read_out_rerun(rd_t *rd, case_t *c, hid_t ds)
{
    return read_bf16_output(rd, c, ds, "out_rerun", &c->out_rerun);
}

static int read_aiter(rd_t *rd, case_t *c, hid_t ds)
{
    return read_bf16_output(rd, c, ds, "aiter", &c->aiter);
}

/* The fp32 reference the serve recorded, [M, N]. */
static int read_ref_recorded(rd_t *rd, case_t *c, hid_t ds)
{
    void *buf = NULL;
    int rc = case_rd_read_plain(rd, "ref_recorded", ds, EL_F32, c->M, c->N, "(M, N)", &buf);
    c->ref_recorded = buf;
    return rc;
}

/* The bf16 weight of an unquantized layer. */
static int read_weight_bf16(rd_t *rd, case_t *c, hid_t ds)
{
    void *buf = NULL;
    int rc = case_rd_read_plain(rd, "weight_bf16", ds, EL_U16, c->N, c->K, "(N, K) bf16 bits as",
                                &buf);
    c->weight_bf16 = buf;
    return rc;
}

/* An optional string attribute naming one value of an enum.  `parse` sets
 * *val from a name (0 if known) or, given NULL (attribute absent), to the
 * default; `known` lists the names for the message. */
typedef struct {
    const char *attr;
    int (*parse)(const char *name, void *val);
    const char *known;
} enum_attr_t;

static int parse_weight_order(const char *name, void *val)
{
    weight_order_t *o = val;
    *o = WEIGHT_ORDER_CHECKPOINT;
    return name ? case_weight_order_from_attr(name, o) : 0;
}

static int parse_fp8_format(const char *name, void *val)
{
    fp8_format_t *f = val;
    *f = FP8_E4M3FN;
    return name ? case_fp8_format_from_attr(name, f) : 0;
}

static const enum_attr_t WEIGHT_ORDER_ATTR = {"order", parse_weight_order,
                                              "\"checkpoint\" or \"fragment\""};
static const enum_attr_t FP8_FORMAT_ATTR = {"format", parse_fp8_format,
                                            "\"e4m3fn\" or \"e4m3fnuz\""};

/* A [d0, d1] uint8 array of codes whose meaning an enum attribute names:
 * the shape is checked, then the attribute, into *val. */
static int check_coded_u8(rd_t *rd, hid_t ds, const char *name, int64_t d0, int64_t d1,
                          const char *expect, const enum_attr_t *a, void *val)
{
    const int64_t want[2] = {d0, d1};
    if (case_rd_check_ds(rd, name, ds, EL_U8, 2, want, expect) != 0)
        return -1;
    char *s = NULL;
    int r = case_rd_read_str_attr(rd, ds, name, a->attr, &s);
    if (r >= 0 && a->parse(s, val) != 0)
        r = fail(rd, name, "attribute %s = \"%.64s\" is unknown; expected %s", a->attr, s,
                 a->known);
    free(s);
    return r < 0 ? -1 : 0;
}

/* The MXFP4 weight.  Required unless the case has weight_bf16 (read first). */
static int weight_absent(rd_t *rd, case_t *c)
{
    if (c->weight_bf16)
        return 0;
    return fail(rd, "weight", "dataset missing and no weight_bf16; expected an MXFP4 weight "
                              "[%lld, %lld] (N, K/2) uint8 packed e2m1 with weight_scale, "
                              "and/or weight_bf16 [%lld, %lld] (N, K) uint16 with dtype = "
                              "\"bfloat16\"", (long long)c->N, (long long)(c->K / 2),
                (long long)c->N, (long long)c->K);
}

static int read_weight(rd_t *rd, case_t *c, hid_t ds)
{
    if (check_coded_u8(rd, ds, "weight", c->N, c->K / 2, "(N, K/2)", &WEIGHT_ORDER_ATTR,
                       &c->weight_order) != 0)
        return -1;
    if (c->weight_order == WEIGHT_ORDER_FRAGMENT && (c->N % 16 != 0 || c->K % 16 != 0))
        return fail(rd, "weight", "order \"fragment\" with N=%lld, K=%lld; expected N %% 16 == 0 "
                                  "and K %% 16 == 0 for fragment order", (long long)c->N,
                    (long long)c->K);
    void *buf = NULL;
    int rc = case_rd_read_ds(rd, "weight", ds, EL_U8, c->N * (c->K / 2), &buf);
    c->weight = buf;
    return rc;
}

/* The MXFP4 weight's block scales: with `weight` (read first), never without it. */
static int weight_scale_absent(rd_t *rd, case_t *c)
{
    if (!c->weight)
        return 0;
    return fail(rd, "weight_scale", "dataset missing; expected e8m0 uint8 [%lld, %lld] "
                                    "(N, K/32) or [%lld, %lld] (K/32, N) with attribute layout",
                (long long)c->N, (long long)(c->K / 32), (long long)(c->K / 32),
                (long long)c->N);
}

static int read_weight_scale(rd_t *rd, case_t *c, hid_t ds)
{
    if (!c->weight)
        return fail(rd, "weight", "dataset missing while weight_scale is present; expected weight "
                                  "[%lld, %lld] (N, K/2) uint8 with weight_scale",
                    (long long)c->N, (long long)(c->K / 2));
    char *layout = NULL;
    int rc = -1;
    /* The layout attribute comes first: without it the shape cannot be
     * judged, and for a square [N, K/32] the shape cannot tell the two apart. */
    int r = case_rd_read_str_attr(rd, ds, "weight_scale", "layout", &layout);
    if (r < 0)
        goto done;
    if (r == 0) {
        fail(rd, "weight_scale", "attribute layout missing; expected layout = \"N,K/32\" or "
                                 "\"K/32,N\"");
        goto done;
    }
    if (scale_layout_from_name(layout, &c->scale_layout) != 0) {
        fail(rd, "weight_scale", "attribute layout = \"%.64s\" is unknown; expected \"N,K/32\" or "
                                 "\"K/32,N\"", layout);
        goto done;
    }
    int64_t want[2] = {c->N, c->K / 32};
    const char *expect = "(N, K/32)";
    if (c->scale_layout == SCALE_LAYOUT_KN) {
        want[0] = c->K / 32;
        want[1] = c->N;
        expect = "(K/32, N)";
    }
    void *buf = NULL;
    if (case_rd_check_ds(rd, "weight_scale", ds, EL_U8, 2, want, expect) == 0 &&
        case_rd_read_ds(rd, "weight_scale", ds, EL_U8, c->N * (c->K / 32), &buf) == 0) {
        c->weight_scale = buf;
        rc = 0;
    }
done:
    free(layout);
    return rc;
}

static int read_weight_ref(rd_t *rd, case_t *c, hid_t ds)
{
    hsize_t dims[MAX_RANK];
    int rank = case_rd_ds_shape(ds, dims);
    /* The length IS the route (N folded, 2 per-block, 1 aiter), so check it
     * against the three before the generic check reports a mismatch. */
    int64_t len = rank == 1 ? (int64_t)dims[0] : -1;
    if (rank == 1 && len != c->N && len != 2 && len != 1)
        return fail(rd, "weight_ref", "length %lld is not a known route; expected [%lld] (N, "
                                      "folded), [2] (per-block) or [1] (aiter) uint8",
                    (long long)len, (long long)c->N);
    const int64_t want[1] = {rank == 1 ? len : c->N};
    void *buf = NULL;
    if (case_rd_check_ds(rd, "weight_ref", ds, EL_U8, 1, want, "(N | 2 | 1)") != 0 ||
        case_rd_read_ds(rd, "weight_ref", ds, EL_U8, len, &buf) != 0)
        return -1;
    c->weight_ref = buf;
    c->weight_ref_len = len;
    return 0;
}

/* RNE is not needed here: bf16 -> fp32 is exact (the bits shifted up). */
static void bf16_to_f32(const uint16_t *in, int64_t n, float *out)
{
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)in[i] << 16;
        memcpy(&out[i], &u, sizeof u);
    }
}

static int read_x_bf16(rd_t *rd, case_t *c, hid_t ds)
{
    const int64_t n = c->M * c->K;
    void *raw = NULL;
    if (case_rd_read_plain(rd, "x", ds, EL_U16, c->M, c->K, "(M, K) bf16 bits as", &raw) != 0)
        return -1;
    if (rd->defer_bf16_x && case_mapping_holds(rd->map, raw, (size_t)n * 2)) {
        c->x_bf16_in_file = raw;
        c->x_storage = X_STORED_BF16;
        return 0;
    }
    float *f = kr_alloc_array((size_t)n * sizeof *f);
    if (!f) {
        if (!case_mapping_holds(rd->map, raw, 1))
            free(raw);
        return fail(rd, "x", "out of memory decoding %lld bf16 elements; expected to fit in "
                             "memory", (long long)n);
    }
    bf16_to_f32(raw, n, f);
    if (!case_mapping_holds(rd->map, raw, 1))
        free(raw);
    c->x = f;
    c->x_storage = X_STORED_BF16;
    return 0;
}

static int read_x_f32(rd_t *rd, case_t *c, hid_t ds)
{
    /* A float32 x may carry dtype = "float32"; anything else contradicts it. */
    char *dt = NULL;
    int r = case_rd_read_str_attr(rd, ds, "x", "dtype", &dt);
    if (r == 1 && strcmp(dt, "float32") != 0)
        r = fail(rd, "x", "attribute dtype = \"%.64s\" on float32 data; expected no dtype "
                          "attribute or dtype = \"float32\"", dt);
    free(dt);
    void *raw = NULL;
    if (r < 0 || case_rd_read_plain(rd, "x", ds, EL_F32, c->M, c->K, "(M, K)", &raw) != 0)
        return -1;
    c->x = raw;
    c->x_storage = X_STORED_F32;
    return 0;
}

static int read_x(rd_t *rd, case_t *c, hid_t ds)
{
    hid_t ftype = H5Dget_type(ds);
    int is_u16 = ftype >= 0 && case_rd_type_is(ftype, EL_U16);
    int is_f32 = ftype >= 0 && case_rd_type_is(ftype, EL_F32);
    char tdesc[64] = "an unreadable type";
    if (ftype >= 0) {
        case_rd_type_desc(ftype, tdesc, sizeof tdesc);
        H5Tclose(ftype);
    }
    if (is_u16)
        return read_x_bf16(rd, c, ds);
    if (is_f32)
        return read_x_f32(rd, c, ds);
    return fail(rd, "x", "wrong dtype; expected [%lld, %lld] (M, K) uint16 (bf16 bits, dtype = "
                         "\"bfloat16\") or float32, found %s", (long long)c->M, (long long)c->K,
                tdesc);
}

static int read_x_fp8(rd_t *rd, case_t *c, hid_t ds)
{
    if (check_coded_u8(rd, ds, "x_fp8", c->M, c->K, "(M, K) fp8 codes as", &FP8_FORMAT_ATTR,
                       &c->x_fp8_format) != 0)
        return -1;
    void *buf = NULL;
    int rc = case_rd_read_ds(rd, "x_fp8", ds, EL_U8, c->M * c->K, &buf);
    c->x_fp8 = buf;
    return rc;
}

static int read_x_scale(rd_t *rd, case_t *c, hid_t ds)
{
    hsize_t dims[MAX_RANK];
    int rank = case_rd_ds_shape(ds, dims);
    /* torch keeps per-token scales as [M, 1]; the production code views
     * them as [M].  Both are the same bytes. */
    int r2 = rank == 2 && dims[1] == 1;
    const int64_t want[2] = {c->M, 1};
    void *buf = NULL;
    if (case_rd_check_ds(rd, "x_scale", ds, EL_F32, r2 ? 2 : 1, want,
                         r2 ? "(M, 1)" : "(M, or [M, 1])") != 0 ||
        case_rd_read_ds(rd, "x_scale", ds, EL_F32, c->M, &buf) != 0)
        return -1;
    c->x_scale = buf;
    return 0;
}

/* In this order: what a reader checks may depend on what came before it. */
static const ds_reader_t INPUTS[] = {
    {"weight_bf16", read_weight_bf16, NULL},
    {"weight", read_weight, weight_absent},
    {"weight_scale", read_weight_scale, weight_scale_absent},
    {"weight_ref", read_weight_ref, NULL},
    {"x", read_x, NULL},
    {"x_fp8", read_x_fp8, NULL},
    {"x_scale", read_x_scale, NULL},
};

static const ds_reader_t OUTPUTS[] = {
    {"out", read_out, NULL},
    {"out_rerun", read_out_rerun, NULL},
    {"aiter", read_aiter, NULL},
    {"ref_recorded", read_ref_recorded, NULL},
};

static int read_datasets(rd_t *rd, case_t *c, const ds_reader_t *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (read_dataset(rd, c, &r[i]) != 0)
            return -1;
    return 0;
}

int case_rd_read_datasets(rd_t *rd, case_t *c)
{
    if (read_datasets(rd, c, INPUTS, sizeof INPUTS / sizeof INPUTS[0]) != 0)
        return -1;
    if (c->x_fp8 && !c->x_scale)
        return fail(rd, "x_scale", "dataset missing while x_fp8 is present; expected x_scale "
                                   "[%lld] float32 with x_fp8", (long long)c->M);
    if (c->x_scale && !c->x_fp8)
        return fail(rd, "x_fp8", "dataset missing while x_scale is present; expected x_fp8 "
                                 "[%lld, %lld] uint8 with x_scale", (long long)c->M,
                    (long long)c->K);
    if (!c->x && !c->x_bf16_in_file && !c->x_fp8)
        return fail(rd, "x", "neither x nor x_fp8 is present; expected x [%lld, %lld] (bf16 or "
                             "float32) and/or x_fp8 [%lld, %lld] uint8 + x_scale [%lld] float32",
                    (long long)c->M, (long long)c->K, (long long)c->M, (long long)c->K,
                    (long long)c->M);

    return read_datasets(rd, c, OUTPUTS, sizeof OUTPUTS / sizeof OUTPUTS[0]);
}
