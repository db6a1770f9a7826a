/* The first step of every child kreplay forks, whatever it runs next (an
 * isolated kernel, a plugin's load probe): it dies with its parent, so an
 * interrupted run leaves no orphan burning a core, and it dumps no core, so
 * a kernel that crashes on purpose in a test fills no disk. */
#ifndef KR_CHILD_GUARD_H
#define KR_CHILD_GUARD_H

#include <sys/types.h>

/* parent: the pid the child was forked from (getppid() before the fork's
 * return is checked against it: a parent that died first ends the child
 * with _exit(127)). */
void child_guard(pid_t parent);

#endif
