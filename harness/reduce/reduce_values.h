/* Simpler operand values for a reduced case: the last phase of a reduction
 * sets parts of the operands to plain values while the failure holds, so
 * what is left to read is what the failure needs.
 *
 * Each kind has units (a 32-block of one activation row, of one weight row,
 * a scale byte, a row's x_scale) and one simple value per unit.  Applying a
 * kind keeps every operand consistent: an activation block set to zero is
 * zero in x and in the recorded fp8 codes alike, a weight block is set in
 * checkpoint order (a fragment-order weight is permuted again).  The "one
 * code" kinds keep the non-finite elements of a block (a NaN the failure
 * needs stays, its neighbours become plain); the zero kinds remove them. */
#ifndef KR_REDUCE_VALUES_H
#define KR_REDUCE_VALUES_H

#include <stdint.h>

#include "case.h"
#include "kr_error.h"

typedef enum {
    SIMPLIFY_X_ZERO = 0,  /* activation block (row m, 32-block b): x = 0, fp8 code 0 */
    SIMPLIFY_W_ZERO,      /* weight block (weight row n, 32-block b): e2m1 codes 0, bf16 0 */
    SIMPLIFY_SCALE_127,   /* weight scale byte (n, b): 127, i.e. 2^0 */
    SIMPLIFY_XSCALE_ONE,  /* row m's x_scale: 1 (and x the value of its fp8 codes) */
    SIMPLIFY_X_ONE,       /* activation block: every finite element the code of 1 */
    SIMPLIFY_W_ONE,       /* weight block: every element the code of 1 (e2m1 0x2, bf16 1.0) */
    SIMPLIFY_COUNT
} simplify_kind_t;

/* "activation blocks set to zero", ... for the log. */
const char *simplify_kind_name(simplify_kind_t k);

/* How many units the kind has in c (0 when c lacks the operand). */
int64_t simplify_unit_count(const case_t *c, simplify_kind_t k);

/* The units of c that are not simple yet (not already the kind's value,
 * nor zero for the "one code" kinds) into units (capacity
 * simplify_unit_count); returns how many. */
int64_t simplify_pending_units(const case_t *c, simplify_kind_t k, int64_t *units);

/* Sets units of c (which must own its arrays: reduce_copy) to the kind's
 * value.  Returns 0, or -1 with err. */
int simplify_apply(case_t *c, simplify_kind_t k, const int64_t *units, int64_t n, kr_error_t *err);

#endif
