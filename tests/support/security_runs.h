/* What the hostile-input tests (test_security.c, test_security_files.c)
 * share: the kreplay binary run with an argument vector (fork + execv, so a
 * hostile string reaches it exactly as a user's shell would pass it) in a
 * directory of their choice, the expectations on its exit and output, and a
 * fresh working directory holding a synthesized case.
 * Include after <cmocka.h>'s prerequisites. */
#ifndef KR_SECURITY_RUNS_H
#define KR_SECURITY_RUNS_H

#include <stddef.h>

/* Fails unless hay holds needle. */
void sec_assert_contains(const char *hay, const char *needle);

int sec_exists(const char *path);

/* Runs kreplay with argv (argv[0] is ignored) in directory cwd; stdout and
 * stderr into *out (malloc'd).  Returns the exit code, or -1 on a signal. */
int sec_run_kreplay_in(const char *cwd, const char *const *argv, char **out);

/* ARGV run in CWD gives a verdict (exit 0 or 1), or succeeds (exit 0); O,
 * its output directory, is named in the failure message. */
void sec_expect_verdict_in(const char *cwd, const char *const *argv, const char *o);
void sec_expect_success_in(const char *cwd, const char *const *argv, const char *o);

/* ARGV run in CWD is refused: exit 2 and an error holding MSG. */
void sec_expect_refused_in(const char *cwd, const char *const *argv, const char *msg);

/* The hostile files are meant to fail: no HDF5 error stack in the log. */
void sec_h5_quiet(void);

/* mkdir that accepts an existing directory. */
void sec_make_dir(const char *path);

/* The whole file (malloc'd, NUL-terminated; its length in *len if len). */
char *sec_slurp(const char *path, size_t *len);

void sec_copy_file(const char *from, const char *to);

/* A fresh working directory and the 64 x 64 case synthesized in its cases/. */
typedef struct {
    char dir[1024];
    char cs[1200];     /* the case */
    char other[1200];  /* other.h5 (not made here): the file hostile links point into */
} sec_work_t;

void sec_work_dir_with_case(sec_work_t *w);

/* The work directory's case copied to cases/NAME (its path in path): a
 * hostile case name. */
void sec_copy_case_as(const sec_work_t *w, const char *name, char *path, size_t cap);

#endif
