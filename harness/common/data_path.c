#include "data_path.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#ifndef KREPLAY_SOURCE_DIR
#define KREPLAY_SOURCE_DIR "."
#endif

/* PREFIX/share/kreplay/rel from /proc/self/exe = PREFIX/bin/kreplay; 0 on success. */
static int installed_path(const char *rel, char *out, size_t cap)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return -1;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash)
        return -1;
    *slash = '\0';   /* the binary's folder */
    return (size_t)snprintf(out, cap, "%s/../share/kreplay/%s", exe, rel) < cap ? 0 : -1;
}

int kr_data_path(const char *rel, char *out, size_t cap)
{
    char inst[4200];
    int have_inst = installed_path(rel, inst, sizeof inst) == 0;
    if (have_inst && access(inst, R_OK) == 0)
        return (size_t)snprintf(out, cap, "%s", inst) < cap ? 0 : -1;
    char src[4200];
    if ((size_t)snprintf(src, sizeof src, "%s/%s", KREPLAY_SOURCE_DIR, rel) < sizeof src &&
        access(src, R_OK) == 0)
        return (size_t)snprintf(out, cap, "%s", src) < cap ? 0 : -1;
    return (size_t)snprintf(out, cap, "%s", have_inst ? inst : src) < cap ? 0 : -1;
}
