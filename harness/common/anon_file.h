/* anon_file: a file with no name, in memory where the system allows (a
 * memfd), through which a reading process hands what it read to its
 * parent.  It lives as long as a descriptor to it. */
#ifndef KR_ANON_FILE_H
#define KR_ANON_FILE_H

#include "kr_error.h"

/* A new empty anonymous file (close-on-exec), NAME shown in /proc; its
 * descriptor, or -1 with err. */
int anon_file_open(const char *name, kr_error_t *err);

#endif
