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

/* case_read for a case that only travels on as an image (case_image.h):
 * a bf16 x the file holds as it is stays there undecoded
 * (c->x_bf16_in_file, c->x NULL), for the image's reader to decode. */
int case_read_for_image(const char *path, case_t *c, kr_error_t *err);

/* Validates c and writes it to path atomically (a temporary file in the same
 * directory, then rename).  Object timestamps are not stored, so the same
 * case written twice gives the same bytes. */
int case_write(const char *path, const case_t *c, kr_error_t *err);

/* Checks a case in memory against the schema's rules (the same ones
 * case_read applies).  `what` names it in the message (usually its path). */
int case_validate(const case_t *c, const char *what, kr_error_t *err);

/* Frees everything the case owns, unmaps its file and zeroes it.  Safe on a
 * zeroed case. */
void case_free(case_t *c);

/* 1 when p is a buffer of c's own (to be freed), 0 when it is NULL or lies
 * in c's mapped file. */
int case_owns(const case_t *c, const void *p);

/* ---- Schema vocabulary and rules, shared by the reader, the validator and
 * the writer (and usable by tools that build cases, e.g. the generator). ---- */

/* Hard cap on the element count of any one array (M*K, N*K, M*N): a header
 * claiming more is refused before anything is allocated. */
#define CASE_MAX_ELEMENTS (INT64_C(1) << 40)

/* Attribute spellings of the enums ("checkpoint" / "fragment", "e4m3fn" /
 * "e4m3fnuz"; weight_scale's layout attribute is scale_layout_name()'s
 * "N,K/32" / "K/32,N").  The *_from_attr functions return 0 and set *out for
 * a known spelling, -1 otherwise. */
const char *case_weight_order_attr(weight_order_t o);
int case_weight_order_from_attr(const char *s, weight_order_t *out);
const char *case_fp8_format_attr(fp8_format_t f);
int case_fp8_format_from_attr(const char *s, fp8_format_t *out);

/* The dimension rules alone: M, N, K > 0, K % 32 == 0, and M*K, N*K, M*N
 * each at most CASE_MAX_ELEMENTS (computed without overflow).  `what` names
 * the file in the message. */
int case_check_dims(int64_t M, int64_t N, int64_t K, const char *what, kr_error_t *err);

/* a*b into *out; returns -1 (and leaves *out alone) if it overflows int64 or
 * either factor is negative. */
int case_mul_i64(int64_t a, int64_t b, int64_t *out);

#endif
