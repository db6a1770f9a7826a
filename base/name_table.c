#include "name_table.h"

#include <string.h>

const char *name_table_name(const char *const *names, int count, int v)
{
    return v >= 0 && v < count ? names[v] : "unknown";
}

int name_table_find(const char *const *names, int count, const char *name)
{
    for (int v = 0; name && v < count; v++)
        if (strcmp(name, names[v]) == 0)
            return v;
    return -1;
}
