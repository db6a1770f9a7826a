#include "reduce_search.h"

#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* order[0..n) = 0..n-1, shuffled unless seed is 0. */
static void chunk_order(int64_t *order, int64_t n, uint64_t seed, uint64_t round)
{
    for (int64_t i = 0; i < n; i++)
        order[i] = i;
    if (seed == 0)
        return;
    uint64_t s = seed ^ (round * 0xD1B54A32D192ED03ull);
    for (int64_t i = n - 1; i > 0; i--) {
        const int64_t j = (int64_t)(splitmix64(&s) % (uint64_t)(i + 1));
        const int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

static int cmp_i64(const void *a, const void *b)
{
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Chunk i of `parts` over n items: [*lo, *hi). */
static void chunk_bounds(int64_t n, int64_t parts, int64_t i, int64_t *lo, int64_t *hi)
{
    *lo = i * n / parts;
    *hi = (i + 1) * n / parts;
}

/* One round at `parts` chunks: 1 when a subset or complement was taken
 * (items, *n and *parts updated), 0 when none failed, or a stop/error. */
static int ddmin_round(int64_t *items, int64_t *n, int64_t *parts, int64_t min_keep, uint64_t seed,
                       uint64_t round, int64_t *order, int64_t *cand, search_test_fn test, void *ctx)
{
    chunk_order(order, *parts, seed, round);
    for (int pass = 0; pass < 2; pass++) {
        /* Complements equal the other chunk when there are two. */
        if (pass == 1 && *parts == 2)
            break;
        for (int64_t j = 0; j < *parts; j++) {
            int64_t lo, hi, m = 0;
            chunk_bounds(*n, *parts, order[j], &lo, &hi);
            if (pass == 0) {
                memcpy(cand, items + lo, (size_t)(hi - lo) * sizeof *cand);
                m = hi - lo;
            } else {
                memcpy(cand, items, (size_t)lo * sizeof *cand);
                memcpy(cand + lo, items + hi, (size_t)(*n - hi) * sizeof *cand);
                m = *n - (hi - lo);
            }
            if (m < min_keep || m == 0 || m == *n)
                continue;
            const int r = test(ctx, cand, m);
            if (r < 0)
                return r;
            if (r == 1) {
                memcpy(items, cand, (size_t)m * sizeof *cand);
                *n = m;
                *parts = pass == 0 ? 2 : (*parts - 1 > 2 ? *parts - 1 : 2);
                return 1;
            }
        }
    }
    return 0;
}

int search_ddmin(int64_t *items, int64_t *n, int64_t min_keep, uint64_t seed, search_test_fn test,
                 void *ctx)
{
    if (*n < 2)
        return 0;
    int64_t *order = malloc((size_t)*n * sizeof *order), *cand = malloc((size_t)*n * sizeof *cand);
    int rc = 0;
    if (!order || !cand) {
        rc = SEARCH_ERROR;
        goto done;
    }
    int64_t parts = 2;
    for (uint64_t round = 0; *n >= 2; round++) {
        if (parts > *n)
            parts = *n;
        const int r = ddmin_round(items, n, &parts, min_keep, seed, round, order, cand, test, ctx);
        if (r < 0) {
            rc = r;
            break;
        }
        if (r == 0) {
            if (parts >= *n)
                break;
            parts = 2 * parts < *n ? 2 * parts : *n;
        }
    }
done:
    free(order);
    free(cand);
    return rc;
}

int search_simplify(const int64_t *items, int64_t n, uint64_t seed, search_test_fn test, void *ctx,
                    int64_t *taken)
{
    *taken = 0;
    if (n == 0)
        return 0;
    int64_t *pending = malloc((size_t)n * sizeof *pending), *set = malloc((size_t)n * sizeof *set),
            *order = malloc((size_t)n * sizeof *order), *next = malloc((size_t)n * sizeof *next);
    int rc = 0;
    if (!pending || !set || !order || !next) {
        rc = SEARCH_ERROR;
        goto done;
    }
    memcpy(pending, items, (size_t)n * sizeof *pending);
    int64_t n_pending = n, chunk = n;
    for (uint64_t round = 0; n_pending > 0 && rc == 0; round++) {
        const int64_t parts = (n_pending + chunk - 1) / chunk;
        int64_t n_next = 0;
        chunk_order(order, parts, seed, round);
        for (int64_t j = 0; j < parts && rc == 0; j++) {
            const int64_t lo = order[j] * chunk;
            const int64_t hi = lo + chunk < n_pending ? lo + chunk : n_pending;
            memcpy(set + *taken, pending + lo, (size_t)(hi - lo) * sizeof *set);
            const int r = test(ctx, set, *taken + hi - lo);
            if (r < 0)
                rc = r;
            else if (r == 1)
                *taken += hi - lo;
            else
                for (int64_t i = lo; i < hi; i++)
                    next[n_next++] = pending[i];
        }
        if (rc != 0 || chunk == 1)
            break;
        /* What could not be taken, in item order, in chunks half as large. */
        memcpy(pending, next, (size_t)n_next * sizeof *pending);
        n_pending = n_next;
        qsort(pending, (size_t)n_pending, sizeof *pending, cmp_i64);
        chunk = (chunk + 1) / 2;
    }
done:
    free(pending);
    free(set);
    free(order);
    free(next);
    return rc;
}
