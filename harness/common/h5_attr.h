/* HDF5 string types, and attributes written the way h5py reads them back. */
#ifndef KR_H5_ATTR_H
#define KR_H5_ATTR_H

#include <hdf5.h>

/* A scalar variable-length UTF-8 string attribute: what h5py writes for a
 * str, and reads back as str.  0, or -1 when HDF5 refuses. */
int h5_write_str_attr(hid_t obj, const char *name, const char *value);
/* A scalar attribute `name` of file_type, written from *value as mem_type;
 * 0 or -1 (nothing reported: the caller names the file). */
int h5_write_scalar_attr(hid_t obj, const char *name, hid_t file_type, hid_t mem_type,
                         const void *value);

/* A fixed-length string type of `size` bytes, NUL-terminated; -1 when HDF5
 * refuses.  The caller closes it. */
hid_t h5_fixed_str_type(size_t size);

/* The variable-length UTF-8 string type h5py uses for str; -1 when HDF5
 * refuses.  The caller closes it. */
hid_t h5_vlen_utf8_type(void);

#endif
