/* A plugin whose kernel segfaults on purpose: for testing isolation
 * (harness/common/isolate.h).  Loading it is harmless; launching it is not. */
#include <stdint.h>

#include "isolation_test.h"

static KREPLAY_LAUNCH(crash_launch)
{
    KREPLAY_UNUSED_OPERANDS();
    /* A store through an address the compiler cannot see is bad: a real
     * SIGSEGV, not a trap instruction. */
    volatile uintptr_t bad = 16;
    *(volatile int *)bad = 1;
    return 0;
}

ISOLATION_TEST_PLUGIN("crash", "segfaults on every launch (isolation test)", crash_launch);
