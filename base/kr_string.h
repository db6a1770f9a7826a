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

/* Length (1-4) of the valid UTF-8 sequence at p, or 0 when there is none
 * (overlong forms, surrogates and code points past U+10FFFF are not valid). */
int kr_utf8_len(const unsigned char *p);

/* s made inert for a terminal, into out (cap > 0; NULL s is ""): control
 * characters -- C0 (newline, CR, ESC, BEL, ...), DEL and the C1 controls
 * U+0080-U+009F, which some terminals obey as escape sequences -- and
 * bytes that are not UTF-8 become '?'; truncated at a character boundary.
 * out may be s itself (the result is never longer). */
void kr_str_printable(const char *s, char *out, size_t cap);

#endif
