/* Writing HDF5 attributes the way h5py reads them back. */
#ifndef KR_H5_ATTR_H
#define KR_H5_ATTR_H

#include <hdf5.h>

/* A scalar variable-length UTF-8 string attribute: what h5py writes for a
 * str, and reads back as str.  0, or -1 when HDF5 refuses. */
int h5_write_str_attr(hid_t obj, const char *name, const char *value);

#endif
