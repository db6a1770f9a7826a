#include "array_grow.h"

#include <stdlib.h>
#include <string.h>

void *array_reserve_one(void *items, int64_t count, int64_t *cap, size_t elem, int64_t first_cap)
{
    if (count < *cap)
        return items;
    int64_t grown = *cap ? 2 * *cap : first_cap;
    void *p = realloc(items, (size_t)grown * elem);
    if (p)
        *cap = grown;
    return p;
}

void *array_reserve_one_or_free(void *items, int64_t count, int64_t *cap, size_t elem,
                                int64_t first_cap)
{
    void *p = array_reserve_one(items, count, cap, elem, first_cap);
    if (!p)
        free(items);
    return p;
}

char *array_append_strdup(char ***strings, int *count, int64_t *cap, int64_t first_cap, const char *s)
{
    char **grown = array_reserve_one(*strings, *count, cap, sizeof *grown, first_cap);
    if (!grown)
        return NULL;
    *strings = grown;
    char *copy = strdup(s);
    if (copy)
        grown[(*count)++] = copy;
    return copy;
}
