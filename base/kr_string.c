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

int kr_utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    int n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        n = 2;
        min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        min = 0x10000;
    } else {
        return 0;
    }
    unsigned cp = c & (0x7F >> n);
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

void kr_str_printable(const char *s, char *out, size_t cap)
{
    if (cap == 0)
        return;
    size_t o = 0;
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        const int n = kr_utf8_len(p);
        /* C1 controls are the two-byte sequences C2 80 - C2 9F. */
        const int control = *p < 0x20 || *p == 0x7F || (n == 2 && p[0] == 0xC2 && p[1] < 0xA0);
        if (control || n == 0) {
            if (o + 1 >= cap)
                break;
            out[o++] = '?';
            p += n ? n : 1;
            continue;
        }
        if (o + (size_t)n >= cap)
            break;
        memmove(out + o, p, (size_t)n);
        o += (size_t)n;
        p += n;
    }
    out[o] = '\0';
}
