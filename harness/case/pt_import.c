/* pt_import: the MXFP4 dispatch's torch.save bad-case dump -> case_t
 * (pt_import.h).  Every key is checked against M, N, K and the dtypes the
 * dump uses before anything is read; every failure is one line
 * "<path>: <key>: <problem>; expected <what>", as case_read's are. */
#include "pt_import.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "case_io.h"
#include "torch_pt.h"

typedef struct {
    const char *path;
    pt_file_t *f;
    const pt_value_t *root;
    kr_error_t *err;
} im_t;

#define ifail(im, key, ...) kr_fail_at((im)->err, (im)->path, key, __VA_ARGS__)

#define DT(d) (1u << (d))

/* 1 and *t if `key` holds a tensor, 0 if absent, -1 (message) if it holds something else. */
static int get_tensor(im_t *im, const char *key, const pt_tensor_t **t)
{
    const pt_value_t *v = pt_dict_get(im->root, key);
    *t = NULL;
    if (!v)
        return 0;
    if (v->kind != PT_TENSOR)
        return ifail(im, key, "holds a %s; expected a tensor", pt_kind_name(v->kind));
    *t = v->tensor;
    return 1;
}

static int shape_is(const pt_tensor_t *t, int rank, const int64_t *dims)
{
    if (t->rank != rank)
        return 0;
    for (int i = 0; i < rank; i++)
        if (t->sizes[i] != dims[i])
            return 0;
    return 1;
}

/* dtype in mask and shape == dims; `expect` describes both ("(M, K) float8_e4m3fn or uint8"). */
static int check(im_t *im, const char *key, const pt_tensor_t *t, unsigned mask, int rank,
                 const int64_t *dims, const char *expect)
{
    int dt_ok = (mask & DT(t->dtype)) != 0, sh_ok = shape_is(t, rank, dims);
    if (dt_ok && sh_ok)
        return 0;
    char want[128], found[128];
    pt_shape_str(dims, rank, want, sizeof want);
    pt_shape_str(t->sizes, t->rank, found, sizeof found);
    return ifail(im, key, "wrong %s; expected %s %s, found %s %s",
                 !dt_ok && !sh_ok ? "shape and dtype" : !dt_ok ? "dtype" : "shape", want, expect,
                 found, pt_dtype_name(t->dtype));
}

static int read_t(im_t *im, const char *key, const pt_tensor_t *t, void **out)
{
    return pt_tensor_read(im->f, t, key, out, im->err);
}

static int get_int(im_t *im, const char *key, int64_t *out)
{
    const pt_value_t *v = pt_dict_get(im->root, key);
    if (!v)
        return ifail(im, key, "missing; expected the int %s the dump records", key);
    if (v->kind != PT_INT)
        return ifail(im, key, "holds a %s; expected an int", pt_kind_name(v->kind));
    *out = v->i;
    return 0;
}

/* 1 and *s if `key` holds a str, 0 if absent, -1 (message) if it holds something else. */
static int get_str(im_t *im, const char *key, const char **s)
{
    const pt_value_t *v = pt_dict_get(im->root, key);
    *s = NULL;
    if (!v || v->kind == PT_NONE)
        return 0;
    if (v->kind != PT_STR)
        return ifail(im, key, "holds a %s; expected a str", pt_kind_name(v->kind));
    *s = v->s;
    return 1;
}

static int import_x(im_t *im, case_t *c)
{
    const pt_tensor_t *t;
    int r = get_tensor(im, "x", &t);
    if (r <= 0)
        return r;
    const int64_t d[2] = {c->M, c->K};
    void *raw = NULL;
    if (check(im, "x", t, DT(PT_DT_BFLOAT16) | DT(PT_DT_FLOAT32), 2, d,
              "(M, K) bfloat16 or float32") || read_t(im, "x", t, &raw))
        return -1;
    if (t->dtype == PT_DT_FLOAT32) {
        c->x = raw;
        c->x_storage = X_STORED_F32;
        return 0;
    }
    const int64_t n = c->M * c->K;
    float *x = malloc((size_t)n * sizeof *x);
    if (!x) {
        free(raw);
        return ifail(im, "x", "out of memory decoding %lld bf16 elements; expected to fit in "
                              "memory", (long long)n);
    }
    const uint16_t *b = raw;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)b[i] << 16;      /* bf16 -> fp32 is exact */
        memcpy(&x[i], &u, sizeof u);
    }
    free(raw);
    c->x = x;
    c->x_storage = X_STORED_BF16;
    return 0;
}

static int import_x_fp8(im_t *im, case_t *c)
{
    const pt_tensor_t *t, *s;
    int r = get_tensor(im, "x_fp8", &t);
    if (r < 0)
        return -1;
    if (r > 0) {
        const int64_t d[2] = {c->M, c->K};
        void *raw = NULL;
        const char *fmt = NULL;
        if (check(im, "x_fp8", t,
                  DT(PT_DT_FLOAT8_E4M3FN) | DT(PT_DT_FLOAT8_E4M3FNUZ) | DT(PT_DT_UINT8), 2, d,
                  "(M, K) float8_e4m3fn, float8_e4m3fnuz (or their uint8 codes)") ||
            get_str(im, "x_fp8_format", &fmt) < 0)
            return -1;
        /* the tensor's own fp8 dtype wins; uint8 codes say theirs in x_fp8_format */
        int fnuz = t->dtype == PT_DT_FLOAT8_E4M3FNUZ;
        if (t->dtype == PT_DT_UINT8 && fmt) {
            if (strcmp(fmt, "e4m3fn") && strcmp(fmt, "e4m3fnuz"))
                return ifail(im, "x_fp8_format", "\"%s\"; expected \"e4m3fn\" or \"e4m3fnuz\"",
                             fmt);
            fnuz = !strcmp(fmt, "e4m3fnuz");
        }
        if (read_t(im, "x_fp8", t, &raw))
            return -1;
        c->x_fp8 = raw;
        c->x_fp8_format = fnuz ? FP8_E4M3FNUZ : FP8_E4M3FN;
    }
    r = get_tensor(im, "x_scale", &s);
    if (r <= 0)
        return r;
    /* per-token scales: [M, 1] from the quantizer, [M] once viewed */
    const int64_t d1[1] = {c->M}, d2[2] = {c->M, 1};
    int two = s->rank == 2;
    void *raw = NULL;
    if (check(im, "x_scale", s, DT(PT_DT_FLOAT32), two ? 2 : 1, two ? d2 : d1,
              two ? "(M, 1) float32" : "(M, or [M, 1]) float32") ||
        read_t(im, "x_scale", s, &raw))
        return -1;
    c->x_scale = raw;
    return 0;
}

static int import_weight(im_t *im, case_t *c, const pt_import_options_t *o)
{
    const pt_tensor_t *w, *s;
    int rw = get_tensor(im, "weight", &w);
    if (rw < 0)
        return -1;
    if (rw == 0 && pt_dict_get(im->root, "weight_bf16"))
        return 0;       /* an unquantized layer (the bf16 skinny route) */
    if (rw == 0)
        return ifail(im, "weight", "missing; expected the MXFP4 weight [%lld, %lld] (N, K/2) "
                                   "uint8 the dump records (or weight_bf16 [N, K])",
                     (long long)c->N, (long long)(c->K / 2));
    const int64_t dw[2] = {c->N, c->K / 2};
    if (check(im, "weight", w, DT(PT_DT_UINT8) | DT(PT_DT_FLOAT4_E2M1FN_X2), 2, dw,
              "(N, K/2) uint8 (or float4_e2m1fn_x2) packed e2m1"))
        return -1;
    int rs = get_tensor(im, "weight_scale", &s);
    if (rs < 0)
        return -1;
    if (rs == 0)
        return ifail(im, "weight_scale", "missing; expected e8m0 uint8 [%lld, %lld] (K/32, N) or "
                                         "[%lld, %lld] (N, K/32)", (long long)(c->K / 32),
                     (long long)c->N, (long long)c->N, (long long)(c->K / 32));
    const int64_t nk[2] = {c->N, c->K / 32}, kn[2] = {c->K / 32, c->N};
    int is_nk = shape_is(s, 2, nk), is_kn = shape_is(s, 2, kn);
    char found[128];
    pt_shape_str(s->sizes, s->rank, found, sizeof found);
    int s_u8 = s->dtype == PT_DT_UINT8 || s->dtype == PT_DT_FLOAT8_E8M0FNU;
    /* the hook records the layout and the order it knew; the options still win */
    const char *layout = NULL, *order = NULL;
    if (get_str(im, "scale_layout", &layout) < 0 || get_str(im, "weight_order", &order) < 0)
        return -1;
    pt_import_options_t rec = o ? *o : (pt_import_options_t){0};
    if (layout && !rec.scale_layout_set) {
        if (strcmp(layout, "K/32,N") && strcmp(layout, "N,K/32"))
            return ifail(im, "scale_layout", "\"%s\"; expected \"K/32,N\" or \"N,K/32\"", layout);
        rec.scale_layout_set = 1;
        rec.scale_layout = strcmp(layout, "K/32,N") ? SCALE_LAYOUT_NK : SCALE_LAYOUT_KN;
    }
    if (order && !rec.weight_order_set) {
        if (strcmp(order, "checkpoint") && strcmp(order, "fragment"))
            return ifail(im, "weight_order", "\"%s\"; expected \"checkpoint\" or \"fragment\"",
                         order);
        rec.weight_order_set = 1;
        rec.weight_order = strcmp(order, "fragment") ? WEIGHT_ORDER_CHECKPOINT
                                                     : WEIGHT_ORDER_FRAGMENT;
    }
    o = &rec;
    if (!s_u8 || (!is_nk && !is_kn))
        return ifail(im, "weight_scale", "wrong %s; expected uint8 [%lld, %lld] (K/32, N) or "
                                         "[%lld, %lld] (N, K/32), found %s %s",
                     !s_u8 && !is_nk && !is_kn ? "shape and dtype"
                     : !s_u8                   ? "dtype"
                                                                 : "shape",
                     (long long)(c->K / 32), (long long)c->N, (long long)c->N,
                     (long long)(c->K / 32), found, pt_dtype_name(s->dtype));
    if (is_nk && is_kn) {
        if (!o || !o->scale_layout_set)
            return ifail(im, "weight_scale", "shape %s is both (N, K/32) and (K/32, N) (N == K/32 "
                                             "== %lld), so the dump does not say its layout; "
                                             "expected --scale-layout nk or kn to say which "
                                             "(the dispatch holds [K/32, N]: kn)",
                         found, (long long)c->N);
        c->scale_layout = o->scale_layout;
    } else {
        c->scale_layout = is_kn ? SCALE_LAYOUT_KN : SCALE_LAYOUT_NK;
        if (o && o->scale_layout_set && o->scale_layout != c->scale_layout)
            return ifail(im, "weight_scale", "shape %s is %s but --scale-layout says %s; expected "
                                             "the option to agree with the shape (or no option)",
                         found, is_kn ? "(K/32, N)" : "(N, K/32)",
                         scale_layout_name(o->scale_layout));
    }
    c->weight_order = o && o->weight_order_set ? o->weight_order : WEIGHT_ORDER_CHECKPOINT;
    void *wb = NULL, *sb = NULL;
    if (read_t(im, "weight", w, &wb))
        return -1;
    c->weight = wb;
    if (read_t(im, "weight_scale", s, &sb))
        return -1;
    c->weight_scale = sb;

    const pt_tensor_t *r;
    int rr = get_tensor(im, "weight_ref", &r);
    if (rr <= 0)
        return rr;
    int64_t len = r->rank == 1 ? r->sizes[0] : -1;
    if (r->dtype != PT_DT_UINT8 || r->rank != 1 || (len != c->N && len != 2 && len != 1)) {
        pt_shape_str(r->sizes, r->rank, found, sizeof found);
        return ifail(im, "weight_ref", "found %s %s, which is not a known route; expected uint8 "
                                       "[%lld] (N, folded), [2] (per-block) or [1] (aiter)",
                     found, pt_dtype_name(r->dtype), (long long)c->N);
    }
    void *rb = NULL;
    if (read_t(im, "weight_ref", r, &rb))
        return -1;
    c->weight_ref = rb;
    c->weight_ref_len = len;
    return 0;
}

static int import_outputs(im_t *im, case_t *c)
{
    const int64_t d[2] = {c->M, c->N};
    struct { const char *key; uint16_t **dst; } outs[] = {
        {"out", &c->out}, {"out_rerun", &c->out_rerun},
    };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++) {
        const pt_tensor_t *t;
        int r = get_tensor(im, outs[i].key, &t);
        if (r < 0)
            return -1;
        void *raw = NULL;
        if (r > 0 && (check(im, outs[i].key, t, DT(PT_DT_BFLOAT16), 2, d, "(M, N) bfloat16") ||
                      read_t(im, outs[i].key, t, &raw)))
            return -1;
        *outs[i].dst = raw;
    }
    const pt_tensor_t *t;
    int r = get_tensor(im, "aiter", &t);
    if (r < 0)
        return -1;
    void *raw = NULL;
    if (r > 0 && t->dtype == PT_DT_BFLOAT16) {
        /* the capture hook's "aiter": aiter's own bf16 output */
        if (check(im, "aiter", t, DT(PT_DT_BFLOAT16), 2, d, "(M, N) bfloat16") ||
            read_t(im, "aiter", t, &raw))
            return -1;
        c->aiter = raw;
    } else if (r > 0) {
        if (check(im, "aiter", t, DT(PT_DT_FLOAT32), 2, d,
                  "(M, N) float32 (the dump's \"aiter\" is _exact_ref's fp32 result) or bfloat16 "
                  "(aiter's output, as the capture hook records it)") ||
            read_t(im, "aiter", t, &raw))
            return -1;
        c->ref_recorded = raw;
    }
    r = get_tensor(im, "ref_recorded", &t);
    if (r < 0)
        return -1;
    if (r > 0) {
        if (c->ref_recorded)
            return ifail(im, "ref_recorded", "given beside a float32 \"aiter\"; expected one "
                                             "fp32 reference");
        if (check(im, "ref_recorded", t, DT(PT_DT_FLOAT32), 2, d, "(M, N) float32") ||
            read_t(im, "ref_recorded", t, &raw))
            return -1;
        c->ref_recorded = raw;
    }
    r = get_tensor(im, "weight_bf16", &t);
    if (r <= 0)
        return r;
    const int64_t dw[2] = {c->N, c->K};
    if (check(im, "weight_bf16", t, DT(PT_DT_BFLOAT16), 2, dw, "(N, K) bfloat16") ||
        read_t(im, "weight_bf16", t, &raw))
        return -1;
    c->weight_bf16 = raw;
    return 0;
}

static int dup_field(im_t *im, const char *key, const char *val, char **dst)
{
    if (!val)
        return 0;
    *dst = strdup(val);
    return *dst ? 0 : ifail(im, key, "out of memory; expected to fit in memory");
}

/* The hook's provenance strings when the dump has them; otherwise the
 * dispatch dump's kernel path and the file's mtime, said to be one. */
static int provenance(im_t *im, case_t *c)
{
    static const struct { const char *key; size_t off; } STRS[] = {
        {"kernel_path", offsetof(case_t, kernel_path)}, {"layer", offsetof(case_t, layer)},
        {"model", offsetof(case_t, model)}, {"capture_time", offsetof(case_t, capture_time)},
        {"env_flags", offsetof(case_t, env_flags)}, {"route", offsetof(case_t, route)},
        {"versions", offsetof(case_t, versions)}, {"gpu_arch", offsetof(case_t, gpu_arch)},
        {"extension_path", offsetof(case_t, extension_path)},
    };
    for (size_t i = 0; i < sizeof STRS / sizeof STRS[0]; i++) {
        const char *s;
        if (get_str(im, STRS[i].key, &s) < 0 ||
            dup_field(im, STRS[i].key, s, (char **)((char *)c + STRS[i].off)))
            return -1;
    }
    const pt_value_t *rank = pt_dict_get(im->root, "tp_rank");
    if (rank && rank->kind != PT_NONE) {
        char buf[32];
        if (rank->kind != PT_INT)
            return ifail(im, "tp_rank", "holds a %s; expected an int", pt_kind_name(rank->kind));
        snprintf(buf, sizeof buf, "%lld", (long long)rank->i);
        if (dup_field(im, "tp_rank", buf, &c->tp_rank))
            return -1;
    }
    if (c->route && strcmp(c->route, "w4a8") && strcmp(c->route, "w4a4") &&
        strcmp(c->route, "bf16_skinny") && strcmp(c->route, "partitioned"))
        return ifail(im, "route", "\"%s\"; expected \"w4a8\", \"w4a4\", \"bf16_skinny\" or "
                                  "\"partitioned\"", c->route);
    c->path = strdup(im->path);
    if (!c->path || (!c->kernel_path && dup_field(im, "file", PT_IMPORT_KERNEL_PATH, &c->kernel_path)))
        return ifail(im, "file", "out of memory; expected to fit in memory");
    if (c->capture_time)
        return dup_field(im, "file", "recorded", &c->capture_time_source);
    struct stat st;
    char when[32] = "";
    if (stat(im->path, &st) == 0) {
        struct tm tm;
        time_t t = st.st_mtime;
        if (gmtime_r(&t, &tm))
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    if (when[0] && (dup_field(im, "file", when, &c->capture_time) ||
                    dup_field(im, "file", "file mtime", &c->capture_time_source)))
        return -1;
    return 0;
}

int pt_import_case(const char *path, case_t *c, const pt_import_options_t *o, kr_error_t *err)
{
    if (!c)
        return kr_fail(err, "%s: case: NULL output; expected a case_t to fill",
                       path ? path : "(null)");
    memset(c, 0, sizeof *c);
    im_t im = {.path = path ? path : "(null)", .err = err};
    case_t tmp;
    memset(&tmp, 0, sizeof tmp);
    int rc = -1;
    if (pt_open(path, &im.f, err))
        return -1;
    im.root = pt_root(im.f);
    if (!im.root || im.root->kind != PT_DICT) {
        ifail(&im, "data.pkl", "the saved object is a %s; expected the dict of the bad-case dump "
                               "(x_fp8, x_scale, weight, weight_scale, weight_ref, out, out_rerun, "
                               "aiter, x, M, N, K)", im.root ? pt_kind_name(im.root->kind) : "?");
        goto done;
    }
    if (get_int(&im, "M", &tmp.M) || get_int(&im, "N", &tmp.N) || get_int(&im, "K", &tmp.K) ||
        case_check_dims(tmp.M, tmp.N, tmp.K, im.path, err))
        goto done;
    if (import_weight(&im, &tmp, o) || import_x_fp8(&im, &tmp) || import_x(&im, &tmp) ||
        import_outputs(&im, &tmp) || provenance(&im, &tmp))
        goto done;
    if (case_validate(&tmp, im.path, err))
        goto done;
    *c = tmp;
    memset(&tmp, 0, sizeof tmp);
    rc = 0;
done:
    case_free(&tmp);
    pt_close(im.f);
    return rc;
}
