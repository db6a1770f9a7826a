/* --py: the specs -> KREPLAY_PY_KERNELS -> the Python-kernel plugin (py_kernels.h). */
#define _GNU_SOURCE
#include "py_kernels.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PY_PLUGIN_FILE "plugins/libkr_plugin_python.so"

static int spec_ok(const char *s)
{
    const char *colon = strrchr(s, ':');
    const char *at = colon ? strchr(colon, '@') : NULL;   /* "@KERNEL": operands of KERNEL */
    return s[0] && colon && colon != s && colon[1] && colon[1] != '@' && (!at || at[1]) &&
           !strchr(s, ',') && strlen(s) < 512;
}

/* plugins/libkr_plugin_python.so in the directory of /proc/self/exe. */
static int python_plugin_file(char *buf, size_t cap, kr_error_t *err)
{
    const char *env = getenv("KREPLAY_PY_PLUGIN");
    if (env && *env) {
        if (strlen(env) >= cap)
            return kr_fail(err, "KREPLAY_PY_PLUGIN: path too long; expected under %zu bytes", cap);
        strcpy(buf, env);
        return 0;
    }
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0)
        return kr_fail(err, "--py: cannot find the running executable (/proc/self/exe); expected "
                            "KREPLAY_PY_PLUGIN naming libkr_plugin_python.so");
    buf[n] = 0;
    char *slash = strrchr(buf, '/');
    size_t at = slash ? (size_t)(slash - buf + 1) : 0;
    if (at + strlen(PY_PLUGIN_FILE) >= cap)
        return kr_fail(err, "--py: executable path too long");
    strcpy(buf + at, PY_PLUGIN_FILE);
    return 0;
}

int py_kernels_load(const char *const *specs, int n, kr_plugin_t **out, kr_error_t *err)
{
    *out = NULL;
    if (n < 1 || n > PY_KERNELS_MAX)
        return kr_fail(err, "--py: %d kernels; expected 1 to %d", n, PY_KERNELS_MAX);
    char joined[PY_KERNELS_MAX * 512 + PY_KERNELS_MAX] = "";
    for (int i = 0; i < n; i++) {
        if (!spec_ok(specs[i]))
            return kr_fail(err, "--py: '%s' is not MODULE:FUNCTION[@KERNEL]; expected e.g. "
                                "mykernels:w4a8, path/to/kernels.py:w4a8 or mykernels:fn@KERNEL "
                                "(no ',')", specs[i]);
        if (i)
            strcat(joined, ",");
        strcat(joined, specs[i]);
    }
    char path[4096];
    if (python_plugin_file(path, sizeof path, err))
        return -1;
    if (setenv("KREPLAY_PY_KERNELS", joined, 1))
        return kr_fail(err, "--py: setenv failed");
    if (plugin_load(path, out, err))
        return -1;
    if (plugin_kernel_count(*out) != n) {
        int got = plugin_kernel_count(*out);
        plugin_unload(*out);
        *out = NULL;
        return kr_fail(err, "--py: %s holds %d kernels; expected %d (one per --py; was it "
                            "loaded before in this process?)", path, got, n);
    }
    return 0;
}
