#include "kr_string.h"

#include <stdio.h>
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

void kr_vappendf(char *buf, size_t cap, size_t *len, const char *fmt, va_list ap)
{
    if (cap == 0 || *len + 1 >= cap)
        return;
    const int w = vsnprintf(buf + *len, cap - *len, fmt, ap);
    if (w > 0)
        *len += (size_t)w < cap - *len ? (size_t)w : cap - *len - 1;
}

void kr_appendf(char *buf, size_t cap, size_t *len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kr_vappendf(buf, cap, len, fmt, ap);
    va_end(ap);
}
