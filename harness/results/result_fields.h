/* result_fields: ONE table describing every member of result_t (result.h).
 *
 * The HDF5 results file (results_store.c), the full-width CSV and the flat
 * JSON object below are all generated from this table, so adding a member to
 * result_t is one line in result_fields.c (F_I64(new_member), ...).  The
 * table is checked at compile time (each line's type must match the member's
 * C type) and at run time (result_fields_check: no byte of result_t other
 * than alignment padding is left undescribed).
 *
 * Field names are the C access paths: "case_path", "metrics.rel_fro",
 * "metrics.out_nf.nan", "ulp.bins".  A field is one COLUMN, an array one
 * column per element ("ulp.bins.3-4").  The column names are the HDF5
 * compound member names, the CSV header and the JSON keys (JSON nests at each
 * '.', so pandas.json_normalize gives back the same names): one name per
 * column in every output.
 *
 * MISSING values: a row that compared nothing (reference "-": UNSUPPORTED,
 * ERROR, CRASHED, ...) has no measurement, so its measured fields (metrics,
 * ULP statistics, threshold, fp64 oracle) are missing, never 0: empty in CSV,
 * null in JSON, NaN in HDF5 (measured integer columns are float64 there for
 * that reason; exact up to 2^53). */
#ifndef KR_RESULT_FIELDS_H
#define KR_RESULT_FIELDS_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "kr_error.h"
#include "result.h"

typedef enum {
    RF_STR,       /* char[size], NUL-terminated (the last byte is always forced to NUL) */
    RF_I64,       /* int64_t */
    RF_U64,       /* uint64_t */
    RF_INT,       /* int (stored as a 32-bit signed integer) */
    RF_F64,       /* double; NaN and +-Inf kept */
    RF_VERDICT,   /* verdict_t, stored BY NAME ("PASS", "WRONG", ...) so the enum may grow */
    RF_I64_ARRAY  /* int64_t[count] */
} rf_type_t;

/* Size of the fixed string a verdict name is stored in. */
#define RF_VERDICT_STRLEN 24

typedef struct {
    const char *name;       /* "metrics.rel_fro" */
    rf_type_t type;
    size_t offset;          /* offsetof(result_t, ...) */
    size_t size;            /* bytes of the member in result_t */
    int count;              /* elements (RF_I64_ARRAY), 1 otherwise */
    const char *(*elem_label)(int i);  /* RF_I64_ARRAY: column label of element i, or NULL */
    int optional;           /* a reader fills the result_list_add default when a file lacks it
                               (set it on fields added after schema kreplay.results/1, so
                               older files stay readable); 0: a missing field is an error */
    int measured;           /* 1: the value of a comparison, missing in a row that made none */
} result_field_t;

/* Longest column name ("ulp.bins.>32768" and the like), with its NUL. */
#define RF_COLUMN_NAME_MAX 96

extern const result_field_t result_fields[];
extern const int result_field_count;

/* The field of that name, or NULL. */
const result_field_t *result_field_find(const char *name);

/* 0 if the table covers every member of result_t (only alignment padding
 * undescribed); otherwise fills err with the first undescribed byte range. */
int result_fields_check(kr_error_t *err);

/* Does the row hold a measurement (it compared an output with something)?
 * 0 for the note rows of UNSUPPORTED / ERROR / CRASHED kernels (reference "-"). */
int result_has_measurement(const result_t *r);
/* Is field f missing in row r (measured field, row without a measurement)? */
int result_field_missing(const result_field_t *f, const result_t *r);

/* Columns of a field: 1, or count for an array. */
int result_field_columns(const result_field_t *f);
/* Name of column e of f ("metrics.rel_fro", "ulp.bins.3-4") into buf. */
void result_column_name(const result_field_t *f, int e, char *buf, size_t cap);

/* Name of a type, for messages ("string", "int64", ...). */
const char *rf_type_name(rf_type_t t);

/* Verdict from its name ("PASS"); -1 if unknown. */
int verdict_from_name(const char *name);

/* v as "%.*g" with `digits` significant digits, except that every NaN is
 * "nan": printf writes "-nan" for one with its sign bit set, and the CSV,
 * the tables and the HTML report each spell a missing value the same way.
 * Returns buf; RESULT_NUMBER_CHARS holds any double at 17 digits. */
#define RESULT_NUMBER_CHARS 32
const char *result_format_number(char *buf, size_t cap, int digits, double v);

/* Full-width CSV: one column per column of the table, header from the
 * column names.  Doubles are %.17g ("nan", "inf", "-inf"), strings quoted
 * with "" doubling, verdicts by name, missing values empty. */
void result_fields_csv_header(FILE *fp);
void result_fields_csv_row(FILE *fp, const result_t *r);
void result_fields_csv_write(FILE *fp, const result_list_t *rows);

/* The row as a JSON object nested at each '.' of the column names:
 * {"case_path": ..., "metrics": {"rel_fro": ..., "out_nf": {"nan": ..}},
 *  "ulp": {"bins": {"0": .., "3-4": ..}}}.  JSON has no NaN/Inf: a non-finite
 * double is null, and so is a missing value. */
json_t *result_fields_json(const result_t *r);

#endif
