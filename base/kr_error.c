#include "kr_error.h"

#include <stdio.h>

#include "kr_string.h"

int kr_fail(kr_error_t *err, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
        /* Names come from files: a newline, CR or escape sequence in one
         * must neither split the line nor reach a terminal raw. */
        kr_str_printable(err->msg, err->msg, sizeof err->msg);
    }
    return -1;
}

int kr_fail_at(kr_error_t *err, const char *where, const char *what, const char *fmt, ...)
{
    if (!err)
        return -1;
    char problem[KR_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(problem, sizeof problem, fmt, ap);
    va_end(ap);
    return kr_fail(err, "%s: %s: %s", where, what, problem);
}
