/* Opening an HDF5 file for reading the same way in every reader, with the
 * caller's words for what it expected, and HDF5's own stderr report off. */
#ifndef KR_H5_FILE_H
#define KR_H5_FILE_H

#include <hdf5.h>
#include <stdint.h>

#include "atomic_file.h"
#include "kr_error.h"

/* HDF5's default error handler, saved and switched off: every failure is
 * reported through kr_error_t instead of HDF5's stack dump on stderr. */
typedef struct {
    H5E_auto2_t func;
    void *data;
} h5_quiet_t;

void h5_quiet(h5_quiet_t *q);
void h5_restore(const h5_quiet_t *q);

/* A file-access property list with file locking off where the library can
 * do so: on a file system without locks (NFS, Lustre) HDF5 would otherwise
 * refuse the file.  -1 when HDF5 refuses; the caller closes it. */
hid_t h5_fapl_nolock(void);

/* What the caller expected, completing "...; expected %s" in the message
 * for each way the file can fail to open. */
typedef struct {
    const char *not_hdf5;     /* no HDF5 signature */
    const char *unreadable;   /* the signature check itself failed */
    const char *complete;     /* the signature is there but H5Fopen fails */
} h5_expect_t;

/* `path` opened read-only, after checking that it is HDF5 at all so a text
 * or empty file gets a plain message.  The file id, or -1 with err set. */
hid_t h5_open_readonly(const char *path, const h5_expect_t *expect, kr_error_t *err);

/* Each id of ids[0..n-1] that is open (>= 0) closed with the call its kind
 * needs, in the order given: the clean-up at the end of a reader or writer. */
void h5_close_ids(const hid_t *ids, int n);

#define H5_CLOSE_ALL(...)                                                                   \
    h5_close_ids((const hid_t[]){__VA_ARGS__},                                              \
                 (int)(sizeof((const hid_t[]){__VA_ARGS__}) / sizeof(hid_t)))

/* An HDF5 file created for an atomic write (atomic_file.h): under a fresh
 * temporary name in t's directory (opened once), exclusively (O_CREAT |
 * O_EXCL: a link planted at the name is never followed; another name is
 * drawn).  The file, or -1 (errno set; t->tmp_name empty when nothing of
 * ours is there). */
hid_t h5_create_exclusive(atomic_target_t *t, hid_t fcpl, hid_t fapl);

/* The bytes of an open file that HDF5 has allocated (its end of allocated
 * space: everything the file's objects use lies below it), or 0 when
 * unknown.  A file padded past it (a sparse 8 GiB file around 18 KiB) is
 * judged by what lies below it. */
uint64_t h5_used_bytes(hid_t file);

#endif
