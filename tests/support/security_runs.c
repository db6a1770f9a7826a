/* Runs and fixtures of the hostile-input tests (test_security.c,
 * test_security_files.c): see security_runs.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "security_runs.h"
#include "test_support.h"

void sec_assert_contains(const char *hay, const char *needle)
{
    if (!hay || !strstr(hay, needle))
        fail_msg("expected \"%s\" in:\n  %s", needle, hay ? hay : "(null)");
}

int sec_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Runs kreplay with argv (argv[0] is ignored) in directory cwd; stdout and
 * stderr into *out (malloc'd).  Returns the exit code, or -1 on a signal. */
int sec_run_kreplay_in(const char *cwd, const char *const *argv, char **out)
{
    int fd[2];
    assert_int_equal(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        dup2(fd[1], 1);
        dup2(fd[1], 2);
        close(fd[1]);
        if (cwd && chdir(cwd) != 0)
            _exit(126);
        int n = 0;
        while (argv[n])
            n++;
        char **v = calloc((size_t)n + 1, sizeof *v);
        v[0] = (char *)KREPLAY_BINARY;
        for (int i = 1; i < n; i++)
            v[i] = (char *)argv[i];
        execv(KREPLAY_BINARY, v);
        _exit(127);
    }
    close(fd[1]);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ssize_t got;
    while ((got = read(fd[0], buf + len, cap - len - 1)) > 0 || (got < 0 && errno == EINTR)) {
        if (got < 0)
            continue;
        len += (size_t)got;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    close(fd[0]);
    buf[len] = '\0';
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* ARGV run in CWD exits with 0 .. MAX_RC, never an error; O names its
 * output directory in the message. */
static void expect_exit_in(const char *cwd, const char *const *argv, const char *o, int max_rc)
{
    char *out = NULL;
    int rc = sec_run_kreplay_in(cwd, argv, &out);
    if (rc < 0 || rc > max_rc)
        fail_msg("%s%s%s: exit %d: %s", argv[1], o ? " -o " : "", o ? o : "", rc, out);
    free(out);
}

/* A verdict: exit 0 or 1. */
void sec_expect_verdict_in(const char *cwd, const char *const *argv, const char *o)
{
    expect_exit_in(cwd, argv, o, 1);
}

void sec_expect_success_in(const char *cwd, const char *const *argv, const char *o)
{
    expect_exit_in(cwd, argv, o, 0);
}

/* ARGV run in CWD is refused: exit 2 and an error holding MSG. */
void sec_expect_refused_in(const char *cwd, const char *const *argv, const char *msg)
{
    char *out = NULL;
    assert_int_equal(sec_run_kreplay_in(cwd, argv, &out), 2);
    sec_assert_contains(out, msg);
    free(out);
}

/* The hostile files are meant to fail: no HDF5 error stack in the log. */
void sec_h5_quiet(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void sec_make_dir(const char *path)
{
    assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
}

char *sec_slurp(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        fail_msg("cannot read %s", path);
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, fp), (size_t)n);
    buf[n] = '\0';
    fclose(fp);
    if (len)
        *len = (size_t)n;
    return buf;
}

void sec_copy_file(const char *from, const char *to)
{
    size_t n;
    char *b = sec_slurp(from, &n);
    FILE *fp = fopen(to, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, n, fp), n);
    fclose(fp);
    free(b);
}

/* A fresh working directory and the 64 x 64 case synthesized in its cases/. */
void sec_work_dir_with_case(sec_work_t *w)
{
    test_tmp_path(w->dir, sizeof w->dir, "security");
    sec_make_dir(w->dir);
    char cases[1100];
    snprintf(cases, sizeof cases, "%s/cases", w->dir);
    const char *argv[] = {"kreplay", "synth", "--shape", "64x64", "--m", "4", "--out", cases, NULL};
    sec_expect_success_in(w->dir, argv, NULL);
    snprintf(w->cs, sizeof w->cs, "%s/synth_N64_K64_M4_s1.h5", cases);
    assert_true(sec_exists(w->cs));
    snprintf(w->other, sizeof w->other, "%s/other.h5", w->dir);
}

/* The work directory's case copied to cases/NAME (its path in path): a
 * hostile case name. */
void sec_copy_case_as(const sec_work_t *w, const char *name, char *path, size_t cap)
{
    snprintf(path, cap, "%s/cases/%s", w->dir, name);
    sec_copy_file(w->cs, path);
}
