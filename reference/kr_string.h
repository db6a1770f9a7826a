/* Bounded string copy: display strings (names, notes, paths in result rows)
 * are cut at their field's size on purpose, and this says so where snprintf
 * would draw a truncation warning. */
#ifndef KR_STRING_H
#define KR_STRING_H

#include <stddef.h>

/* Copies at most cap-1 bytes of src (NULL counts as "") and terminates dst.
 * Returns the length of src, so a caller can tell that it was cut. */
size_t kr_strlcpy(char *dst, const char *src, size_t cap);

#endif
