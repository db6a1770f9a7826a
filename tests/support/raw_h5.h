/* Malformed case files for the case reader's tests (test_case_io.c,
 * test_case_io_refusals.c), built with the HDF5 C API directly, never with
 * the writer, which refuses to make them: a template of every dataset of a
 * valid case (raw_default) that a test changes -- a dataset dropped, its
 * type, shape, attributes or storage changed, the dimensions' attributes
 * missing or mistyped -- before writing it (raw_write) and reading it back.
 * Include after <cmocka.h>. */
#ifndef KR_RAW_H5_H
#define KR_RAW_H5_H
#include <hdf5.h>
#include <stdint.h>

#include "case_io.h"

#define RAW_MAX_DS 12

typedef struct {
    const char *name;
    int present;
    hid_t type;                 /* file type; 0 = the schema's default */
    int rank;
    hsize_t dims[3];
    const char *attr[2][2];     /* {name, value}; name NULL = unused */
    const void *data;           /* in `type`'s own byte layout; NULL = random */
    int chunked;                /* stored in chunks of one row, not contiguously */
} raw_ds_t;

typedef struct {
    const char *schema;         /* NULL: no schema attribute */
    int have_M, have_N, have_K;
    int64_t M, N, K;
    hid_t dim_type;             /* type of the M/N/K attributes */
    int fixed_strings;          /* write string attributes fixed-length ASCII */
    hsize_t userblock;          /* bytes before the HDF5 data (0: none) */
    raw_ds_t ds[RAW_MAX_DS];
    int nds;
} raw_t;

/* Dataset `name` appended to the template (attributes and data unset). */
raw_ds_t *raw_add(raw_t *r, const char *name, hid_t type, int rank, hsize_t d0, hsize_t d1);

/* The template's dataset `name`; fails the test when there is none. */
raw_ds_t *raw_ds(raw_t *r, const char *name);

/* A valid case of every dataset (checked by test_raw_template_is_valid). */
void raw_default(raw_t *r, int64_t M, int64_t N, int64_t K);

/* The layout r written as path: random bytes (seed) where a dataset has no
 * data of its own. */
void raw_write(const char *path, const raw_t *r, uint64_t seed);

/* Writes the template with one change applied by the caller, then expects
 * case_read to refuse it with the given phrases. */
#define M0 5
#define N0 48
#define K0 64

void raw_expect_fail(const raw_t *r, const char *tag, const char *n1, const char *n2,
                     const char *n3);

/* The layout R written to a fresh file named after TAG (its path in
 * path[512]) and read back into *c; fails the test when the reader refuses it. */
void raw_read_ok(const raw_t *r, const char *tag, uint64_t seed, char *path, case_t *c);

/* raw_default at M x N x K, written (TAG, SEED) and read into *c. */
void raw_default_read_ok(int64_t M, int64_t N, int64_t K, const char *tag, uint64_t seed,
                         char *path, case_t *c);

/* The default layout (raw_default at M0 x N0 x K0) without dataset `ds`. */
void raw_default_without(raw_t *r, const char *ds);

#endif
