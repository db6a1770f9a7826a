/* A stable order of result rows by any comparison, as an index permutation
 * (the rows are large: they are moved once, by the caller, if at all). */
#ifndef KR_RESULT_ORDER_H
#define KR_RESULT_ORDER_H

#include <stddef.h>
#include <stdint.h>

#include "result.h"

typedef int (*result_cmp_fn)(const result_t *a, const result_t *b);

/* The indices 0..n-1 ordered by cmp, equal rows in their original order
 * (bottom-up merge sort; no global state).  malloc'd, caller frees; NULL when
 * out of memory. */
int64_t *result_order(const result_t *rows, int64_t n, result_cmp_fn cmp);

/* One text column of a row, named by where it lies in result_t. */
typedef struct {
    size_t offset, size;
} result_text_key_t;

#define RESULT_TEXT_KEY(field) {offsetof(result_t, field), sizeof(((result_t *)0)->field)}

/* a and b compared column by column (strncmp), the first difference
 * deciding: the lexicographic order over keys[0..n-1]. */
int result_text_keys_cmp(const result_t *a, const result_t *b, const result_text_key_t *keys,
                         int n);

#endif
