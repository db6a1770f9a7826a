/* Reading, validating and writing schema-v1 case files (cases/SCHEMA.md). */
#ifndef KR_CASE_IO_H
#define KR_CASE_IO_H

#include "case.h"

/* Reads and validates a case.  On any problem (not an HDF5 file, truncated or
 * corrupt, missing dataset, wrong dtype, shape contradicting M/N/K, K not a
 * multiple of 32, ...) returns -1 with err->msg holding one line that names
 * the file, the dataset and what was expected; *c is then left empty.
 * HDF5's own error stack is never printed. */
int case_read(const char *path, case_t *c, kr_error_t *err);

/* Validates c and writes it to path atomically (a temporary file in the same
 * directory, then rename).  Object timestamps are not stored, so the same
 * case written twice gives the same bytes. */
int case_write(const char *path, const case_t *c, kr_error_t *err);

/* Checks a case in memory against the schema's rules (the same ones
 * case_read applies).  `what` names it in the message (usually its path). */
int case_validate(const case_t *c, const char *what, kr_error_t *err);

/* Frees everything the case owns and zeroes it.  Safe on a zeroed case. */
void case_free(case_t *c);

#endif
