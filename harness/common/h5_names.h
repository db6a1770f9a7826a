/* Names of HDF5 things for error messages. */
#ifndef KR_H5_NAMES_H
#define KR_H5_NAMES_H

#include <hdf5.h>

/* "integer", "float", "string", ...: what a dataset's type class is. */
const char *h5_class_name(H5T_class_t c);

#endif
