#include "mem_budget.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

int64_t mem_available_from_file(const char *meminfo_path)
{
    FILE *f = fopen(meminfo_path, "r");
    if (!f)
        return -1;
    char line[256];
    int64_t bytes = -1;
    while (fgets(line, sizeof line, f)) {
        int64_t kib;
        char unit[8];
        if (strncmp(line, "MemAvailable:", 13) != 0)
            continue;
        /* The kernel writes "MemAvailable:   23785736 kB"; anything else is
         * not a value we can trust. */
        if (sscanf(line + 13, "%" SCNd64 " %7s", &kib, unit) == 2 && kib >= 0 &&
            !strcmp(unit, "kB") && kib <= INT64_MAX / 1024)
            bytes = kib * 1024;
        break;
    }
    fclose(f);
    return bytes;
}

int64_t mem_budget_for_available(int64_t available_bytes)
{
    if (available_bytes < 0)
        return MEM_BUDGET_MIN_BYTES;
    const int64_t b = available_bytes / MEM_BUDGET_FRACTION;
    if (b < MEM_BUDGET_MIN_BYTES)
        return MEM_BUDGET_MIN_BYTES;
    return b > MEM_BUDGET_MAX_BYTES ? MEM_BUDGET_MAX_BYTES : b;
}

int64_t mem_budget_default(void)
{
    return mem_budget_for_available(mem_available_from_file("/proc/meminfo"));
}
