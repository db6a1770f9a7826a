/* case_read_internal: what the parts of the case reader share
 * (case_read.c and the case_read_*.c files below it; case_io.h is the
 * reader's interface).
 *
 * The reader is split by layer, each file calling only those listed after
 * it:
 *   case_read.c           the file opened, checked for links and external
 *                         storage, mapped; schema, dims and provenance
 *   case_read_datasets.c  each dataset of a case, its dtype, shape and
 *                         attributes checked as it is read
 *   case_read_array.c     a dataset opened, checked against a dtype and
 *                         dims, read whole or used from the mapped file
 *   case_read_attr.c      string and integer attributes; a type named for
 *                         messages */
#ifndef KR_CASE_READ_INTERNAL_H
#define KR_CASE_READ_INTERNAL_H

#include <hdf5.h>
#include <stddef.h>
#include <stdint.h>

#include "case.h"
#include "case_mapping.h"
#include "kr_error.h"

/* The element types a case's arrays are stored as. */
typedef enum { EL_U8, EL_U16, EL_F32 } elem_t;

/* One file being read. */
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

#define MAX_RANK 8

/* ---- case_read_attr.c ---- */

/* The HDF5 type t in words ("uint16", "float64", "string"). */
void case_rd_type_desc(hid_t t, char *buf, size_t cap);

/* String attribute, variable- or fixed-length, into a malloc'd C string.
 * `label` is the object named in messages ("schema" for a root attribute,
 * the dataset's name for one of its attributes).  Returns 1 (found), 0
 * (absent: *out = NULL) or -1. */
int case_rd_read_str_attr(rd_t *rd, hid_t obj, const char *label, const char *name, char **out);

/* Required integer root attribute (any integer type), into int64. */
int case_rd_read_int_attr(rd_t *rd, const char *name, int64_t *out);

/* ---- case_read_array.c ---- */

/* 1 when the file type t is e (class, size and, for integers, unsigned). */
int case_rd_type_is(hid_t t, elem_t e);

/* Rank and dims of an open dataset; -1 when its dataspace is unreadable. */
int case_rd_ds_shape(hid_t ds, hsize_t dims[MAX_RANK]);

/* 1 and *ds open if root has a dataset `name`; 0 if no such link; -1 if the
 * lookup fails or `name` is something other than a dataset. */
int case_rd_open_ds(rd_t *rd, const char *name, hid_t *ds);

/* Checks that ds has dtype e and exactly the given dims; `expect` says in
 * words what the dims are ("(N, K/2)").  A dataset whose dtype is right but
 * whose shape is [a, 1] where [a] is wanted is not accepted here; callers
 * that allow alternatives check them first. */
int case_rd_check_ds(rd_t *rd, const char *name, hid_t ds, elem_t e, int rank,
                     const int64_t *want, const char *expect);

/* Allocates count elements of e (count already bounded by the dims checks)
 * and reads the whole dataset into it with e's native memory type, unless
 * the mapped file holds it as it is. */
int case_rd_read_ds(rd_t *rd, const char *name, hid_t ds, elem_t e, int64_t count, void **out);

/* A [d0, d1] array of e read whole once its dtype and dims match (and, for
 * bf16 bits, its dtype attribute says so). */
int case_rd_read_plain(rd_t *rd, const char *name, hid_t ds, elem_t e, int64_t d0, int64_t d1,
                       const char *expect, void **out);

/* ---- case_read_datasets.c ---- */

/* Every dataset of a case (M, N, K already read and checked), inputs
 * first, in the order their checks depend on each other, then the
 * outputs; the datasets that only come together checked together. */
int case_rd_read_datasets(rd_t *rd, case_t *c);

#endif
