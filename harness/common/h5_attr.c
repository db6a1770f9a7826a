#include "h5_attr.h"
#include "h5_file.h"

/* A copy of the C string type with two properties set: its size, then
 * padding or character set. */
static hid_t str_type_with(herr_t (*set)(hid_t, size_t), size_t arg, herr_t (*set2)(hid_t, int),
                           int arg2)
{
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0)
        return -1;
    if (set(t, arg) < 0 || set2(t, arg2) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

static herr_t set_strpad(hid_t t, int pad)
{
    return H5Tset_strpad(t, (H5T_str_t)pad);
}

static herr_t set_cset(hid_t t, int cset)
{
    return H5Tset_cset(t, (H5T_cset_t)cset);
}

hid_t h5_fixed_str_type(size_t size)
{
    return str_type_with(H5Tset_size, size, set_strpad, H5T_STR_NULLTERM);
}

hid_t h5_vlen_utf8_type(void)
{
    return str_type_with(H5Tset_size, H5T_VARIABLE, set_cset, H5T_CSET_UTF8);
}

int h5_write_scalar_attr(hid_t obj, const char *name, hid_t file_type, hid_t mem_type,
                         const void *value)
{
    hid_t space = H5Screate(H5S_SCALAR), attr = -1;
    int rc = -1;
    if (file_type < 0 || space < 0)
        goto done;
    attr = H5Acreate2(obj, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (attr < 0 || H5Awrite(attr, mem_type, value) < 0)
        goto done;
    rc = 0;
done:
    H5_CLOSE_ALL(attr, space);
    return rc;
}

int h5_write_str_attr(hid_t obj, const char *name, const char *value)
{
    const hid_t type = h5_vlen_utf8_type();
    const int rc = h5_write_scalar_attr(obj, name, type, type, &value);
    H5_CLOSE_ALL(type);
    return rc;
}
