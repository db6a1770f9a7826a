/* results_table: the /rows table of a results file, laid out from the field
 * table (result_fields.h), and read back by column name.
 *
 * Layout written (schema kreplay.results/2): /rows is a 1-D compound
 * dataset, one element per row, one member per COLUMN of the field table
 * (arrays expanded: "ulp.bins.3-4"), no sub-arrays, so that
 *     pandas.DataFrame(h5py.File(p)["rows"][:])
 * is a table with the same column names as results.csv.  Strings (and the
 * verdict, by name) are variable-length UTF-8; int64/uint64/int32 columns are
 * little-endian integers, except measured counts, which are float64 so that a
 * row without a measurement holds NaN there instead of 0 (exact up to 2^53);
 * doubles are IEEE float64, NaN and Inf kept.
 *
 * The reader also takes schema kreplay.results/1 files (fixed-length strings,
 * integer counts, ulp.bins as one int64[19] array member): every member is
 * matched BY NAME and converted from what the file holds; unknown members are
 * ignored, a missing non-optional field is an error naming the file and the
 * field.  Nothing crashes on a truncated or corrupt file: each failure is one
 * line in err ("<path>: /rows...: <problem>; expected <what>"). */
#ifndef KR_RESULTS_TABLE_H
#define KR_RESULTS_TABLE_H

#include <hdf5.h>
#include <stdint.h>

#include "kr_error.h"
#include "result.h"

/* Writes rows[0..n) as /rows of file, created with dcpl. */
int results_table_write(hid_t file, hid_t dcpl, const char *path, const result_t *rows,
                        int64_t n, kr_error_t *err);

/* Appends /rows of file to *out.  file_size: the file's bytes, to refuse a
 * truncated file before reading past its end. */
int results_table_read(hid_t file, const char *path, int64_t file_size, result_list_t *out,
                       kr_error_t *err);

/* The number of rows /rows of file holds, without reading them. */
int results_table_count(hid_t file, const char *path, int64_t *n, kr_error_t *err);

#endif
