/* realpath() is POSIX.1-2008's. */
#define _DEFAULT_SOURCE

#include "suite_paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_kind.h"
#include "kr_string.h"

int suite_path_resolve(const char *path, char *out, size_t cap)
{
    char real[PATH_MAX], cwd[PATH_MAX], cwd_real[PATH_MAX];
    if (!realpath(path, real))
        return -1;
    const char *shown = real;
    if (path[0] != '/' && getcwd(cwd, sizeof cwd) && realpath(cwd, cwd_real)) {
        const size_t n = strlen(cwd_real);
        if (n > 1 && !strncmp(real, cwd_real, n) && real[n] == '/')
            shown = real + n + 1;
        else if (n == 1 && real[0] == '/' && real[1])
            shown = real + 1;
    }
    return kr_strlcpy(out, shown, cap) < cap ? 0 : -1;
}

const char *suite_file_problem(const char *path, char *buf, size_t cap)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        snprintf(buf, cap, "does not exist (%s)", strerror(errno));
        return buf;
    }
    if (S_ISREG(st.st_mode))
        return NULL;
    snprintf(buf, cap, "is %s, not a regular file", file_kind_name(st.st_mode));
    return buf;
}
