/* suite_paths: the files a suite names, as the operating system resolves
 * them.
 *
 * "link/../x.h5" is the x.h5 beside link's target, not the one beside
 * link: a path is never cleaned lexically; once a file is found it is
 * replaced by its realpath(), so what is replayed (and named in the rows)
 * is the file the path reaches.  A relative path stays relative when the
 * file lies under the working directory ("cases/x.h5"); otherwise, or when
 * it was given absolute, it is absolute. */
#ifndef KR_SUITE_PATHS_H
#define KR_SUITE_PATHS_H

#include <stddef.h>

/* The resolved form of path (an existing file) into out; -1 when it cannot
 * be resolved or does not fit. */
int suite_path_resolve(const char *path, char *out, size_t cap);

/* NULL when path is an existing regular file; else what is wrong with it,
 * for "policy: '...' (resolved to ...) <problem>": "does not exist (No such
 * file or directory)", "is a FIFO (named pipe), not a regular file". */
const char *suite_file_problem(const char *path, char *buf, size_t cap);

#endif
