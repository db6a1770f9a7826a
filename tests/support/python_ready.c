#include "python_ready.h"

#include <stdio.h>
#include <stdlib.h>

int test_python_imports(const char *modules)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 -c 'import %s' >/dev/null 2>&1", modules);
    if (system(cmd) == 0)
        return 1;
    fprintf(stderr, "%s: not all available to /usr/bin/python3: skipped\n", modules);
    return 0;
}
