/* The export of the isolation-test plugins (crash.c, abort.c, hang.c): one
 * per-block kernel "testplugin.<short_name>" with no last_error, whose
 * launch reads no operand and never returns normally. */
#ifndef KREPLAY_ISOLATION_TEST_H
#define KREPLAY_ISOLATION_TEST_H

#include "plugin_util.h"

#define ISOLATION_TEST_PLUGIN(short_name, what, launch_fn)                                   \
    KREPLAY_PLUGIN_ONE_KERNEL(short_name, NULL, .name = "testplugin." short_name,           \
                              .summary = (what), KREPLAY_W4A8_PERBLOCK_OPERANDS,           \
                              .launch = (launch_fn))

#endif
