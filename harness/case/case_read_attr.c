/* case_read_attr: the attributes of a case file, read for case_read
 * (case_read_internal.h): string and integer attributes, refused by name
 * when they are not one value of the expected type, and a type named for
 * messages.  The lowest of the reader's parts: it calls none of them. */
#include "case_read_internal.h"

#include "h5_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- describing what was found, for messages ---- */

/* The type classes a message names by class alone. */
static const struct {
    H5T_class_t cls;
    const char *name;
} CLASS_ONLY_NAMES[] = {
    {H5T_STRING, "string"}, {H5T_COMPOUND, "compound"}, {H5T_ENUM, "enum"},
    {H5T_OPAQUE, "opaque"}, {H5T_ARRAY, "array"},       {H5T_VLEN, "vlen"},
};

void case_rd_type_desc(hid_t t, char *buf, size_t cap)
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
int case_rd_read_str_attr(rd_t *rd, hid_t obj, const char *label, const char *name, char **out)
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
        case_rd_type_desc(ftype, tdesc, sizeof tdesc);
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
int case_rd_read_int_attr(rd_t *rd, const char *name, int64_t *out)
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
            case_rd_type_desc(ftype, tdesc, sizeof tdesc);
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
