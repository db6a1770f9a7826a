/* Loading a plugin once in a throw-away child process before kreplay loads
 * it in its own.
 *
 * dlopen runs a library's constructors in the calling process: one that
 * crashes would kill kreplay with no word of which plugin did it, and one
 * that calls exit() would end the run silently, with exit status 0.  The
 * probe forks, dlopens the library in the child (its own process group,
 * stdout sent to stderr, fatal signals at their default, killed with its
 * parent) and reports back on a pipe whether dlopen returned.  Everything
 * the child started is killed with it (killpg) and the child is reaped. */
#ifndef KR_PLUGIN_PROBE_H
#define KR_PLUGIN_PROBE_H

#include "kr_error.h"

/* How long a library's constructors may take in the probe. */
#define PLUGIN_PROBE_TIMEOUT_S 60.0

/* dlopens open_path (RTLD_NOW) in a child, up to timeout_s seconds.
 * Returns 0 when dlopen returned there (whether or not it succeeded: the
 * caller's own dlopen then says why it did not), or -1 with err naming
 * `path` and how loading ended: the signal that killed the process, the exit
 * status a constructor ended it with, or the timeout. */
int plugin_probe_load(const char *path, const char *open_path, double timeout_s, kr_error_t *err);

#endif
