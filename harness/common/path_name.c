/* path_name: one safe path component from untrusted text (path_name.h). */
#include "path_name.h"

static int keeps(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == ':' || c == '+' || c == '-';
}

void path_component(const char *in, char *out, size_t cap)
{
    if (!out || cap < 2)
        return;
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)(in ? in : ""); *p && o + 1 < cap; p++) {
        const int leading_dot = o == 0 && *p == '.';
        out[o++] = keeps(*p) && !leading_dot ? (char)*p : '_';
    }
    if (o == 0)
        out[o++] = '_';
    out[o] = '\0';
}
