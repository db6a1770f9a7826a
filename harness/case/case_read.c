/* case_read: schema-v1 case file -> case_t (cases/SCHEMA.md).
 *
 * Case files come from production dumps, converters and hand edits, so the
 * reader trusts nothing: every dataset's rank, dims and dtype (class, size,
 * sign) are checked against M/N/K before a byte is allocated, and every
 * failure becomes one line "<path>: <object>: <problem>; expected <what>".
 * Data is read with explicit native memory types so HDF5 converts the file's
 * byte order (a big-endian file reads the same as a little-endian one). */
#include "case_io.h"
#include "case_mapping.h"
#include "file_kind.h"
#include "h5_file.h"
#include "h5_safety.h"
#include "kr_alloc.h"

#include <errno.h>
#include <hdf5.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <unistd.h>

typedef enum { EL_U8, EL_U16, EL_F32 } elem_t;

static const char *elem_name(elem_t e)
{
    return e == EL_U8 ? "uint8" : e == EL_U16 ? "uint16" : "float32";
}

static size_t elem_size(elem_t e)
{
    return e == EL_U8 ? 1 : e == EL_U16 ? 2 : 4;
}

static hid_t elem_memtype(elem_t e)
{
    return e == EL_U8 ? H5T_NATIVE_UINT8 : e == EL_U16 ? H5T_NATIVE_UINT16 : H5T_NATIVE_FLOAT;
}

typedef struct {
    const char *path;
    hid_t file, root;
    int64_t file_size;          /* bytes on disk, for the truncation check */
    kr_error_t *err;
    /* The file mapped (NULL or base NULL: every array is copied).  HDF5's
     * dataset addresses are offsets from the file's first byte, a user
     * block included (test_case_io checks it with one). */
    case_mapping_t *map;
    int defer_bf16_x;           /* case_read_for_image */
} rd_t;

/* "<path>: <obj>: <formatted problem>" */
#define fail(rd, obj, ...) kr_fail_at((rd)->err, (rd)->path, obj, __VA_ARGS__)

/* ---- describing what was found, for messages ---- */

/* The type classes a message names by class alone. */
static const struct {
    H5T_class_t cls;
    const char *name;
} CLASS_ONLY_NAMES[] = {
    {H5T_STRING, "string"}, {H5T_COMPOUND, "compound"}, {H5T_ENUM, "enum"},
    {H5T_OPAQUE, "opaque"}, {H5T_ARRAY, "array"},       {H5T_VLEN, "vlen"},
};

static void type_desc(hid_t t, char *buf, size_t cap)
{
    H5T_class_t cls = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    if (cls == H5T_INTEGER) {
        snprintf(buf, cap, "%s%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "uint" : "int", sz * 8);
        return;
    }
    if (cls == H5T_FLOAT) {
        snprintf(buf, cap, "float%zu", sz * 8);
        return;
    }
    for (size_t i = 0; i < sizeof CLASS_ONLY_NAMES / sizeof CLASS_ONLY_NAMES[0]; i++)
        if (CLASS_ONLY_NAMES[i].cls == cls) {
            snprintf(buf, cap, "%s", CLASS_ONLY_NAMES[i].name);
            return;
        }
    snprintf(buf, cap, "type class %d", (int)cls);
}

static int type_is(hid_t t, elem_t e)
{
    H5T_class_t cls = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    if (e == EL_F32)
        return cls == H5T_FLOAT && sz == 4;
    return cls == H5T_INTEGER && sz == elem_size(e) && H5Tget_sign(t) == H5T_SGN_NONE;
}

#define MAX_RANK 8

/* Rank and dims of a dataspace; rank -1 for a null or unreadable one. */
static int space_shape(hid_t space, hsize_t dims[MAX_RANK])
{
    H5S_class_t cls = H5Sget_simple_extent_type(space);
    if (cls == H5S_SCALAR)
        return 0;
    if (cls != H5S_SIMPLE)
        return -1;
    int rank = H5Sget_simple_extent_ndims(space);
    if (rank < 0 || rank > MAX_RANK)
        return rank < 0 ? -1 : rank;
    if (H5Sget_simple_extent_dims(space, dims, NULL) < 0)
        return -1;
    return rank;
}

static void shape_desc(int rank, const hsize_t *dims, char *buf, size_t cap)
{
    if (rank < 0) {
        snprintf(buf, cap, "a null dataspace");
        return;
    }
    if (rank > MAX_RANK) {
        snprintf(buf, cap, "rank %d", rank);
        return;
    }
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < rank && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%llu", i ? ", " : "",
                              (unsigned long long)dims[i]);
    if (n < cap)
        snprintf(buf + n, cap - n, "]");
}

/* ---- attributes ---- */

/* 1 and *attr open if obj has attribute `name`, 0 if not, -1 on error. */
static int open_attr(rd_t *rd, hid_t obj, const char *label, const char *name, hid_t *attr)
{
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0)
        return fail(rd, label, "cannot look up attribute %s (corrupt file?); expected a readable "
                               "object header", name);
    if (ex == 0)
        return 0;
    *attr = H5Aopen(obj, name, H5P_DEFAULT);
    if (*attr < 0)
        return fail(rd, label, "cannot open attribute %s (corrupt file?); expected a readable "
                               "attribute", name);
    return 1;
}

/* One-element attribute: scalar, or simple with one element. */
static int attr_is_single(hid_t attr)
{
    hid_t sp = H5Aget_space(attr);
    if (sp < 0)
        return 0;
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    H5S_class_t cls = H5Sget_simple_extent_type(sp);
    H5Sclose(sp);
    return (cls == H5S_SCALAR || cls == H5S_SIMPLE) && n == 1;
}

/* String attribute, variable- or fixed-length, into a malloc'd C string.
 * `label` is the object named in messages ("schema" for a root attribute,
 * the dataset's name for one of its attributes).  Returns 1 (found), 0
 * (absent: *out = NULL) or -1. */
static int read_str_attr(rd_t *rd, hid_t obj, const char *label, const char *name, char **out)
{
    hid_t attr = -1, ftype = -1, mtype = -1;
    int rc = -1;
    char tdesc[64];
    *out = NULL;
    int o = open_attr(rd, obj, label, name, &attr);
    if (o <= 0)
        return o;
    ftype = H5Aget_type(attr);
    if (ftype < 0) {
        fail(rd, label, "cannot read the type of attribute %s (corrupt file?); expected a string",
             name);
        goto done;
    }
    if (H5Tget_class(ftype) != H5T_STRING || !attr_is_single(attr)) {
        type_desc(ftype, tdesc, sizeof tdesc);
        fail(rd, label, "attribute %s is not a single string (found %s%s); expected a scalar "
                        "string attribute", name, tdesc,
             attr_is_single(attr) ? "" : " with more than one element");
        goto done;
    }
    /* Character sets must match or HDF5 refuses the conversion. */
    mtype = H5Tcopy(H5T_C_S1);
    if (mtype < 0 || H5Tset_cset(mtype, H5Tget_cset(ftype)) < 0)
        goto read_fail;
    htri_t vl = H5Tis_variable_str(ftype);
    if (vl < 0)
        goto read_fail;
    if (vl) {
        char *p = NULL;
        if (H5Tset_size(mtype, H5T_VARIABLE) < 0 || H5Aread(attr, mtype, &p) < 0)
            goto read_fail;
        *out = strdup(p ? p : "");
        if (p)
            H5free_memory(p);
    } else {
        size_t sz = H5Tget_size(ftype);
        if (sz == 0 || sz > (1u << 20)) {
            fail(rd, label, "attribute %s has a fixed string size of %zu bytes; expected 1 byte "
                            "to 1 MiB", name, sz);
            goto done;
        }
        char *buf = calloc(sz + 1, 1);
        if (!buf) {
            fail(rd, label, "out of memory reading attribute %s; expected %zu bytes", name, sz);
            goto done;
        }
        if (H5Tset_size(mtype, sz) < 0 || H5Tset_strpad(mtype, H5T_STR_NULLPAD) < 0 ||
            H5Aread(attr, mtype, buf) < 0) {
            free(buf);
            goto read_fail;
        }
        buf[sz] = '\0';
        *out = buf;
    }
    if (!*out) {
        fail(rd, label, "out of memory reading attribute %s; expected a string", name);
        goto done;
    }
    rc = 1;
    goto done;
read_fail:
    fail(rd, label, "cannot read attribute %s (corrupt file?); expected a readable string", name);
done:
    H5_CLOSE_ALL(mtype, ftype, attr);
    return rc;
}

/* Required integer root attribute (any integer type), into int64. */
static int read_int_attr(rd_t *rd, const char *name, int64_t *out)
{
    hid_t attr = -1, ftype = -1;
    int rc = -1;
    char tdesc[64];
    int o = open_attr(rd, rd->root, name, name, &attr);
    if (o < 0)
        return -1;
    if (o == 0)
        return fail(rd, name, "root attribute missing; expected an integer scalar %s", name);
    ftype = H5Aget_type(attr);
    if (ftype < 0 || H5Tget_class(ftype) != H5T_INTEGER || !attr_is_single(attr)) {
        if (ftype >= 0)
            type_desc(ftype, tdesc, sizeof tdesc);
        else
            snprintf(tdesc, sizeof tdesc, "an unreadable type");
        fail(rd, name, "root attribute is %s%s; expected an integer scalar", tdesc,
             ftype >= 0 && !attr_is_single(attr) ? " with more than one element" : "");
        goto done;
    }
    /* HDF5 clips out-of-range values (a uint64 above INT64_MAX) to
     * INT64_MAX, which the size checks then refuse. */
    if (H5Aread(attr, H5T_NATIVE_INT64, out) < 0) {
        fail(rd, name, "cannot read root attribute (corrupt file?); expected an integer scalar");
        goto done;
    }
    rc = 0;
done:
    H5_CLOSE_ALL(ftype, attr);
    return rc;
}

/* ---- datasets ---- */

/* 1 and *ds open if root has a dataset `name`; 0 if no such link; -1 if the
 * lookup fails or `name` is something other than a dataset. */
static int open_ds(rd_t *rd, const char *name, hid_t *ds)
{
    htri_t ex = H5Lexists(rd->root, name, H5P_DEFAULT);
    if (ex < 0)
        return fail(rd, name, "cannot look up the dataset (corrupt file?); expected a readable "
                              "root group");
    if (ex == 0)
        return 0;
    if (h5_safety_check_object(rd->root, name, rd->path, rd->err) != 0)
        return -1;
    hid_t obj = H5Oopen(rd->root, name, H5P_DEFAULT);
    if (obj < 0)
        return fail(rd, name, "cannot open the object (corrupt file or dangling link?); "
                              "expected a dataset");
    if (H5Iget_type(obj) != H5I_DATASET) {
        H5Oclose(obj);
        return fail(rd, name, "is not a dataset (a group or a named type); expected a dataset");
    }
    if (h5_check_written(obj, name, rd->path, rd->err) != 0) {
        H5Oclose(obj);
        return -1;
    }
    *ds = obj;
    return 1;
}

/* Checks that ds has dtype e and exactly the given dims; `expect` says in
 * words what the dims are ("(N, K/2)").  A dataset whose dtype is right but
 * whose shape is [a, 1] where [a] is wanted is not accepted here; callers
 * that allow alternatives check them first. */
static int check_ds(rd_t *rd, const char *name, hid_t ds, elem_t e, int rank,
                    const int64_t *want, const char *expect)
{
    hsize_t dims[MAX_RANK];
    int frank = -1;
    hid_t ftype = H5Dget_type(ds), space = H5Dget_space(ds);
    int type_ok = 0, shape_ok = 0;
    char tdesc[64] = "an unreadable type", sdesc[256], wdesc[256];
    if (ftype >= 0) {
        type_desc(ftype, tdesc, sizeof tdesc);
        type_ok = type_is(ftype, e);
        H5Tclose(ftype);
    }
    if (space >= 0) {
        frank = space_shape(space, dims);
        H5Sclose(space);
    }
    shape_ok = frank == rank;
    for (int i = 0; shape_ok && i < rank; i++)
        shape_ok = dims[i] == (hsize_t)want[i];
    if (type_ok && shape_ok)
        return 0;
    hsize_t w[MAX_RANK];
    for (int i = 0; i < rank; i++)
        w[i] = (hsize_t)want[i];
    shape_desc(rank, w, wdesc, sizeof wdesc);
    if (space < 0)
        snprintf(sdesc, sizeof sdesc, "an unreadable dataspace");
    else
        shape_desc(frank, dims, sdesc, sizeof sdesc);
    return fail(rd, name, "wrong %s; expected %s %s %s, found %s %s",
                !type_ok && !shape_ok ? "shape and dtype" : !type_ok ? "dtype" : "shape",
                wdesc, expect, elem_name(e), sdesc, tdesc);
}

static int ds_shape(hid_t ds, hsize_t dims[MAX_RANK]);

/* Elements [first, first + n) of the row-major dataset ds (rank 1 or 2,
 * dims checked) through HDF5 into buf. */
static int read_elements(hid_t ds, elem_t e, int64_t first, int64_t n, void *buf)
{
    hid_t space = H5Dget_space(ds);
    if (space < 0)
        return -1;
    hsize_t dims[MAX_RANK];
    const int rank = space_shape(space, dims);
    int st = -1;
    if (rank == 1 || rank == 2) {
        const hsize_t cols = rank == 2 ? dims[1] : dims[0];
        hsize_t start[2] = {0, 0}, count[2] = {1, 1};
        /* n never crosses a row: the callers take a row's first or last few. */
        start[0] = rank == 2 ? (hsize_t)first / cols : (hsize_t)first;
        start[rank - 1] = (hsize_t)first % cols;
        count[rank - 1] = (hsize_t)n;
        hsize_t mdims[1] = {(hsize_t)n};
        hid_t mem = H5Screate_simple(1, mdims, NULL);
        if (mem >= 0 && H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
            H5Dread(ds, elem_memtype(e), mem, space, H5P_DEFAULT, buf) >= 0)
            st = 0;
        if (mem >= 0)
            H5Sclose(mem);
    }
    H5Sclose(space);
    return st;
}

/* The dataset's data in the mapped file, or NULL when it must be read
 * through HDF5: not mapped, not one contiguous block, a byte order or type
 * that needs converting, misaligned for its elements, or (a check of our
 * reading of the layout) the first and last elements HDF5 reads differ from
 * the mapped bytes. */
static void *map_ds(rd_t *rd, hid_t ds, elem_t e, int64_t count)
{
    if (!rd->map || !rd->map->base)
        return NULL;
    const size_t es = elem_size(e);
    const haddr_t addr = H5Dget_offset(ds);
    const hsize_t stored = H5Dget_storage_size(ds);
    if (addr == HADDR_UNDEF || stored != (hsize_t)count * es)
        return NULL;
    hid_t ftype = H5Dget_type(ds);
    const htri_t same = ftype >= 0 ? H5Tequal(ftype, elem_memtype(e)) : -1;
    if (ftype >= 0)
        H5Tclose(ftype);
    const uint64_t off = (uint64_t)addr;
    if (same <= 0 || off % es != 0 || !case_mapping_holds(rd->map, (char *)rd->map->base + off,
                                                        (size_t)stored))
        return NULL;
    char *p = (char *)rd->map->base + off;
    hsize_t dims[MAX_RANK];
    const int rank = ds_shape(ds, dims);
    const int64_t cols = rank == 2 ? (int64_t)dims[1] : count;
    const int64_t n = cols < 64 ? cols : 64;
    unsigned char probe[64 * 4];
    if (read_elements(ds, e, 0, n, probe) != 0 || memcmp(probe, p, (size_t)n * es) != 0 ||
        read_elements(ds, e, count - n, n, probe) != 0 ||
        memcmp(probe, p + (size_t)(count - n) * es, (size_t)n * es) != 0)
        return NULL;
    case_mapping_prefault(rd->map, off, stored);
    return p;
}

/* Allocates count elements of e (count already bounded by the dims checks)
 * and reads the whole dataset into it with e's native memory type, unless
 * the mapped file holds it as it is (map_ds). */
static int read_ds(rd_t *rd, const char *name, hid_t ds, elem_t e, int64_t count, void **out)
{
    size_t es = elem_size(e);
    if (count <= 0 || (uint64_t)count > SIZE_MAX / es)
        return fail(rd, name, "%lld elements do not fit in memory; expected at most %zu",
                    (long long)count, (size_t)(SIZE_MAX / es));
    /* HDF5 checks the end-of-file address only on open; a file cut short
     * whose superblock still matches (or was patched) reads the missing part
     * of a contiguous dataset as zeros.  Its data must lie inside the file. */
    haddr_t off = H5Dget_offset(ds);
    hsize_t stored = H5Dget_storage_size(ds);
    if (off != HADDR_UNDEF && (uint64_t)off + (uint64_t)stored > (uint64_t)rd->file_size)
        return fail(rd, name, "data at bytes [%llu, %llu) lies beyond the end of the file (%lld "
                              "bytes; truncated file?); expected the data inside the file",
                    (unsigned long long)off, (unsigned long long)(off + stored),
                    (long long)rd->file_size);
    void *mapped = map_ds(rd, ds, e, count);
    if (mapped) {
        *out = mapped;
        return 0;
    }
    void *buf = kr_alloc_array((size_t)count * es);
    if (!buf)
        return fail(rd, name, "out of memory allocating %lld %s elements; expected to fit in "
                              "memory", (long long)count, elem_name(e));
    if (H5Dread(ds, elem_memtype(e), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0) {
        free(buf);
        return fail(rd, name, "reading the data failed (truncated or corrupt file?); expected "
                              "%lld readable %s elements", (long long)count, elem_name(e));
    }
    *out = buf;
    return 0;
}

/* Dtype attribute of a uint16 bf16 array: must be present and "bfloat16". */
static int check_bf16_attr(rd_t *rd, const char *name, hid_t ds)
{
    char *dt = NULL;
    int r = read_str_attr(rd, ds, name, "dtype", &dt);
    if (r < 0)
        return -1;
    if (r == 0)
        return fail(rd, name, "uint16 data without attribute dtype; expected dtype = "
                              "\"bfloat16\" on a uint16 array");
    if (strcmp(dt, "bfloat16") != 0) {
        fail(rd, name, "attribute dtype = \"%.64s\" on uint16 data; expected dtype = "
                       "\"bfloat16\"", dt);
        free(dt);
        return -1;
    }
    free(dt);
    return 0;
}

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
    int o = open_ds(rd, r->name, &ds);
    if (o < 0)
        return -1;
    if (o == 0)
        return r->absent ? r->absent(rd, c) : 0;
    int rc = r->read(rd, c, ds);
    H5Dclose(ds);
    return rc;
}

/* A [d0, d1] array of e read whole once its dtype and dims match (and, for
 * bf16 bits, its dtype attribute says so). */
static int read_plain(rd_t *rd, const char *name, hid_t ds, elem_t e, int64_t d0, int64_t d1,
                      const char *expect, void **out)
{
    const int64_t want[2] = {d0, d1};
    if (check_ds(rd, name, ds, e, 2, want, expect) != 0 ||
        (e == EL_U16 && check_bf16_attr(rd, name, ds) != 0))
        return -1;
    return read_ds(rd, name, ds, e, d0 * d1, out);
}

/* A [M, N] bf16 output (out, out_rerun, aiter). */
static int read_bf16_output(rd_t *rd, const case_t *c, hid_t ds, const char *name,
                            uint16_t **out)
{
    void *buf = NULL;
    int rc = read_plain(rd, name, ds, EL_U16, c->M, c->N, "(M, N) bf16 bits as", &buf);
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
    int rc = read_plain(rd, "ref_recorded", ds, EL_F32, c->M, c->N, "(M, N)", &buf);
    c->ref_recorded = buf;
    return rc;
}

/* The bf16 weight of an unquantized layer. */
static int read_weight_bf16(rd_t *rd, case_t *c, hid_t ds)
{
    void *buf = NULL;
    int rc = read_plain(rd, "weight_bf16", ds, EL_U16, c->N, c->K, "(N, K) bf16 bits as", &buf);
    c->weight_bf16 = buf;
    return rc;
}

/* Rank and dims of an open dataset; -1 when its dataspace is unreadable. */
static int ds_shape(hid_t ds, hsize_t dims[MAX_RANK])
{
    hid_t space = H5Dget_space(ds);
    if (space < 0)
        return -1;
    int rank = space_shape(space, dims);
    H5Sclose(space);
    return rank;
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
    if (check_ds(rd, name, ds, EL_U8, 2, want, expect) != 0)
        return -1;
    char *s = NULL;
    int r = read_str_attr(rd, ds, name, a->attr, &s);
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
    int rc = read_ds(rd, "weight", ds, EL_U8, c->N * (c->K / 2), &buf);
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
    int r = read_str_attr(rd, ds, "weight_scale", "layout", &layout);
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
    if (check_ds(rd, "weight_scale", ds, EL_U8, 2, want, expect) == 0 &&
        read_ds(rd, "weight_scale", ds, EL_U8, c->N * (c->K / 32), &buf) == 0) {
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
    int rank = ds_shape(ds, dims);
    /* The length IS the route (N folded, 2 per-block, 1 aiter), so check it
     * against the three before the generic check reports a mismatch. */
    int64_t len = rank == 1 ? (int64_t)dims[0] : -1;
    if (rank == 1 && len != c->N && len != 2 && len != 1)
        return fail(rd, "weight_ref", "length %lld is not a known route; expected [%lld] (N, "
                                      "folded), [2] (per-block) or [1] (aiter) uint8",
                    (long long)len, (long long)c->N);
    const int64_t want[1] = {rank == 1 ? len : c->N};
    void *buf = NULL;
    if (check_ds(rd, "weight_ref", ds, EL_U8, 1, want, "(N | 2 | 1)") != 0 ||
        read_ds(rd, "weight_ref", ds, EL_U8, len, &buf) != 0)
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
    if (read_plain(rd, "x", ds, EL_U16, c->M, c->K, "(M, K) bf16 bits as", &raw) != 0)
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
    int r = read_str_attr(rd, ds, "x", "dtype", &dt);
    if (r == 1 && strcmp(dt, "float32") != 0)
        r = fail(rd, "x", "attribute dtype = \"%.64s\" on float32 data; expected no dtype "
                          "attribute or dtype = \"float32\"", dt);
    free(dt);
    void *raw = NULL;
    if (r < 0 || read_plain(rd, "x", ds, EL_F32, c->M, c->K, "(M, K)", &raw) != 0)
        return -1;
    c->x = raw;
    c->x_storage = X_STORED_F32;
    return 0;
}

static int read_x(rd_t *rd, case_t *c, hid_t ds)
{
    hid_t ftype = H5Dget_type(ds);
    int is_u16 = ftype >= 0 && type_is(ftype, EL_U16);
    int is_f32 = ftype >= 0 && type_is(ftype, EL_F32);
    char tdesc[64] = "an unreadable type";
    if (ftype >= 0) {
        type_desc(ftype, tdesc, sizeof tdesc);
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
    int rc = read_ds(rd, "x_fp8", ds, EL_U8, c->M * c->K, &buf);
    c->x_fp8 = buf;
    return rc;
}

static int read_x_scale(rd_t *rd, case_t *c, hid_t ds)
{
    hsize_t dims[MAX_RANK];
    int rank = ds_shape(ds, dims);
    /* torch keeps per-token scales as [M, 1]; the production code views
     * them as [M].  Both are the same bytes. */
    int r2 = rank == 2 && dims[1] == 1;
    const int64_t want[2] = {c->M, 1};
    void *buf = NULL;
    if (check_ds(rd, "x_scale", ds, EL_F32, r2 ? 2 : 1, want,
                 r2 ? "(M, 1)" : "(M, or [M, 1])") != 0 ||
        read_ds(rd, "x_scale", ds, EL_F32, c->M, &buf) != 0)
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

static int read_all(rd_t *rd, case_t *c)
{
    char *schema = NULL;
    int r = read_str_attr(rd, rd->root, "schema", "schema", &schema);
    if (r < 0)
        return -1;
    if (r == 0)
        return fail(rd, "schema", "root attribute missing; expected schema = \"%s\"",
                    CASE_SCHEMA_V1);
    if (strcmp(schema, CASE_SCHEMA_V1) != 0) {
        fail(rd, "schema", "\"%.64s\" is not a supported schema; expected \"%s\"", schema,
             CASE_SCHEMA_V1);
        free(schema);
        return -1;
    }
    free(schema);

    if (read_int_attr(rd, "M", &c->M) || read_int_attr(rd, "N", &c->N) ||
        read_int_attr(rd, "K", &c->K))
        return -1;
    /* Every product below (M*K, N*K/2, M*N) is bounded by this. */
    if (case_check_dims(c->M, c->N, c->K, rd->path, rd->err) != 0)
        return -1;

    struct { const char *name; char **dst; } prov[] = {
        {"kernel_path", &c->kernel_path}, {"layer", &c->layer}, {"model", &c->model},
        {"capture_time", &c->capture_time}, {"env_flags", &c->env_flags},
        {"route", &c->route}, {"tp_rank", &c->tp_rank}, {"versions", &c->versions},
        {"gpu_arch", &c->gpu_arch}, {"extension_path", &c->extension_path},
        {"capture_time_source", &c->capture_time_source},
    };
    for (size_t i = 0; i < sizeof prov / sizeof prov[0]; i++)
        if (read_str_attr(rd, rd->root, prov[i].name, prov[i].name, prov[i].dst) < 0)
            return -1;
    if (c->route && strcmp(c->route, "w4a8") && strcmp(c->route, "w4a4"))
        return fail(rd, "route", "attribute is '%.40s'; expected \"w4a8\" or \"w4a4\"", c->route);

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

/* Maps the file HDF5 has open for map_ds; without a mapping (an empty or
 * unmappable file) every array is copied, so a failure here is no error. */
static void map_file(rd_t *rd, case_mapping_t *m)
{
    const int fd = open(rd->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    kr_error_t ignored = {{0}};
    if (case_mapping_map_fd(fd, rd->path, h5_used_bytes(rd->file), m, &ignored) == 0) {
        /* Replaced since HDF5 opened it: copy every array, from HDF5's file. */
        if (m->id.size != (uint64_t)rd->file_size) {
            case_mapping_unmap(m);
            close(fd);
            return;
        }
        rd->map = m;
    }
    close(fd);
}

static int case_maps_any_array(const case_t *c)
{
    const void *arrays[] = {c->x, c->x_bf16_in_file, c->x_fp8, c->x_scale, c->weight,
                            c->weight_scale, c->weight_ref, c->out, c->out_rerun, c->aiter,
                            c->weight_bf16, c->ref_recorded};
    for (size_t i = 0; i < sizeof arrays / sizeof arrays[0]; i++)
        if (case_mapping_holds(&c->mapping, arrays[i], 1))
            return 1;
    return 0;
}

static int read_case(const char *path, case_t *c, int defer_bf16_x, kr_error_t *err)
{
    if (!c)
        return kr_fail(err, "%s: case: NULL output; expected a case_t to fill",
                       path ? path : "(null)");
    memset(c, 0, sizeof *c);
    if (!path)
        return kr_fail(err, "(null): file: no path given; expected a case file path");

    struct stat st;
    if (file_stat_regular(path, "an existing HDF5 case file", &st, err))
        return -1;

    h5_quiet_t quiet;
    h5_quiet(&quiet);

    rd_t rd = {.path = path, .file = -1, .root = -1, .file_size = (int64_t)st.st_size,
               .err = err, .defer_bf16_x = defer_bf16_x};
    case_t tmp;
    memset(&tmp, 0, sizeof tmp);
    int rc = -1;

    static const h5_expect_t expect = {
        .not_hdf5 = "an HDF5 case file (schema " CASE_SCHEMA_V1 ")",
        .unreadable = "an HDF5 case file",
        .complete = "a complete HDF5 file",
    };
    rd.file = h5_open_readonly(path, &expect, err);
    if (rd.file < 0)
        goto done;
    rd.root = H5Gopen2(rd.file, "/", H5P_DEFAULT);
    if (rd.root < 0) {
        kr_fail(err, "%s: /: cannot open the root group (corrupt file?); expected a readable "
                     "root group", path);
        goto done;
    }
    /* Before any data is read: nothing may come from outside the file.  A
     * walk that a corrupt group stops is not a refusal: open_ds checks each
     * dataset it opens, and the reader names the corruption precisely. */
    if (h5_safety_check(rd.file, path, err) < 0)
        goto done;
    map_file(&rd, &tmp.mapping);
    if (read_all(&rd, &tmp) != 0)
        goto done;
    if (!case_maps_any_array(&tmp))
        case_mapping_unmap(&tmp.mapping);
    tmp.path = strdup(path);
    if (!tmp.path) {
        kr_fail(err, "%s: file: out of memory; expected to fit in memory", path);
        goto done;
    }
    *c = tmp;
    memset(&tmp, 0, sizeof tmp);
    rc = 0;
done:
    case_free(&tmp);
    H5_CLOSE_ALL(rd.root, rd.file);
    h5_restore(&quiet);
    return rc;
}

int case_read(const char *path, case_t *c, kr_error_t *err)
{
    return read_case(path, c, 0, err);
}

int case_read_for_image(const char *path, case_t *c, kr_error_t *err)
{
    return read_case(path, c, 1, err);
}
