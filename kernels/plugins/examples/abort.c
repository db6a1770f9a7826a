/* A plugin whose kernel aborts (a failed assertion, as it were): for
 * testing isolation (harness/common/isolate.h). */
#include <stdint.h>
#include <stdlib.h>

#include "isolation_test.h"

static KREPLAY_LAUNCH(abort_launch)
{
    KREPLAY_UNUSED_OPERANDS();
    abort();
}

ISOLATION_TEST_PLUGIN("abort", "calls abort() on every launch (isolation test)", abort_launch);
