#include "gate_preflight.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "atomic_file.h"
#include "kr_string.h"
#include "results_store.h"

int dir_check_writable(const char *dir, kr_error_t *err)
{
    if (make_dirs(dir, err))
        return -1;
    char probe[4200];
    if ((size_t)snprintf(probe, sizeof probe, "%s/.kreplay-probe.%ld", dir, (long)getpid()) >=
        sizeof probe)
        return kr_fail(err, "%s: path too long; expected under 4096 bytes", dir);
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return kr_fail(err, "%s: directory is not writable: %s", dir, strerror(errno));
    const char byte = '\n';
    int bad = write(fd, &byte, 1) != 1 || fsync(fd) != 0;
    int e = errno;
    bad |= close(fd) != 0;
    if (bad && !e)
        e = errno;
    unlink(probe);
    if (bad)
        return kr_fail(err, "%s: directory is not writable: %s", dir, strerror(e));
    return 0;
}

static int dir_of(const char *path, char *dir, size_t cap)
{
    kr_strlcpy(dir, path, cap);
    char *slash = strrchr(dir, '/');
    if (!slash)
        kr_strlcpy(dir, ".", cap);
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    return 0;
}

static int check_baseline(const gate_options_t *o, int *missing, kr_error_t *err)
{
    struct stat st;
    if (stat(o->baseline_path, &st) != 0) {
        if (errno != ENOENT)
            return kr_fail(err, "%s: cannot read the baseline: %s", o->baseline_path, strerror(errno));
        if (!o->baseline_init)
            return kr_fail(err, "%s: no such baseline file; create it from this run with "
                                "--baseline-init, or from a finished run with 'kreplay baseline "
                                "update RUNDIR --baseline %s'", o->baseline_path, o->baseline_path);
        *missing = 1;
        char dir[4096];
        dir_of(o->baseline_path, dir, sizeof dir);
        return dir_check_writable(dir, err);
    }
    if (!S_ISREG(st.st_mode))
        return kr_fail(err, "%s: the baseline is not a regular file; expected a results.h5", o->baseline_path);
    /* Read it whole now: a corrupt baseline is an input error before the run, not after. */
    result_list_t rows = {0};
    if (results_store_read(o->baseline_path, &rows, NULL, err))
        return -1;
    result_list_free(&rows);
    return 0;
}

int gate_preflight(const gate_options_t *o, int *baseline_missing, kr_error_t *err)
{
    *baseline_missing = 0;
    if (o->baseline_init && !o->baseline_path)
        return kr_fail(err, "--baseline-init: needs --baseline FILE (the file to create)");
    if (o->baseline_path && check_baseline(o, baseline_missing, err))
        return -1;
    if (dir_check_writable(o->run_dir, err))
        return -1;
    if (o->junit_path) {
        char dir[4096];
        dir_of(o->junit_path, dir, sizeof dir);
        struct stat st;
        if (stat(o->junit_path, &st) == 0 && !S_ISREG(st.st_mode))
            return kr_fail(err, "%s: --junit: exists and is not a regular file", o->junit_path);
        if (dir_check_writable(dir, err))
            return -1;
    }
    if (o->history_dir && dir_check_writable(o->history_dir, err))
        return -1;
    return 0;
}
