/* Error reporting shared by every component.
 *
 * A failing function fills a kr_error_t with one human-readable line (file,
 * dataset, what was expected) and returns nonzero.  The CLI prints that line
 * and exits 2.  Nothing here allocates, so it is safe on every error path.
 * The line is always one printable line: control characters and bytes
 * that are not UTF-8 in it (from a name a file held) become '?'
 * (kr_str_printable). */
#ifndef KR_ERROR_H
#define KR_ERROR_H

#include <stdarg.h>

#define KR_ERROR_MSG_MAX 1024

typedef struct {
    char msg[KR_ERROR_MSG_MAX];
} kr_error_t;

/* Formats into err->msg (if err is not NULL) and returns -1, so callers can
 * write `return kr_fail(err, "...", ...);`. */
int kr_fail(kr_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The same with the message "<where>: <what>: <problem>" (a file and the
 * dataset, key or record in it), the form every reader's errors take. */
int kr_fail_at(kr_error_t *err, const char *where, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
