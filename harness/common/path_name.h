/* path_name: a string read from a file (a run's time_utc, a commit, a case
 * name) made safe to use as one path component.
 *
 * Only [A-Za-z0-9._:+-] are kept, every other byte (a '/', a control
 * character, a byte of a multi-byte character) becomes '_'; a leading '.'
 * becomes '_' too, so the result is never ".", "..", a hidden name or a path
 * of several components; an empty string becomes "_".  Well-formed values
 * ("2024-05-01T03:00:00Z", "abc1234") come out unchanged. */
#ifndef KR_PATH_NAME_H
#define KR_PATH_NAME_H

#include <stddef.h>

/* Writes the component for in into out (cap > 1), cut at cap - 1 bytes. */
void path_component(const char *in, char *out, size_t cap);

#endif
