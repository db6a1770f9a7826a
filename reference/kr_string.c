#include "kr_string.h"

#include <string.h>

size_t kr_strlcpy(char *dst, const char *src, size_t cap)
{
    if (!src)
        src = "";
    size_t len = strlen(src);
    if (cap == 0)
        return len;
    size_t n = len < cap - 1 ? len : cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
    return len;
}
