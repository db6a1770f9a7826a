/* The one growth rule for the doubling arrays the harness and the reports
 * keep (rows, groups, names): room for one more element. */
#ifndef KR_ARRAY_GROW_H
#define KR_ARRAY_GROW_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* `items` (count elements of elem bytes, room for *cap) with room for at
 * least count + 1: items itself when there is room, else a reallocation to
 * twice *cap (first_cap for an empty array) with *cap updated.  NULL when
 * out of memory; then items and *cap are untouched and still valid. */
void *array_reserve_one(void *items, int64_t count, int64_t *cap, size_t elem, int64_t first_cap);

/* As array_reserve_one, but on failure items is freed: for an array built
 * in a local variable and dropped whole when it cannot grow. */
void *array_reserve_one_or_free(void *items, int64_t count, int64_t *cap, size_t elem,
                                int64_t first_cap);

/* Appends a copy of s to the string array *strings (*count used, *cap of
 * room), growing it by array_reserve_one.  Returns the copy, now its last
 * element, or NULL when out of memory: then *count is as it was and
 * nothing leaks (the array may have grown). */
char *array_append_strdup(char ***strings, int *count, int64_t *cap, int64_t first_cap, const char *s);

/* Appends one zeroed element to ARR (an lvalue pointer; COUNT elements
 * used, CAP of room, both lvalues), growing it by array_reserve_one: the
 * expression is the new element, or NULL when out of memory (then the array
 * and its counts are untouched).  A macro for the element type; evaluates
 * its arguments more than once. */
#define ARRAY_APPEND_ZEROED(arr, count, cap, first_cap)                                          \
    __extension__({                                                                              \
        __typeof__(arr) kr_grown_ = array_reserve_one((arr), (count), &(cap), sizeof *(arr),     \
                                                      (first_cap));                              \
        __typeof__(arr) kr_added_ = NULL;                                                        \
        if (kr_grown_) {                                                                         \
            (arr) = kr_grown_;                                                                   \
            kr_added_ = &(arr)[(count)++];                                                       \
            memset(kr_added_, 0, sizeof *kr_added_);                                             \
        }                                                                                        \
        kr_added_;                                                                               \
    })

#endif
