/* A plugin whose kernel never returns (a busy loop): for testing the
 * isolation timeout (harness/common/isolate.h). */
#include <stdint.h>

#include "isolation_test.h"

static KREPLAY_LAUNCH(hang_launch)
{
    KREPLAY_UNUSED_OPERANDS();
    volatile unsigned long spin = 0;
    for (;;)
        spin++;
    return 0;
}

ISOLATION_TEST_PLUGIN("hang", "never returns (isolation timeout test)", hang_launch);
