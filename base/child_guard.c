/* PR_SET_PDEATHSIG is Linux's. */
#define _DEFAULT_SOURCE

#include "child_guard.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

void child_guard(pid_t parent)
{
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)    /* the parent died before the line above */
        _exit(127);
#else
    (void)parent;
#endif
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
}
