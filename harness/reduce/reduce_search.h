/* The two searches of a reduction, over sets of item indices, knowing
 * nothing of cases: the caller's test says whether a set keeps the failure.
 *
 * search_ddmin is delta debugging (Zeller and Hildebrandt, "Simplifying and
 * Isolating Failure-Inducing Input", 2002): the set is cut into n chunks;
 * a chunk that fails alone becomes the set (n back to 2), else a
 * complement that fails does (n - 1), else the chunks are halved, until
 * every single item has been tried.  What is left is 1-minimal: removing
 * any one of its items loses the failure.  Sets smaller than min_keep are
 * never tried (a kernel's smallest M).
 *
 * search_simplify grows the set of items that can be simplified: all of
 * them at once, then halves, quarters, ... of those that could not, down
 * to single items; each test is handed the whole set (those already taken
 * and the chunk tried).
 *
 * Chunks are tried in order for seed 0; another seed shuffles the order of
 * each round (splitmix64), so the result depends on the items, the test
 * and the seed alone. */
#ifndef KR_REDUCE_SEARCH_H
#define KR_REDUCE_SEARCH_H

#include <stdint.h>

/* What a test and a search return besides 1 (the set keeps the failure;
 * the caller took it) and 0 (it does not). */
#define SEARCH_STOP (-2)    /* the budget is spent: keep what was found */
#define SEARCH_ERROR (-1)   /* the caller's err says why */

typedef int (*search_test_fn)(void *ctx, const int64_t *set, int64_t n);

/* Shrinks items[0..*n) in place (order kept).  Returns 0, SEARCH_STOP or
 * SEARCH_ERROR; *n is the size of the smallest failing set found. */
int search_ddmin(int64_t *items, int64_t *n, int64_t min_keep, uint64_t seed, search_test_fn test,
                 void *ctx);

/* Returns 0, SEARCH_STOP or SEARCH_ERROR; *taken: how many items the
 * accepted set holds. */
int search_simplify(const int64_t *items, int64_t n, uint64_t seed, search_test_fn test, void *ctx,
                    int64_t *taken);

#endif
