/* Bounded string copy: display strings (names, notes, paths in result rows)
 * are cut at their field's size on purpose, and this says so where snprintf
 * would draw a truncation warning. */
#ifndef KR_STRING_H
#define KR_STRING_H

#include <stdarg.h>
#include <stddef.h>

/* Copies at most cap-1 bytes of src (NULL counts as "") and terminates dst.
 * Returns the length of src, so a caller can tell that it was cut. */
size_t kr_strlcpy(char *dst, const char *src, size_t cap);

/* Appends printf-style text to buf at *len (cut at cap-1 bytes, always
 * terminated) and advances *len: a line built in pieces. */
__attribute__((format(printf, 4, 5)))
void kr_appendf(char *buf, size_t cap, size_t *len, const char *fmt, ...);
void kr_vappendf(char *buf, size_t cap, size_t *len, const char *fmt, va_list ap);

#endif
