/* case_read_array: one dataset of a case file, for case_read
 * (case_read_internal.h): opened (never through a link or from outside
 * the file), its dtype and dims checked before a byte is allocated, then
 * read whole with a native memory type (HDF5 converts the byte order) or,
 * when the file holds it plainly, used from the mapped file.  Below the
 * datasets' own rules (case_read_datasets.c), above the attributes
 * (case_read_attr.c). */
#include "case_read_internal.h"

#include "h5_file.h"
#include "h5_safety.h"
#include "kr_alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int case_rd_type_is(hid_t t, elem_t e)
{
    H5T_class_t cls = H5Tget_class(t);
    size_t sz = H5Tget_size(t);
    if (e == EL_F32)
        return cls == H5T_FLOAT && sz == 4;
    return cls == H5T_INTEGER && sz == elem_size(e) && H5Tget_sign(t) == H5T_SGN_NONE;
}

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

/* ---- datasets ---- */

/* 1 and *ds open if root has a dataset `name`; 0 if no such link; -1 if the
 * lookup fails or `name` is something other than a dataset. */
int case_rd_open_ds(rd_t *rd, const char *name, hid_t *ds)
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
int case_rd_check_ds(rd_t *rd, const char *name, hid_t ds, elem_t e, int rank,
                     const int64_t *want, const char *expect)
{
    hsize_t dims[MAX_RANK];
    int frank = -1;
    hid_t ftype = H5Dget_type(ds), space = H5Dget_space(ds);
    int type_ok = 0, shape_ok = 0;
    char tdesc[64] = "an unreadable type", sdesc[256], wdesc[256];
    if (ftype >= 0) {
        case_rd_type_desc(ftype, tdesc, sizeof tdesc);
        type_ok = case_rd_type_is(ftype, e);
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
    const int rank = case_rd_ds_shape(ds, dims);
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
int case_rd_read_ds(rd_t *rd, const char *name, hid_t ds, elem_t e, int64_t count, void **out)
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
    int r = case_rd_read_str_attr(rd, ds, name, "dtype", &dt);
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

/* A [d0, d1] array of e read whole once its dtype and dims match (and, for
 * bf16 bits, its dtype attribute says so). */
int case_rd_read_plain(rd_t *rd, const char *name, hid_t ds, elem_t e, int64_t d0, int64_t d1,
                       const char *expect, void **out)
{
    const int64_t want[2] = {d0, d1};
    if (case_rd_check_ds(rd, name, ds, e, 2, want, expect) != 0 ||
        (e == EL_U16 && check_bf16_attr(rd, name, ds) != 0))
        return -1;
    return case_rd_read_ds(rd, name, ds, e, d0 * d1, out);
}

/* Rank and dims of an open dataset; -1 when its dataspace is unreadable. */
int case_rd_ds_shape(hid_t ds, hsize_t dims[MAX_RANK])
{
    hid_t space = H5Dget_space(ds);
    if (space < 0)
        return -1;
    int rank = space_shape(space, dims);
    H5Sclose(space);
    return rank;
}
