#include "case_name.h"

#include <stddef.h>
#include <string.h>

#include "kr_string.h"

void case_short_name(const char *path, char *buf, int cap)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    kr_strlcpy(buf, base, (size_t)cap);
    char *dot = strrchr(buf, '.');
    if (dot && dot != buf)
        *dot = '\0';
}
