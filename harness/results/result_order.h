/* A stable order of result rows by any comparison, as an index permutation
 * (the rows are large: they are moved once, by the caller, if at all). */
#ifndef KR_RESULT_ORDER_H
#define KR_RESULT_ORDER_H

#include <stdint.h>

#include "result.h"

typedef int (*result_cmp_fn)(const result_t *a, const result_t *b);

/* The indices 0..n-1 ordered by cmp, equal rows in their original order
 * (bottom-up merge sort; no global state).  malloc'd, caller frees; NULL when
 * out of memory. */
int64_t *result_order(const result_t *rows, int64_t n, result_cmp_fn cmp);

#endif
