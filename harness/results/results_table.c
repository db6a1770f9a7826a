/* results_table: result_t rows <-> the /rows compound (results_table.h).
 *
 * Rows travel through a "staging" record: one 8-byte-or-wider slot per
 * column (a char * for a variable-length string, the member's size for a
 * fixed one read from an old file, a double or an int64 for numbers), plus,
 * per array field, room for a whole array as old files store it.  The memory
 * compound type over the staging record is built per file from what its
 * members are, so HDF5 does each conversion and only by name. */
#include "results_table.h"
#include "h5_file.h"
#include "h5_attr.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kr_string.h"
#include "result_fields.h"
#include "h5_names.h"

#define RT_MAX_COLUMNS 256

/* How a column is read from the file at hand. */
typedef enum {
    RT_ABSENT = 0,   /* not in the file (optional field), or read through its legacy array */
    RT_VLEN_STR,     /* variable-length string: a char * in the slot */
    RT_FIXED_STR,    /* fixed-length string: the slot's bytes */
    RT_INT,          /* an integer: int64 (uint64 for RF_U64) in the slot */
    RT_FLOAT,        /* a float64 in the slot (NaN: missing) */
} rt_mode_t;

typedef struct {
    int field;        /* index in result_fields */
    int elem;         /* element of an array field, 0 otherwise */
    size_t off, size; /* slot in the staging record */
    rt_mode_t mode;
} rt_col_t;

typedef struct {
    rt_col_t col[RT_MAX_COLUMNS];
    int n;
    size_t arr_off[RT_MAX_COLUMNS];   /* per field: a whole legacy array (array fields only) */
    int arr_legacy[RT_MAX_COLUMNS];   /* per field: read from one array member (schema 1) */
    size_t total;
} rt_layout_t;

static int is_string(const result_field_t *f)
{
    return f->type == RF_STR || f->type == RF_VERDICT;
}

/* Counts stored as float64 so that a missing one is NaN. */
static int stored_as_float(const result_field_t *f)
{
    return f->type == RF_F64 || (f->measured && f->type != RF_STR && f->type != RF_VERDICT);
}

static int layout_build(rt_layout_t *L, kr_error_t *err)
{
    memset(L, 0, sizeof *L);
    size_t off = 0;
    if (result_field_count > RT_MAX_COLUMNS)
        return kr_fail(err, "results table: %d fields; raise RT_MAX_COLUMNS", result_field_count);
    for (int i = 0; i < result_field_count; i++) {
        const result_field_t *f = &result_fields[i];
        for (int e = 0; e < result_field_columns(f); e++) {
            if (L->n == RT_MAX_COLUMNS)
                return kr_fail(err, "results table: more than %d columns; raise RT_MAX_COLUMNS",
                               RT_MAX_COLUMNS);
            rt_col_t *c = &L->col[L->n++];
            c->field = i;
            c->elem = e;
            c->off = off;
            c->size = 8;
            if (f->type == RF_STR && f->size > c->size)
                c->size = f->size;
            if (f->type == RF_VERDICT)
                c->size = RF_VERDICT_STRLEN;
            off += (c->size + 7) / 8 * 8;
        }
        if (f->type == RF_I64_ARRAY) {
            L->arr_off[i] = off;
            off += 8 * (size_t)f->count;
        }
    }
    L->total = off;
    return 0;
}

/* The type of column c as written; file = 1: the on-disk (little-endian) type. */
static hid_t write_type(const rt_col_t *c, int file)
{
    const result_field_t *f = &result_fields[c->field];
    if (is_string(f))
        return h5_vlen_utf8_type();
    if (stored_as_float(f))
        return H5Tcopy(file ? H5T_IEEE_F64LE : H5T_NATIVE_DOUBLE);
    switch (f->type) {
    case RF_U64: return H5Tcopy(file ? H5T_STD_U64LE : H5T_NATIVE_UINT64);
    case RF_INT: return H5Tcopy(file ? H5T_STD_I32LE : H5T_NATIVE_INT32);
    default: return H5Tcopy(file ? H5T_STD_I64LE : H5T_NATIVE_INT64);
    }
}

/* file = 1: members packed one after another; 0: at their staging slots. */
static hid_t write_compound(const rt_layout_t *L, int file)
{
    size_t size = L->total;
    if (file) {
        size = 0;
        for (int k = 0; k < L->n; k++) {
            hid_t t = write_type(&L->col[k], 1);
            if (t < 0)
                return -1;
            size += H5Tget_size(t);
            H5Tclose(t);
        }
    }
    hid_t c = H5Tcreate(H5T_COMPOUND, size);
    if (c < 0)
        return -1;
    size_t off = 0;
    for (int k = 0; k < L->n; k++) {
        char name[RF_COLUMN_NAME_MAX];
        result_column_name(&result_fields[L->col[k].field], L->col[k].elem, name, sizeof name);
        hid_t t = write_type(&L->col[k], file);
        herr_t e = t < 0 ? -1 : H5Tinsert(c, name, file ? off : L->col[k].off, t);
        if (t >= 0) {
            off += H5Tget_size(t);
            H5Tclose(t);
        }
        if (e < 0) {
            H5Tclose(c);
            return -1;
        }
    }
    return c;
}

/* Element e of a numeric field as an int64 / uint64 / double. */
static int64_t field_i64(const result_field_t *f, const char *p, int e)
{
    if (f->type == RF_INT) {
        int v;
        memcpy(&v, p, sizeof v);
        return v;
    }
    int64_t v;
    memcpy(&v, p + (size_t)e * sizeof v, sizeof v);
    return v;
}

static void pack_column(const rt_col_t *c, const result_t *r, unsigned char *slot, int *oom)
{
    const result_field_t *f = &result_fields[c->field];
    const char *p = (const char *)r + f->offset;
    if (is_string(f)) {
        /* At most size-1 bytes: a member that lost its NUL is cut, never overrun. */
        char *s;
        if (f->type == RF_VERDICT) {
            verdict_t v;
            memcpy(&v, p, sizeof v);
            s = strdup(verdict_name(v));
        } else {
            s = strndup(p, f->size - 1);
        }
        if (!s)
            *oom = 1;
        memcpy(slot, &s, sizeof s);
        return;
    }
    if (stored_as_float(f)) {
        double d;
        if (result_field_missing(f, r))
            d = NAN;
        else if (f->type == RF_F64)
            memcpy(&d, p, sizeof d);
        else if (f->type == RF_U64) {
            uint64_t u;
            memcpy(&u, p, sizeof u);
            d = (double)u;
        } else
            d = (double)field_i64(f, p, c->elem);
        memcpy(slot, &d, sizeof d);
        return;
    }
    if (f->type == RF_INT) {
        int32_t w = (int32_t)field_i64(f, p, 0);
        memcpy(slot, &w, sizeof w);
    } else {
        memcpy(slot, p + (size_t)c->elem * 8, 8);
    }
}

static void free_strings(const rt_layout_t *L, unsigned char *buf, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < L->n; k++) {
            if (!is_string(&result_fields[L->col[k].field]))
                continue;
            char *s;
            memcpy(&s, buf + (size_t)i * L->total + L->col[k].off, sizeof s);
            free(s);
        }
}

int results_table_write(hid_t file, hid_t dcpl, const char *path, const result_t *rows,
                        int64_t n, kr_error_t *err)
{
    rt_layout_t L;
    if (layout_build(&L, err) != 0)
        return -1;
    if ((uint64_t)n > SIZE_MAX / L.total)
        return kr_fail(err, "%s: rows: %" PRId64 " rows is too many; expected to fit in memory",
                       path, n);
    unsigned char *buf = calloc(n ? (size_t)n : 1, L.total);
    if (!buf)
        return kr_fail(err, "%s: rows: out of memory packing %" PRId64 " rows; expected to fit "
                            "in memory", path, n);
    int oom = 0;
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < L.n; k++)
            pack_column(&L.col[k], &rows[i], buf + (size_t)i * L.total + L.col[k].off, &oom);
    hid_t ftype = -1, mtype = -1, space = -1, ds = -1;
    int rc = -1;
    if (oom) {
        kr_fail(err, "%s: rows: out of memory packing %" PRId64 " rows; expected to fit in "
                     "memory", path, n);
        goto done;
    }
    ftype = write_compound(&L, 1);
    mtype = write_compound(&L, 0);
    hsize_t dims[1] = {(hsize_t)n};
    space = H5Screate_simple(1, dims, NULL);
    if (ftype < 0 || mtype < 0 || space < 0) {
        kr_fail(err, "%s: rows: HDF5 failed building the row type; expected a working HDF5 "
                     "library", path);
        goto done;
    }
    ds = H5Dcreate2(file, "rows", ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    if (ds < 0 || (n > 0 && H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)) {
        kr_fail(err, "%s: file: HDF5 failed writing /rows (disk full?); expected a writable "
                     "results file", path);
        goto done;
    }
    rc = 0;
done:
    H5_CLOSE_ALL(ds, space, ftype, mtype);
    free_strings(&L, buf, n);
    free(buf);
    return rc;
}

/* ---------------------------------------------------------------- read */

typedef struct {
    const char *path;
    kr_error_t *err;
} rd_t;

#define rfail(rd, obj, ...) kr_fail_at((rd)->err, (rd)->path, obj, __VA_ARGS__)

/* The mode column c is read in, from the file's member type mt. */
static int column_mode(rd_t *rd, const rt_col_t *c, const char *name, hid_t mt, rt_mode_t *mode)
{
    const result_field_t *f = &result_fields[c->field];
    H5T_class_t cl = H5Tget_class(mt);
    char obj[160];
    snprintf(obj, sizeof obj, "/rows field '%s'", name);
    if (is_string(f) && cl == H5T_STRING) {
        htri_t v = H5Tis_variable_str(mt);
        if (v < 0)
            return rfail(rd, obj, "has an unreadable string type (corrupt file?); expected a "
                                  "string");
        *mode = v ? RT_VLEN_STR : RT_FIXED_STR;
        return 0;
    }
    if (!is_string(f) && (cl == H5T_INTEGER || cl == H5T_FLOAT)) {
        *mode = cl == H5T_FLOAT || f->type == RF_F64 ? RT_FLOAT : RT_INT;
        return 0;
    }
    return rfail(rd, obj, "is %s (%zu bytes); expected %s", h5_class_name(cl), H5Tget_size(mt),
                 f->type == RF_I64_ARRAY ? "a number" : rf_type_name(f->type));
}

/* Schema 1 stored an array field as one array member: 1 if it is there (checked), 0 if
 * not, -1 on error. */
static int legacy_array(rd_t *rd, hid_t ftype, const result_field_t *f)
{
    int idx = H5Tget_member_index(ftype, f->name);
    if (idx < 0)
        return 0;
    hid_t mt = H5Tget_member_type(ftype, (unsigned)idx);
    char obj[160];
    snprintf(obj, sizeof obj, "/rows field '%s'", f->name);
    if (mt < 0)
        return rfail(rd, obj, "has an unreadable type (corrupt file?); expected a readable type");
    int ok = 0;
    hsize_t d = 0;
    H5T_class_t cl = H5Tget_class(mt);
    if (cl == H5T_ARRAY && H5Tget_array_ndims(mt) == 1) {
        hid_t base = H5Tget_super(mt);
        H5Tget_array_dims2(mt, &d);
        ok = base >= 0 && H5Tget_class(base) == H5T_INTEGER;
        if (base >= 0)
            H5Tclose(base);
    }
    size_t sz = H5Tget_size(mt);
    H5Tclose(mt);
    if (!ok)
        return rfail(rd, obj, "is %s (%zu bytes); expected an int64 array or one column per "
                              "element", h5_class_name(cl), sz);
    if (d != (hsize_t)f->count)
        return rfail(rd, obj, "is an array of %llu elements; expected %d",
                     (unsigned long long)d, f->count);
    return 1;
}

/* Matches the file's members to the layout's columns; fills each column's mode. */
static int match_columns(rd_t *rd, hid_t ftype, rt_layout_t *L)
{
    for (int k = 0; k < L->n; k++) {
        rt_col_t *c = &L->col[k];
        const result_field_t *f = &result_fields[c->field];
        if (f->type == RF_I64_ARRAY && c->elem == 0) {
            int lg = legacy_array(rd, ftype, f);
            if (lg < 0)
                return -1;
            L->arr_legacy[c->field] = lg;
        }
        if (f->type == RF_I64_ARRAY && L->arr_legacy[c->field]) {
            c->mode = RT_ABSENT;
            continue;
        }
        char name[RF_COLUMN_NAME_MAX];
        result_column_name(f, c->elem, name, sizeof name);
        int idx = H5Tget_member_index(ftype, name);
        if (idx < 0) {
            if (!f->optional && f->type == RF_I64_ARRAY)
                return rfail(rd, "/rows", "field '%s' is missing (neither columns '%s', ... "
                                          "nor one array member); expected every field of "
                                          "schema kreplay.results/2", f->name, name);
            if (!f->optional)
                return rfail(rd, "/rows", "field '%s' is missing; expected every field of "
                                          "schema kreplay.results/2 (a file from another "
                                          "kreplay version?)", name);
            c->mode = RT_ABSENT;
            continue;
        }
        hid_t mt = H5Tget_member_type(ftype, (unsigned)idx);
        if (mt < 0)
            return rfail(rd, "/rows", "cannot read the type of field '%s' (corrupt file?); "
                                      "expected a readable type", name);
        int bad = column_mode(rd, c, name, mt, &c->mode);
        H5Tclose(mt);
        if (bad)
            return -1;
    }
    return 0;
}

static hid_t read_type(const rt_col_t *c)
{
    const result_field_t *f = &result_fields[c->field];
    switch (c->mode) {
    case RT_VLEN_STR: return h5_vlen_utf8_type();
    case RT_FIXED_STR: return h5_fixed_str_type(c->size);
    case RT_FLOAT: return H5Tcopy(H5T_NATIVE_DOUBLE);
    case RT_INT: return H5Tcopy(f->type == RF_U64 ? H5T_NATIVE_UINT64 : H5T_NATIVE_INT64);
    case RT_ABSENT: break;
    }
    return -1;
}

static hid_t read_compound(const rt_layout_t *L)
{
    hid_t c = H5Tcreate(H5T_COMPOUND, L->total);
    if (c < 0)
        return -1;
    for (int k = 0; k < L->n; k++) {
        const rt_col_t *col = &L->col[k];
        const result_field_t *f = &result_fields[col->field];
        hid_t t = -1;
        char name[RF_COLUMN_NAME_MAX];
        size_t off = col->off;
        if (f->type == RF_I64_ARRAY && L->arr_legacy[col->field]) {
            if (col->elem != 0)
                continue;
            hsize_t d = (hsize_t)f->count;
            t = H5Tarray_create2(H5T_NATIVE_INT64, 1, &d);
            snprintf(name, sizeof name, "%s", f->name);
            off = L->arr_off[col->field];
        } else {
            if (col->mode == RT_ABSENT)
                continue;
            t = read_type(col);
            result_column_name(f, col->elem, name, sizeof name);
        }
        herr_t e = t < 0 ? -1 : H5Tinsert(c, name, off, t);
        if (t >= 0)
            H5Tclose(t);
        if (e < 0) {
            H5Tclose(c);
            return -1;
        }
    }
    return c;
}

static void store_i64(const result_field_t *f, char *dst, int e, int64_t v)
{
    if (f->type == RF_INT) {
        int w = (int)v;
        memcpy(dst, &w, sizeof w);
    } else {
        memcpy(dst + (size_t)e * sizeof v, &v, sizeof v);
    }
}

/* Column c of one staged row into r.  Returns 0, or 1 for a bad verdict name. */
static int unpack_column(const rt_col_t *c, const unsigned char *slot, result_t *r)
{
    const result_field_t *f = &result_fields[c->field];
    char *dst = (char *)r + f->offset;
    char tmp[RF_VERDICT_STRLEN + 1];
    const char *s = NULL;
    switch (c->mode) {
    case RT_ABSENT:
        return 0;
    case RT_VLEN_STR:
        memcpy(&s, slot, sizeof s);
        s = s ? s : "";
        break;
    case RT_FIXED_STR:
        s = (const char *)slot;
        break;
    case RT_FLOAT: {
        double d;
        memcpy(&d, slot, sizeof d);
        if (f->type == RF_F64) {
            memcpy(dst, &d, sizeof d);
        } else if (isfinite(d) && fabs(d) < 9.2e18) {   /* NaN: missing, keep the default */
            if (f->type == RF_U64) {
                uint64_t u = d < 0 ? 0 : (uint64_t)d;
                memcpy(dst, &u, sizeof u);
            } else {
                store_i64(f, dst, c->elem, (int64_t)d);
            }
        }
        return 0;
    }
    case RT_INT:
        if (f->type == RF_U64)
            memcpy(dst, slot, 8);
        else {
            int64_t v;
            memcpy(&v, slot, sizeof v);
            store_i64(f, dst, c->elem, v);
        }
        return 0;
    }
    if (f->type == RF_STR) {
        size_t len = c->mode == RT_FIXED_STR ? strnlen(s, c->size) : strlen(s);
        if (len > f->size - 1)
            len = f->size - 1;
        memcpy(dst, s, len);
        dst[len] = '\0';
        return 0;
    }
    size_t len = c->mode == RT_FIXED_STR ? strnlen(s, c->size) : strlen(s);
    if (len > RF_VERDICT_STRLEN)
        return 1;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    int v = verdict_from_name(tmp);
    if (v < 0)
        return 1;
    verdict_t vv = (verdict_t)v;
    memcpy(dst, &vv, sizeof vv);
    return 0;
}

static int unpack_row(const rt_layout_t *L, const unsigned char *rec, result_t *r, int *bad_col)
{
    for (int k = 0; k < L->n; k++)
        if (unpack_column(&L->col[k], rec + L->col[k].off, r)) {
            *bad_col = k;
            return 1;
        }
    for (int i = 0; i < result_field_count; i++)
        if (result_fields[i].type == RF_I64_ARRAY && L->arr_legacy[i])
            memcpy((char *)r + result_fields[i].offset, rec + L->arr_off[i],
                   8 * (size_t)result_fields[i].count);
    return 0;
}

static int has_vlen(const rt_layout_t *L)
{
    for (int k = 0; k < L->n; k++)
        if (L->col[k].mode == RT_VLEN_STR)
            return 1;
    return 0;
}

int results_table_read(hid_t file, const char *path, int64_t file_size, result_list_t *out,
                       kr_error_t *err)
{
    rd_t rdv = {.path = path, .err = err}, *rd = &rdv;
    hid_t ds = -1, ftype = -1, space = -1, mtype = -1;
    unsigned char *buf = NULL;
    int rc = -1, reclaim = 0;
    rt_layout_t *L = malloc(sizeof *L);
    if (!L)
        return rfail(rd, "/rows", "out of memory; expected to fit in memory");
    if (layout_build(L, err) != 0)
        goto done;

    htri_t ex = H5Lexists(file, "rows", H5P_DEFAULT);
    if (ex <= 0) {
        rfail(rd, "/rows", "no such dataset; expected the results table of schema "
                           "kreplay.results/2");
        goto done;
    }
    ds = H5Dopen2(file, "rows", H5P_DEFAULT);
    if (ds < 0 || (ftype = H5Dget_type(ds)) < 0 || (space = H5Dget_space(ds)) < 0) {
        rfail(rd, "/rows", "cannot open the dataset (corrupt file?); expected a readable "
                           "compound dataset");
        goto done;
    }
    if (H5Tget_class(ftype) != H5T_COMPOUND) {
        rfail(rd, "/rows", "is a %s dataset; expected a compound dataset, one element per row",
              h5_class_name(H5Tget_class(ftype)));
        goto done;
    }
    int rank = H5Sget_simple_extent_ndims(space);
    if (rank != 1) {
        rfail(rd, "/rows", "has rank %d; expected a 1-D dataset", rank);
        goto done;
    }
    hsize_t dims[1] = {0};
    H5Sget_simple_extent_dims(space, dims, NULL);
    if (match_columns(rd, ftype, L) != 0)
        goto done;
    int64_t n = (int64_t)dims[0];
    if (dims[0] > (hsize_t)(SIZE_MAX / L->total / 2) || dims[0] > (hsize_t)INT64_MAX / 2) {
        rfail(rd, "/rows", "claims %llu rows; expected a plausible row count (corrupt file?)",
              (unsigned long long)dims[0]);
        goto done;
    }
    /* A contiguous dataset whose bytes lie past the end of the file: truncated. */
    haddr_t off = H5Dget_offset(ds);
    hsize_t stored = H5Dget_storage_size(ds);
    if (n > 0 && off != HADDR_UNDEF && (uint64_t)off + (uint64_t)stored > (uint64_t)file_size) {
        rfail(rd, "/rows", "data ends at byte %llu but the file has %lld bytes (truncated "
                           "file?); expected the data inside the file",
              (unsigned long long)((uint64_t)off + stored), (long long)file_size);
        goto done;
    }
    mtype = read_compound(L);
    if (mtype < 0) {
        rfail(rd, "/rows", "cannot build the memory type; expected a working HDF5 library");
        goto done;
    }
    buf = calloc(n ? (size_t)n : 1, L->total);
    if (!buf) {
        rfail(rd, "/rows", "out of memory for %" PRId64 " rows; expected to fit in memory", n);
        goto done;
    }
    reclaim = n > 0 && has_vlen(L);   /* the buffer is zeroed: pointers not read are NULL */
    if (n > 0 && H5Dread(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        rfail(rd, "/rows", "reading the data failed (truncated or corrupt file?); expected "
                           "%" PRId64 " readable rows", n);
        goto done;
    }
    for (int64_t r = 0; r < n; r++) {
        result_t *row = result_list_add(out);
        if (!row) {
            rfail(rd, "/rows", "out of memory for %" PRId64 " rows; expected to fit in memory",
                  n);
            goto done;
        }
        int bad = 0;
        if (unpack_row(L, buf + (size_t)r * L->total, row, &bad)) {
            const rt_col_t *c = &L->col[bad];
            const char *s = (const char *)buf + (size_t)r * L->total + c->off;
            char shown[RF_VERDICT_STRLEN + 4];
            if (c->mode == RT_VLEN_STR) {
                /* The record holds the string's pointer, maybe unaligned. */
                const char *held;
                memcpy(&held, s, sizeof held);
                s = held;
            }
            snprintf(shown, sizeof shown, "%.*s", RF_VERDICT_STRLEN, s ? s : "");
            rfail(rd, "/rows", "row %" PRId64 ": field '%s' holds '%s'; expected a verdict name "
                               "(PASS, WRONG, ...)", r, result_fields[c->field].name, shown);
            goto done;
        }
    }
    rc = 0;
done:
    if (reclaim) {
#if H5_VERSION_GE(1, 12, 0)
        H5Treclaim(mtype, space, H5P_DEFAULT, buf);
#else
        H5Dvlen_reclaim(mtype, space, H5P_DEFAULT, buf);
#endif
    }
    free(buf);
    free(L);
    H5_CLOSE_ALL(mtype, space, ftype, ds);
    return rc;
}

int results_table_count(hid_t file, const char *path, int64_t *n, kr_error_t *err)
{
    rd_t rdv = {.path = path, .err = err}, *rd = &rdv;
    *n = 0;
    if (H5Lexists(file, "rows", H5P_DEFAULT) <= 0)
        return rfail(rd, "/rows", "no such dataset; expected the results table of schema "
                                  "kreplay.results/2");
    hid_t ds = H5Dopen2(file, "rows", H5P_DEFAULT), space = ds < 0 ? -1 : H5Dget_space(ds);
    const hssize_t points = space < 0 ? -1 : H5Sget_simple_extent_npoints(space);
    const int rank = space < 0 ? -1 : H5Sget_simple_extent_ndims(space);
    H5_CLOSE_ALL(space, ds);
    if (points < 0 || rank != 1)
        return rfail(rd, "/rows", "cannot read its extent (corrupt file?); expected a 1-D "
                                  "dataset, one element per row");
    *n = (int64_t)points;
    return 0;
}
