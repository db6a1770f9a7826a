/* Output that was lost, and output sets that were interrupted.
 *
 * Feeds kreplay (the binary):
 * - stdout on /dev/full (no space left on the device) for replay's table,
 *   replay --json, man, list kernels and report's summary line: exit 2 and
 *   one line on stderr saying the output was lost (each exited 0);
 * - a Ctrl-C (SIGINT) at every point of `report -o DIR` over an earlier
 *   report: a fault-injecting file system (tests/support/fault_fs.c,
 *   preloaded) raises it right after the N-th rename below DIR, for every N
 *   the run reaches; DIR then holds the earlier report or the new one, each
 *   whole, never a mix (results.csv and report.md new beside report.html
 *   old), and the next report leaves no staging directory behind;
 * - a SIGTERM at every point of `merge -o DIR --junit J` over an earlier
 *   merge: results.h5, report.html, results.json and J all of one run. */
/* ctest-labels: fault */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hostile_files.h"
#include "kr_string.h"
#include "results_store.h"
#include "test_main.h"
#include "test_support.h"

static char dir[512];

static int setup(void **state)
{
    (void)state;
    assert_int_equal(test_tmp_dir(dir, sizeof dir, "lost-output"), 0);
    hostile_sh("'%s' synth --shape 64x256 --m 4 --out '%s/cases' >/dev/null", hostile_binary(), dir);
    return 0;
}

/* ------------------------------------------------------------ /dev/full */

static void expect_lost(const char *args)
{
    char cmd[4096], *out = NULL;
    snprintf(cmd, sizeof cmd, "timeout 60 '%s' %s > /dev/full", hostile_binary(), args);
    const int rc = test_sh(cmd, &out);
    if (rc != 2)
        fail_msg("%s: exit %d with stdout on a full device:\n%s", args, rc, out);
    hostile_expect(out, "kreplay: error: writing standard output: No space left on device");
    free(out);
}

static void test_lost_stdout(void **state)
{
    (void)state;
    char args[2048];
    snprintf(args, sizeof args, "replay '%s/cases'", dir);
    expect_lost(args);
    snprintf(args, sizeof args, "replay --json '%s/cases'", dir);
    expect_lost(args);
    expect_lost("man");
    expect_lost("list kernels --verbose");
    result_list_t rows;
    results_meta_t m;
    hostile_rows(&rows, 3, VERDICT_PASS);
    hostile_meta(&m, "lost", "2024-05-01T03:00:00Z");
    char path[1024];
    snprintf(path, sizeof path, "%s/lost-rows.h5", dir);
    hostile_write(path, &rows, &m);
    result_list_free(&rows);
    snprintf(args, sizeof args, "report '%s' -o '%s/lost-report' --no-plots", path, dir);
    expect_lost(args);
}

/* --------------------------------------------------- interrupted sets */

/* Run A's and B's rows, written to DIR/PREFIX.h5 (into path): their case
 * names (alpha..., beta...) mark every file of a report as one run's or the
 * other's. */
static void write_run(char *path, size_t cap, const char *prefix, int n)
{
    result_list_t rows;
    results_meta_t m;
    hostile_rows(&rows, n, VERDICT_PASS);
    for (int i = 0; i < n; i++) {
        snprintf(rows.rows[i].case_name, sizeof rows.rows[i].case_name, "%s%d", prefix, i);
        snprintf(rows.rows[i].case_path, sizeof rows.rows[i].case_path, "hostile/%s%d.h5", prefix, i);
    }
    hostile_meta(&m, "lost", "2024-05-01T03:00:00Z");
    snprintf(path, cap, "%s/%s.h5", dir, prefix);
    hostile_write(path, &rows, &m);
    result_list_free(&rows);
}

/* Which run (0 A, 1 B) the file at path holds, by its marker; -1 neither, 2
 * both.  A missing file is -2. */
static int file_run(const char *path)
{
    char *text = test_read_file(path, NULL);
    if (!text)
        return -2;
    const int a = strstr(text, "alpha") != NULL, b = strstr(text, "beta") != NULL;
    free(text);
    return a && b ? 2 : b ? 1 : a ? 0 : -1;
}

/* Every file of the set in out holds the same run; returns it.  An HDF5
 * file is read for its rows. */
static int set_run(const char *out, const char *const *files, int n, const char *junit)
{
    int run = -3;
    char msg[4096] = "";
    for (int i = 0; i <= n; i++) {
        char path[1200];
        if (i == n && !junit)
            break;
        if (i == n)
            kr_strlcpy(path, junit, sizeof path);
        else
            snprintf(path, sizeof path, "%s/%s", out, files[i]);
        int r;
        if (strstr(path, ".h5")) {
            result_list_t rows;
            kr_error_t err = {{0}};
            if (results_store_read(path, &rows, NULL, &err) || rows.count == 0)
                r = -2;
            else
                r = strstr(rows.rows[0].case_name, "beta") ? 1 : 0;
            result_list_free(&rows);
        } else {
            r = file_run(path);
        }
        size_t l = strlen(msg);
        snprintf(msg + l, sizeof msg - l, " %s=%d", i == n ? "junit" : files[i], r);
        if (run == -3)
            run = r;
        else if (r != run)
            run = -4;
    }
    if (run != 0 && run != 1)
        fail_msg("%s holds a mix of two runs (0 the earlier, 1 the new):%s", out, msg);
    return run;
}

static int count_stages(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;)
        n += !strncmp(e->d_name, ".kreplay-new-", 13);
    if (d)
        closedir(d);
    return n;
}

/* A command interrupted at every rename below fault_dir in turn (the
 * earlier set restored before each), until a run gets past its last one. */
typedef struct {
    const char *restore;            /* shell command putting the earlier set back */
    const char *fault_dir;          /* renames below it count */
    const char *signal;             /* "INT" or "TERM" */
    const char *args;               /* the kreplay command */
    const char *out;                /* the output directory */
    const char *const *files;       /* the set's files in it */
    int n_files;
    const char *junit;              /* a file of the set outside it, or NULL */
} interrupt_t;

static void interrupt_everywhere(const interrupt_t *t)
{
    int saw_new = 0, saw_old = 0;
    for (int at = 1; at <= 40; at++) {
        hostile_sh("%s", t->restore);
        char cmd[8192], *text = NULL;
        /* An ASan build wants its runtime first; the preloaded file system
         * is plain C and intercepts nothing of it. */
        snprintf(cmd, sizeof cmd, "KR_FAULT_DIR='%s' KR_FAULT_SIGNAL_AT_RENAME=%d KR_FAULT_SIGNAL=%s "
                                  "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0\" "
                                  "LD_PRELOAD='%s' timeout 60 '%s' %s",
                 t->fault_dir, at, t->signal, KR_FAULT_FS, hostile_binary(), t->args);
        const int rc = test_sh(cmd, &text);
        free(text);
        const int run = set_run(t->out, t->files, t->n_files, t->junit);
        saw_old |= run == 0;
        saw_new |= run == 1;
        if (rc == 0)
            break;      /* the run got past its last rename: every point was tried */
    }
    /* Some interrupts came before the set was in place, the last ones after. */
    assert_true(saw_old);
    assert_true(saw_new);
}

static void test_interrupted_report(void **state)
{
    (void)state;
    char a[1024], b[1024], out[1024], earlier[1024], restore[4096], args[4096], *text = NULL;
    write_run(a, sizeof a, "alpha", 3);
    write_run(b, sizeof b, "beta", 4);
    snprintf(out, sizeof out, "%s/int-report", dir);
    snprintf(earlier, sizeof earlier, "%s/int-report-a", dir);
    assert_int_equal(hostile_run(&text, "report '%s' -o '%s' --no-plots", a, earlier), 0);
    free(text);
    static const char *const files[] = {"results.json", "results.csv", "report.md", "report.html",
                                        "report_full.md"};
    snprintf(restore, sizeof restore, "rm -rf '%s' && cp -r '%s' '%s'", out, earlier, out);
    snprintf(args, sizeof args, "report '%s' -o '%s' --no-plots", b, out);
    const interrupt_t t = {restore, out, "INT", args, out, files, 5, NULL};
    interrupt_everywhere(&t);
    assert_int_equal(hostile_run(&text, "%s", args), 0);
    free(text);
    assert_int_equal(count_stages(out), 0);
}

static void test_interrupted_merge(void **state)
{
    (void)state;
    char a[1024], b[1024], top[1024], out[1100], junit[1100], restore[8192], args[4096], *text = NULL;
    write_run(a, sizeof a, "alpha", 3);
    write_run(b, sizeof b, "beta", 4);
    snprintf(top, sizeof top, "%s/int-merge", dir);
    snprintf(out, sizeof out, "%s/out", top);
    snprintf(junit, sizeof junit, "%s/junit.xml", top);
    /* The earlier set: a merge of A, kept beside to restore from. */
    assert_int_equal(hostile_run(&text, "merge -o '%s/ref' --junit '%s/ref.xml' '%s'", dir, dir, a), 0);
    free(text);
    static const char *const files[] = {"results.h5", "results.json", "report.md", "report.html"};
    snprintf(restore, sizeof restore, "rm -rf '%s' && mkdir -p '%s' && cp -r '%s/ref' '%s' && "
                                      "cp '%s/ref.xml' '%s'", top, top, dir, out, dir, junit);
    snprintf(args, sizeof args, "merge -o '%s' --junit '%s' '%s'", out, junit, b);
    const interrupt_t t = {restore, top, "TERM", args, out, files, 4, junit};
    interrupt_everywhere(&t);
}

KR_TEST_MAIN_SETUP(setup, NULL, test_lost_stdout, test_interrupted_report, test_interrupted_merge);
