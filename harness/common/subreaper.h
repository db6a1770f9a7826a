/* subreaper: every process an isolated kernel starts ends with it, daemons
 * included.
 *
 * An isolated child leads its own process group, and the group is killed
 * when the child ends (isolate.h); but a process that calls setsid() (a
 * daemon, Python's start_new_session) leaves the group, and once its parent
 * is gone the system hands it to init: it would outlive kreplay.  Linux's
 * child subreapers (prctl PR_SET_CHILD_SUBREAPER) keep such orphans in the
 * family:
 *   - the isolated child is a subreaper: whatever its kernel starts and
 *     abandons, setsid or not, becomes its child; before it exits it kills
 *     and reaps all of them (subreaper_end_children), and when it is killed
 *     at a timeout its parent kills its descendants first, while they are
 *     still attached to it (subreaper_kill_descendants);
 *   - kreplay itself is a subreaper too, for the child that dies of a
 *     crash before it could clean up: its orphans come to kreplay, and
 *     those in another session than kreplay's (kreplay starts none such
 *     itself) are killed and reaped, and those still in the child's
 *     process group, killed with the group, are reaped
 *     (subreaper_reap_group).
 * Descendants are found through /proc/PID/task/TID/children; without /proc
 * (or without that file) nothing here does anything. */
#ifndef KR_SUBREAPER_H
#define KR_SUBREAPER_H

#include <sys/types.h>

/* Makes this process a child subreaper (idempotent; best effort). */
void subreaper_become(void);

/* In a subreaper about to exit: SIGKILLs its children (adopted orphans
 * included) and reaps them, until none is left. */
void subreaper_end_children(void);

/* SIGKILLs every living descendant of pid (a subreaper that is still
 * alive), until a pass finds none; pid itself is left alone. */
void subreaper_kill_descendants(pid_t pid);

/* In kreplay, once the isolated child pid (the leader of process group
 * pid, already killed with its group) is reaped: reaps the members of that
 * group that were handed to kreplay as it died (waiting up to 2 s for the
 * killed to die), then SIGKILLs and reaps its children in another session
 * (orphans of a child that crashed, adopted by this subreaper). */
void subreaper_reap_group(pid_t pid);

#endif
