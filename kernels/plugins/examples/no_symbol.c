/* A shared library that is not a kreplay plugin (it exports no
 * kreplay_plugin symbol): kreplay must say so. */
#include "plugin.h"

KREPLAY_PLUGIN_EXPORT int not_a_kreplay_plugin(void);

int not_a_kreplay_plugin(void)
{
    return 42;
}
