/* Where kreplay's data (the shape catalogue, suites, policies, samples) is:
 * beside the binary in an installed tree, else in the source tree of a
 * build-tree run.
 *
 * Installed layout (cmake --install): PREFIX/bin/kreplay and
 * PREFIX/share/kreplay/cases/{shapes.csv,suites/,policies/,samples/}.  The
 * binary finds PREFIX from its own location (/proc/self/exe), so a tree that
 * was moved or unpacked elsewhere still works; nothing installed depends on
 * the path it was built or installed at. */
#ifndef KR_DATA_PATH_H
#define KR_DATA_PATH_H

#include <stddef.h>

/* The data file `rel` ("cases/shapes.csv") into out: the first of
 * <dir of the binary>/../share/kreplay/rel and <source tree>/rel that exists;
 * if neither does, the installed one (so an error names where it belongs).
 * Returns 0, or -1 if it does not fit in cap. */
int kr_data_path(const char *rel, char *out, size_t cap);

#endif
