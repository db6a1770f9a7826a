/* The one growth rule for the doubling arrays the harness and the reports
 * keep (rows, groups, names): room for one more element. */
#ifndef KR_ARRAY_GROW_H
#define KR_ARRAY_GROW_H

#include <stddef.h>
#include <stdint.h>

/* `items` (count elements of elem bytes, room for *cap) with room for at
 * least count + 1: items itself when there is room, else a reallocation to
 * twice *cap (first_cap for an empty array) with *cap updated.  NULL when
 * out of memory; then items and *cap are untouched and still valid. */
void *array_reserve_one(void *items, int64_t count, int64_t *cap, size_t elem, int64_t first_cap);

/* As array_reserve_one, but on failure items is freed: for an array built
 * in a local variable and dropped whole when it cannot grow. */
void *array_reserve_one_or_free(void *items, int64_t count, int64_t *cap, size_t elem,
                                int64_t first_cap);

#endif
