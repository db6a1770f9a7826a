#include "result_order.h"

#include <stdlib.h>
#include <string.h>

int64_t *result_order(const result_t *rows, int64_t n, result_cmp_fn cmp)
{
    int64_t *a = malloc((size_t)(n ? n : 1) * sizeof *a);
    int64_t *b = malloc((size_t)(n ? n : 1) * sizeof *b);
    if (!a || !b) {
        free(a);
        free(b);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        a[i] = i;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                b[k++] = cmp(&rows[a[j]], &rows[a[i]]) < 0 ? a[j++] : a[i++];
            while (i < mid)
                b[k++] = a[i++];
            while (j < hi)
                b[k++] = a[j++];
        }
        int64_t *t = a;
        a = b;
        b = t;
    }
    free(b);
    return a;
}

int result_text_keys_cmp(const result_t *a, const result_t *b, const result_text_key_t *keys,
                         int n)
{
    for (int i = 0; i < n; i++) {
        int c = strncmp((const char *)a + keys[i].offset, (const char *)b + keys[i].offset,
                        keys[i].size);
        if (c)
            return c;
    }
    return 0;
}
