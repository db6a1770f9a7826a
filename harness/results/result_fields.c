#include "result_fields.h"

#include <inttypes.h>
#include <math.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Compile-time check that a table line's type is the member's C type: a
 * mismatch makes a char array of size -1, a compile error.  (An array
 * member decays to a pointer inside _Generic, hence char * and int64_t *.) */
#define RF_CHECK(member, T) \
    (0 * sizeof(char[_Generic(((result_t *)0)->member, T: 1, default: -1)]))

#define RF_LINE(member, T, type, cnt, label, opt, meas) \
    {#member, type, offsetof(result_t, member) + RF_CHECK(member, T), \
     sizeof(((result_t *)0)->member), cnt, label, opt, meas}

#define F_STR(m) RF_LINE(m, char *, RF_STR, 1, NULL, 0, 0)
#define F_I64(m) RF_LINE(m, int64_t, RF_I64, 1, NULL, 0, 0)
#define F_INT(m) RF_LINE(m, int, RF_INT, 1, NULL, 0, 0)
#define F_F64(m) RF_LINE(m, double, RF_F64, 1, NULL, 0, 0)
#define F_VERDICT(m) RF_LINE(m, verdict_t, RF_VERDICT, 1, NULL, 0, 0)
/* Measured: missing in a row that compared nothing. */
#define M_I64(m) RF_LINE(m, int64_t, RF_I64, 1, NULL, 0, 1)
#define M_U64(m) RF_LINE(m, uint64_t, RF_U64, 1, NULL, 0, 1)
#define M_F64(m) RF_LINE(m, double, RF_F64, 1, NULL, 0, 1)
#define M_I64_ARRAY(m, label) \
    RF_LINE(m, int64_t *, RF_I64_ARRAY, \
            (int)(sizeof(((result_t *)0)->m) / sizeof(int64_t)), label, 0, 1)

/* In result_t's order.  A member added to result_t gets one line here; mark
 * it optional (copy the macro with opt = 1) so results files written before
 * it existed stay readable. */
const result_field_t result_fields[] = {
    F_STR(case_path),
    F_STR(case_name),
    RF_LINE(case_id, char *, RF_STR, 1, NULL, 1, 0),
    F_I64(M),
    F_I64(N),
    F_I64(K),
    F_STR(band),
    F_STR(kernel),
    F_STR(reference),
    F_STR(act_origin),
    M_I64(metrics.count),
    M_I64(metrics.finite_count),
    M_F64(metrics.rel_fro),
    M_F64(metrics.nmse),
    M_F64(metrics.max_abs),
    M_I64(metrics.max_abs_index),
    M_F64(metrics.worst_row_rel),
    M_I64(metrics.worst_row),
    M_F64(metrics.cosine),
    M_F64(metrics.mag_ratio),
    M_I64(metrics.out_nf.nan),
    M_I64(metrics.out_nf.pos_inf),
    M_I64(metrics.out_nf.neg_inf),
    M_I64(metrics.ref_nf.nan),
    M_I64(metrics.ref_nf.pos_inf),
    M_I64(metrics.ref_nf.neg_inf),
    M_I64(ulp.count),
    M_I64(ulp.identical),
    M_F64(ulp.identical_frac),
    M_U64(ulp.max_ulp),
    M_I64_ARRAY(ulp.bins, ulp_bin_label),
    F_I64(input_nf.nan),
    F_I64(input_nf.pos_inf),
    F_I64(input_nf.neg_inf),
    M_F64(threshold),
    F_VERDICT(verdict),
    F_STR(note),
    F_F64(seconds),
    M_F64(ref_f32_vs_f64),
    F_STR(diagnosis),
    RF_LINE(diagnosis_family, char *, RF_STR, 1, NULL, 1, 0),
    RF_LINE(diagnosis_checked, int64_t, RF_I64, 1, NULL, 1, 0),
    F_STR(device),
    F_INT(reruns),
    F_I64(rerun_diff),
    F_INT(canary_ok),
    F_F64(time_ms),
    F_F64(tflops),
    F_F64(gbps),
    RF_LINE(out_digest, char *, RF_STR, 1, NULL, 1, 0),
    /* The judgement's inputs beyond the norms (optional: older files lack them). */
    RF_LINE(metrics.abs_fro, double, RF_F64, 1, NULL, 1, 1),
    RF_LINE(metrics.rows_apart, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(ulp.toward_zero, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(ulp.away_zero, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(ulp.signed_ulp_sum, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(metrics.out_nf_apart.nan, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(metrics.out_nf_apart.pos_inf, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(metrics.out_nf_apart.neg_inf, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(metrics.ref_nf_apart.nan, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(metrics.ref_nf_apart.pos_inf, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(metrics.ref_nf_apart.neg_inf, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(ulp.round_decided, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(ulp.round_match, int64_t *, RF_I64_ARRAY, ROUND_MODE_COUNT, round_mode_label, 1, 1),
    /* The accumulation-precision fit (diagnosis/acc_fit.h), judged like the rest. */
    RF_LINE(acc_fit.model, char *, RF_STR, 1, NULL, 1, 0),
    RF_LINE(acc_fit.runner_up, char *, RF_STR, 1, NULL, 1, 0),
    RF_LINE(acc_fit.resid_fp32, double, RF_F64, 1, NULL, 1, 1),
    RF_LINE(acc_fit.resid_best, double, RF_F64, 1, NULL, 1, 1),
    RF_LINE(acc_fit.resid_runner_up, double, RF_F64, 1, NULL, 1, 1),
    RF_LINE(acc_fit.sampled, int64_t, RF_I64, 1, NULL, 1, 1),
    /* The structured halves of the diagnosis, the poison note and the baseline's finding. */
    RF_LINE(diag_party, char *, RF_STR, 1, NULL, 1, 0),
    RF_LINE(poison_where, char *, RF_STR, 1, NULL, 1, 0),
    RF_LINE(regressed_metric, char *, RF_STR, 1, NULL, 1, 0),
    RF_LINE(regressed_base, double, RF_F64, 1, NULL, 1, 0),
    RF_LINE(regressed_run, double, RF_F64, 1, NULL, 1, 0),
    RF_LINE(acc_fit.bound_checked, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(acc_fit.bound_outside, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(acc_fit.bound_row, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(acc_fit.bound_col, int64_t, RF_I64, 1, NULL, 1, 1),
    RF_LINE(acc_fit.bound_out, double, RF_F64, 1, NULL, 1, 1),
    RF_LINE(acc_fit.bound_lo, double, RF_F64, 1, NULL, 1, 1),
    RF_LINE(acc_fit.bound_hi, double, RF_F64, 1, NULL, 1, 1),
};
const int result_field_count = (int)(sizeof result_fields / sizeof result_fields[0]);

const result_field_t *result_field_find(const char *name)
{
    for (int i = 0; i < result_field_count; i++)
        if (strcmp(result_fields[i].name, name) == 0)
            return &result_fields[i];
    return NULL;
}

int result_has_measurement(const result_t *r)
{
    return strncmp(r->reference, "-", sizeof r->reference) != 0;
}

int result_field_missing(const result_field_t *f, const result_t *r)
{
    return f->measured && !result_has_measurement(r);
}

int result_field_columns(const result_field_t *f)
{
    return f->type == RF_I64_ARRAY ? f->count : 1;
}

void result_column_name(const result_field_t *f, int e, char *buf, size_t cap)
{
    if (f->type != RF_I64_ARRAY)
        snprintf(buf, cap, "%s", f->name);
    else if (f->elem_label)
        snprintf(buf, cap, "%s.%s", f->name, f->elem_label(e));
    else
        snprintf(buf, cap, "%s.%d", f->name, e);
}

const char *rf_type_name(rf_type_t t)
{
    switch (t) {
    case RF_STR: return "string";
    case RF_I64: return "int64";
    case RF_U64: return "uint64";
    case RF_INT: return "int32";
    case RF_F64: return "float64";
    case RF_VERDICT: return "verdict name (string)";
    case RF_I64_ARRAY: return "int64 array";
    }
    return "?";
}

static size_t rf_align(rf_type_t t)
{
    switch (t) {
    case RF_STR: return 1;
    case RF_I64: case RF_I64_ARRAY: return alignof(int64_t);
    case RF_U64: return alignof(uint64_t);
    case RF_INT: return alignof(int);
    case RF_F64: return alignof(double);
    case RF_VERDICT: return alignof(verdict_t);
    }
    return 1;
}

/* Walks the table in offset order: every gap between described members must
 * be exactly the padding the next member's alignment needs; an undescribed
 * member shows up as a longer gap (or overlap, for a duplicated line). */
int result_fields_check(kr_error_t *err)
{
    int order[256];
    int n = result_field_count;
    if (n > (int)(sizeof order / sizeof order[0]))
        return kr_fail(err, "result_fields: %d fields; raise the check's limit", n);
    for (int i = 0; i < n; i++)
        order[i] = i;
    for (int i = 1; i < n; i++)   /* insertion sort by offset */
        for (int j = i; j > 0 && result_fields[order[j]].offset <
                                     result_fields[order[j - 1]].offset; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    size_t end = 0;
    const char *prev = "(start)";
    for (int i = 0; i < n; i++) {
        const result_field_t *f = &result_fields[order[i]];
        size_t a = rf_align(f->type);
        size_t expect = (end + a - 1) / a * a;
        if (f->offset < end)
            return kr_fail(err, "result_fields: %s overlaps %s; expected each member once",
                           f->name, prev);
        if (f->offset != expect)
            return kr_fail(err, "result_fields: bytes %zu-%zu of result_t (between %s and %s) "
                                "are described by no field; expected one line per member "
                                "of result_t in harness/results/result_fields.c",
                           end, f->offset - 1, prev, f->name);
        end = f->offset + f->size;
        prev = f->name;
    }
    size_t tail = (end + alignof(result_t) - 1) / alignof(result_t) * alignof(result_t);
    if (tail != sizeof(result_t))
        return kr_fail(err, "result_fields: bytes %zu-%zu of result_t (after %s) are described "
                            "by no field; expected one line per member of result_t in "
                            "harness/results/result_fields.c", end, sizeof(result_t) - 1, prev);
    return 0;
}

int verdict_from_name(const char *name)
{
    for (int v = 0; v < VERDICT_COUNT; v++)
        if (strcmp(verdict_name((verdict_t)v), name) == 0)
            return v;
    return -1;
}

/* ---------------------------------------------------------------- CSV */

/* A spreadsheet takes a cell starting with = + - @ (or a tab or CR) for a
 * formula: such a name gets a leading quote, unless it is a number or a lone
 * "-" (a row without a reference).  The same rule as reports/escape.c. */
static int csv_formula_like(const char *s, size_t cap)
{
    if (cap < 2 || !s[0] || !s[1] || !strchr("=+-@\t\r", s[0]))
        return 0;
    char buf[64];
    size_t n = strnlen(s, cap);
    if (n < sizeof buf) {
        memcpy(buf, s, n);
        buf[n] = '\0';
        char *end;
        (void)strtod(buf, &end);
        if (end != buf && *end == '\0')
            return 0;
    }
    return 1;
}

static void csv_str(FILE *fp, const char *s, size_t cap)
{
    fputc('"', fp);
    if (csv_formula_like(s, cap))
        fputc('\'', fp);
    for (size_t i = 0; i < cap && s[i]; i++) {
        if (s[i] == '"')
            fputc('"', fp);
        fputc(s[i], fp);
    }
    fputc('"', fp);
}

const char *result_format_number(char *buf, size_t cap, int digits, double v)
{
    if (isnan(v))
        snprintf(buf, cap, "nan");
    else
        snprintf(buf, cap, "%.*g", digits, v);
    return buf;
}

static void csv_double(FILE *fp, double v)
{
    char text[RESULT_NUMBER_CHARS];
    fputs(result_format_number(text, sizeof text, 17, v), fp);
}

void result_fields_csv_header(FILE *fp)
{
    for (int i = 0; i < result_field_count; i++) {
        const result_field_t *f = &result_fields[i];
        for (int e = 0; e < result_field_columns(f); e++) {
            char name[RF_COLUMN_NAME_MAX];
            result_column_name(f, e, name, sizeof name);
            fprintf(fp, "%s%s", i || e ? "," : "", name);
        }
    }
    fputc('\n', fp);
}

void result_fields_csv_row(FILE *fp, const result_t *r)
{
    const char *base = (const char *)r;
    for (int i = 0; i < result_field_count; i++) {
        const result_field_t *f = &result_fields[i];
        const void *p = base + f->offset;
        if (i)
            fputc(',', fp);
        if (result_field_missing(f, r)) {
            for (int e = 1; e < result_field_columns(f); e++)
                fputc(',', fp);
            continue;
        }
        switch (f->type) {
        case RF_STR:
            csv_str(fp, p, f->size);
            break;
        case RF_I64: {
            int64_t v;
            memcpy(&v, p, sizeof v);
            fprintf(fp, "%" PRId64, v);
            break;
        }
        case RF_U64: {
            uint64_t v;
            memcpy(&v, p, sizeof v);
            fprintf(fp, "%" PRIu64, v);
            break;
        }
        case RF_INT: {
            int v;
            memcpy(&v, p, sizeof v);
            fprintf(fp, "%d", v);
            break;
        }
        case RF_F64: {
            double v;
            memcpy(&v, p, sizeof v);
            csv_double(fp, v);
            break;
        }
        case RF_VERDICT: {
            verdict_t v;
            memcpy(&v, p, sizeof v);
            fputs(verdict_name(v), fp);
            break;
        }
        case RF_I64_ARRAY:
            for (int e = 0; e < f->count; e++) {
                int64_t v;
                memcpy(&v, (const char *)p + (size_t)e * sizeof v, sizeof v);
                fprintf(fp, "%s%" PRId64, e ? "," : "", v);
            }
            break;
        }
    }
    fputc('\n', fp);
}

void result_fields_csv_write(FILE *fp, const result_list_t *rows)
{
    result_fields_csv_header(fp);
    for (int64_t i = 0; i < rows->count; i++)
        result_fields_csv_row(fp, &rows->rows[i]);
}

/* ---------------------------------------------------------------- JSON */

/* The object at the dotted prefix of name inside root ("metrics.out_nf.nan"
 * -> root["metrics"]["out_nf"]), made on the way; *leaf = the last part. */
static json_t *json_parent(json_t *root, char *name, char **leaf)
{
    json_t *o = root;
    char *part = name, *dot;
    while ((dot = strchr(part, '.')) != NULL) {
        *dot = '\0';
        json_t *next = json_object_get(o, part);
        if (!json_is_object(next)) {
            next = json_object();
            if (!next || json_object_set_new(o, part, next) != 0)
                return NULL;
        }
        o = next;
        part = dot + 1;
    }
    *leaf = part;
    return o;
}

static json_t *json_string_lossy(const char *p, size_t size)
{
    char buf[1024];
    size_t cap = size < sizeof buf ? size : sizeof buf;
    memcpy(buf, p, cap);
    buf[cap - 1] = '\0';
    json_t *v = json_string(buf);
    if (!v) {   /* not UTF-8: keep the field, with '?' for each non-ASCII byte */
        for (char *c = buf; *c; c++)
            if ((unsigned char)*c >= 0x80)
                *c = '?';
        v = json_string(buf);
    }
    return v;
}

/* Column e of field f in row r as a JSON value (null when missing). */
static json_t *column_json(const result_field_t *f, int e, const result_t *r)
{
    const char *p = (const char *)r + f->offset;
    if (result_field_missing(f, r))
        return json_null();
    switch (f->type) {
    case RF_STR:
        return json_string_lossy(p, f->size);
    case RF_I64: {
        int64_t x;
        memcpy(&x, p, sizeof x);
        return json_integer((json_int_t)x);
    }
    case RF_U64: {
        uint64_t x;
        memcpy(&x, p, sizeof x);
        return x <= (uint64_t)INT64_MAX ? json_integer((json_int_t)x) : json_real((double)x);
    }
    case RF_INT: {
        int x;
        memcpy(&x, p, sizeof x);
        return json_integer(x);
    }
    case RF_F64: {
        double x;
        memcpy(&x, p, sizeof x);
        return isfinite(x) ? json_real(x) : json_null();
    }
    case RF_VERDICT: {
        verdict_t x;
        memcpy(&x, p, sizeof x);
        return json_string(verdict_name(x));
    }
    case RF_I64_ARRAY: {
        int64_t x;
        memcpy(&x, p + (size_t)e * sizeof x, sizeof x);
        return json_integer((json_int_t)x);
    }
    }
    return json_null();
}

json_t *result_fields_json(const result_t *r)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    for (int i = 0; i < result_field_count; i++) {
        const result_field_t *f = &result_fields[i];
        for (int e = 0; e < result_field_columns(f); e++) {
            char name[RF_COLUMN_NAME_MAX], *leaf;
            result_column_name(f, e, name, sizeof name);
            json_t *parent = json_parent(o, name, &leaf);
            json_t *v = parent ? column_json(f, e, r) : NULL;
            if (!v || json_object_set_new(parent, leaf, v) != 0) {
                json_decref(o);
                return NULL;
            }
        }
    }
    return o;
}
