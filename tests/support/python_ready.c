#include "python_ready.h"

#include <stdio.h>
#include <stdlib.h>

const char *test_python_lacks(const char *modules, const char *why)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import %s' >/dev/null 2>&1", modules);
    return system(cmd) == 0 ? NULL : why;
}

const char *test_python_missing(const char *modules)
{
    static char why[1024];
    snprintf(why, sizeof why, "%s: not all available to /usr/bin/python3: skipped", modules);
    return test_python_lacks(modules, why);
}
