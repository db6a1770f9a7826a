/* h5_safety: refuses an HDF5 file that would make a reader touch anything
 * outside the file itself, before any dataset's data is read.
 *
 * HDF5 lets a file point elsewhere in four ways, each of which would let a
 * hostile case copy foreign bytes into kreplay's outputs (a --save-outputs
 * file is a CI artifact) or read a device (/dev/urandom) forever:
 *   - external raw storage: a dataset's bytes live in other files
 *     (H5Pget_external_count > 0), any path, relative ones included;
 *   - external links (H5L_TYPE_EXTERNAL): an object of another HDF5 file;
 *   - user-defined link types: resolved by code kreplay does not know;
 *   - virtual datasets (H5D_VIRTUAL): data mapped from other files;
 * and a soft link that resolves to an object of another file.  Every link
 * reachable from the root is checked; the first offender is named:
 *   "FILE: dataset /x uses external raw storage (/etc/passwd); refused". */
#ifndef KR_H5_SAFETY_H
#define KR_H5_SAFETY_H

#include <hdf5.h>

#include "kr_error.h"

/* 0 when nothing reachable from `file`'s root leaves the file; -1 with err
 * set ("<path>: <object> ...; refused") when something does; 1 with err set
 * when the walk could not finish (a corrupt group or object header): then
 * nothing was found, and a reader that goes on must check every object it
 * opens with h5_safety_check_object.  Reads link values and dataset creation
 * properties only, never a dataset's data.  HDF5's automatic error printing
 * should be off (every reader here turns it off). */
int h5_safety_check(hid_t file, const char *path, kr_error_t *err);

/* The same for the one link `name` in group `loc`, before it is opened: 0
 * when it is a hard link, or a soft link that resolves inside the file
 * (resolved with external-link traversal denied), to anything but a dataset
 * on external or virtual storage, or when there is no such link; -1 with
 * err set otherwise. */
int h5_safety_check_object(hid_t loc, const char *name, const char *path, kr_error_t *err);

/* 0 when the open dataset ds has its data written (or holds no element);
 * -1 with err ("<path>: dataset /NAME: no storage allocated (never written:
 * it would read as its fill value); refused") when none of it, or only
 * some of its chunks, were ever written: a dataset created and not filled
 * reads back as zeros, which a replay would take for real operands. */
int h5_check_written(hid_t ds, const char *name, const char *path, kr_error_t *err);

#endif
