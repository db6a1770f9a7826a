/* Nothing lost: write faults, two writers, foreign partials, aborted runs.
 *
 * Feeds kreplay (the binary, as a user runs it):
 * - a run directory on a file system that fills up after N bytes (0 to just
 *   under what a clean run writes) or returns EIO, and one that is read-only
 *   (tests/support/fault_fs.c, preloaded: no root, no mounts); --save-outputs
 *   on such a disk, and /dev/full as an output path.  Each must end in one
 *   error naming the file, exit 2, no crash, and nothing that looks complete;
 * - a run directory whose lock another kreplay holds;
 * - --resume over another suite's partials, over another build's partial,
 *   and after a policy change (the resumed rows must get the new verdicts);
 * - a gate whose partial/ cannot be written (results.json, report.md and
 *   JUnit must say the run is incomplete). */
/* ctest-labels: fault */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "results_store.h"
#include "test_main.h"
#include "test_support.h"

#define SAMPLE KREPLAY_SOURCE_DIR "/cases/samples/moe_gate_N256_K2048_M8.h5"

static char dir[1024];
static char suite_a[1200], suite_b[1200];

#define write_text(path, text) assert_int_equal(test_write_text(path, text), 0)

static int setup(void **state)
{
    (void)state;
    assert_int_equal(test_tmp_dir(dir, sizeof dir, "lost"), 0);
    char text[2048];
    snprintf(suite_a, sizeof suite_a, "%s/a.yaml", dir);
    snprintf(text, sizeof text,
             "suite: lost-a\n"
             "cases:\n"
             "  - files: [\"%s\"]\n"
             "  - synth:\n"
             "      shapes: [64x256]\n"
             "      m: [1, 8]\n"
             "      seeds: [1, 2]\n"
             "kernels: [\"w4a8.folded\", \"w4a4.aiter\"]\n",
             SAMPLE);
    write_text(suite_a, text);
    snprintf(suite_b, sizeof suite_b, "%s/b.yaml", dir);
    write_text(suite_b,
               "suite: lost-b\n"
               "cases:\n"
               "  - synth:\n"
               "      shapes: [96x256]\n"
               "      m: [4]\n"
               "kernels: [\"w4a8.folded\", \"w4a4.aiter\"]\n");
    return 0;
}

/* Runs kreplay with the failing file system below fault_dir (NULL: none).
 * The preload is set for kreplay alone, not for the shell that starts it. */
static int run_env(const char *fault_dir, const char *err_name, long long after, const char *args,
                   char **out)
{
    char *cmd = NULL;
    if (fault_dir)
        assert_true(asprintf(&cmd,
                             "KR_FAULT_DIR='%s' KR_FAULT_ERRNO=%s KR_FAULT_AFTER=%lld LD_PRELOAD='%s' "
                             "ASAN_OPTIONS=\"${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0\" "
                             "'%s' %s 2>&1",
                             fault_dir, err_name, after, KR_FAULT_FS, KREPLAY_BINARY, args) > 0);
    else
        assert_true(asprintf(&cmd, "'%s' %s 2>&1", KREPLAY_BINARY, args) > 0);
    int st = test_shell(cmd, out);
    free(cmd);
    assert_int_not_equal(st, -1);
    if (WIFSIGNALED(st))
        return 128 + WTERMSIG(st);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* `kreplay ARGS` (under the fault, as run_env takes it) exits with WANT_RC
 * and its output holds A and, unless NULL, B. */
static void expect_exit_saying(const char *fault_dir, const char *err_name, long long after,
                               const char *args, int want_rc, const char *a, const char *b)
{
    char *out;
    const int rc = run_env(fault_dir, err_name, after, args, &out);
    if (rc != want_rc || !strstr(out, a) || (b && !strstr(out, b)))
        fail_msg("kreplay %s (fault %s after %lld bytes): exit %d, expected %d and '%s'%s%s%s:\n%s",
                 args, err_name ? err_name : "none", after, rc, want_rc, a, b ? " and '" : "",
                 b ? b : "", b ? "'" : "", out);
    free(out);
}

/* Suite a gated without faults into <dir>/<sub> (its path in run); it must pass. */
static void gate_a_clean(const char *sub, char *run, size_t cap)
{
    char args[4096], *out;
    snprintf(run, cap, "%s/%s", dir, sub);
    snprintf(args, sizeof args, "gate '%s' -o '%s'", suite_a, run);
    assert_int_equal(run_env(NULL, NULL, 0, args, &out), 0);
    free(out);
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

#define slurp(path) test_read_file(path, NULL)

/* Bytes of the regular files below path. */
static long long tree_bytes(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return 0;
    long long n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        struct stat st;
        if (lstat(p, &st) != 0)
            continue;
        n += S_ISDIR(st.st_mode) ? tree_bytes(p) : (long long)st.st_size;
    }
    closedir(d);
    return n;
}

/* No temporary file of an interrupted write is left below path. */
static void assert_no_tmp(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (strstr(e->d_name, ".tmp."))
            fail_msg("%s/%s: a temporary file was left behind", path, e->d_name);
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        struct stat st;
        if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
            assert_no_tmp(p);
    }
    closedir(d);
}

/* What a failed run may leave: results.h5 only if it reads back whole,
 * results.json only if it says incomplete, no temporary files. */
static void assert_nothing_presented_complete(const char *run, int64_t full_rows)
{
    char p[1400];
    snprintf(p, sizeof p, "%s/results.h5", run);
    if (file_exists(p)) {
        result_list_t rows;
        kr_error_t err;
        if (results_store_read(p, &rows, NULL, &err))
            fail_msg("%s is damaged: %s", p, err.msg);
        assert_int_equal(rows.count, full_rows);
        result_list_free(&rows);
    }
    snprintf(p, sizeof p, "%s/results.json", run);
    char *json = slurp(p);
    if (json) {
        if (!strstr(json, "\"incomplete\": true"))
            fail_msg("%s: a failed run's results.json does not say incomplete", p);
        free(json);
    }
    assert_no_tmp(run);
}

static void test_full_disk_gate(void **state)
{
    (void)state;
    char clean[1200], args[4096];
    gate_a_clean("clean", clean, sizeof clean);
    char res[1400];
    snprintf(res, sizeof res, "%s/results.h5", clean);
    result_list_t rows;
    kr_error_t err;
    if (results_store_read(res, &rows, NULL, &err))
        fail_msg("%s", err.msg);
    const int64_t full_rows = rows.count;
    result_list_free(&rows);
    /* A clean run writes at least this much: every budget below it must
     * fail.  2% off the top: the reports' timings vary in length. */
    const long long total = tree_bytes(clean);
    assert_true(total > 10000);
    const long long budgets[] = {0, 600, total / 10, total / 2, total * 9 / 10, total * 49 / 50};
    const char *errs[] = {"ENOSPC", "ENOSPC", "EIO", "ENOSPC", "EIO", "ENOSPC"};
    const char *msgs[] = {"No space left on device", "No space left on device", "Input/output error",
                          "No space left on device", "Input/output error", "No space left on device"};
    for (int i = 0; i < 6; i++) {
        char fault[1200], run[1300];
        snprintf(fault, sizeof fault, "%s/disk%d", dir, i);
        assert_int_equal(mkdir(fault, 0777), 0);
        snprintf(run, sizeof run, "%s/run", fault);
        snprintf(args, sizeof args, "gate '%s' -o '%s' --junit '%s/gate.xml'", suite_a, run, fault);
        expect_exit_saying(fault, errs[i], budgets[i], args, 2, run, msgs[i]);
        assert_nothing_presented_complete(run, full_rows);
        assert_no_tmp(fault);
    }
}

static void test_full_disk_save_outputs(void **state)
{
    (void)state;
    /* The size of a complete outputs file: every budget below it must fail. */
    char whole[1200], wargs[4096], *wout;
    snprintf(whole, sizeof whole, "%s/outs_whole.h5", dir);
    snprintf(wargs, sizeof wargs, "replay --save-outputs '%s' '%s'", whole, SAMPLE);
    assert_int_equal(run_env(NULL, NULL, 0, wargs, &wout), 0);
    free(wout);
    struct stat st;
    assert_int_equal(stat(whole, &st), 0);
    const long long size = (long long)st.st_size;
    assert_true(size > 10000);
    const long long budgets[] = {0, 4096, size / 2, size - 1};
    for (int i = 0; i < 4; i++) {
        char fault[1200], outs[1300], args[4096];
        snprintf(fault, sizeof fault, "%s/outs%d", dir, i);
        assert_int_equal(mkdir(fault, 0777), 0);
        snprintf(outs, sizeof outs, "%s/outs.h5", fault);
        snprintf(args, sizeof args, "replay --save-outputs '%s' '%s'", outs, SAMPLE);
        expect_exit_saying(fault, i == 2 ? "EIO" : "ENOSPC", budgets[i], args, 2, outs, NULL);
        /* No outputs file at all rather than a damaged one. */
        assert_false(file_exists(outs));
        assert_no_tmp(fault);
    }
    /* With room enough it is written and complete. */
    char fault[1200], outs[1300], args[4096], *out;
    snprintf(fault, sizeof fault, "%s/outs_ok", dir);
    assert_int_equal(mkdir(fault, 0777), 0);
    snprintf(outs, sizeof outs, "%s/outs.h5", fault);
    snprintf(args, sizeof args, "replay --save-outputs '%s' '%s'", outs, SAMPLE);
    assert_int_equal(run_env(fault, "ENOSPC", 1LL << 30, args, &out), 0);
    free(out);
    assert_true(file_exists(outs));
}

static void test_read_only_and_dev_full(void **state)
{
    (void)state;
    char ro[1200], args[4096];
    snprintf(ro, sizeof ro, "%s/readonly", dir);
    assert_int_equal(mkdir(ro, 0777), 0);
    char run[1300];
    snprintf(run, sizeof run, "%s/run", ro);
    snprintf(args, sizeof args, "gate '%s' -o '%s'", suite_a, run);
    expect_exit_saying(ro, "EROFS", 0, args, 2, run, "Read-only file system");
    snprintf(args, sizeof args, "replay -o '%s' '%s'", run, SAMPLE);
    expect_exit_saying(ro, "EROFS", 0, args, 2, run, NULL);
    /* An existing directory that is read-only: the run directory is fine, the
     * JUnit file's directory is not, and the gate says so before any case. */
    char ok[1200];
    snprintf(ok, sizeof ok, "%s/okrun", dir);
    snprintf(args, sizeof args, "gate '%s' -o '%s' --junit '%s/gate.xml'", suite_a, ok, ro);
    expect_exit_saying(ro, "EROFS", 0, args, 2, ro, NULL);
    char part[1400];
    snprintf(part, sizeof part, "%s/partial", ok);
    assert_int_equal(tree_bytes(part), 0);

    /* /dev/full: a device where a file path is expected is refused, and
     * stays a device (renaming a finished file over it would replace it). */
    struct stat st;
    if (stat("/dev/full", &st) != 0 || !S_ISCHR(st.st_mode))
        return;
    snprintf(args, sizeof args, "replay --save-outputs /dev/full '%s'", SAMPLE);
    expect_exit_saying(NULL, NULL, 0, args, 2, "/dev/full", NULL);
    snprintf(args, sizeof args, "gate '%s' -o '%s/devfull' --junit /dev/full", suite_a, dir);
    expect_exit_saying(NULL, NULL, 0, args, 2, "/dev/full", NULL);
    assert_int_equal(stat("/dev/full", &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    assert_false(file_exists("/dev/full.tmp"));
}

static void test_second_writer_refused(void **state)
{
    (void)state;
    char run[1200], lock[1300], args[4096], *out;
    snprintf(run, sizeof run, "%s/locked", dir);
    assert_int_equal(mkdir(run, 0777), 0);
    snprintf(lock, sizeof lock, "%s/.kreplay.lock", run);
    /* Hold the lock as a running kreplay does. */
    int fd = open(lock, O_RDWR | O_CREAT, 0666);
    assert_true(fd >= 0);
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%d\n", (int)getpid());
    assert_int_equal(pwrite(fd, pid, (size_t)len, 0), len);
    char want[1400];
    snprintf(want, sizeof want, "%s is being written by another kreplay (pid %d)", run, (int)getpid());
    for (int i = 0; i < 2; i++) {
        if (i == 0)
            snprintf(args, sizeof args, "gate '%s' -o '%s'", suite_a, run);
        else
            snprintf(args, sizeof args, "replay -o '%s' '%s'", run, SAMPLE);
        expect_exit_saying(NULL, NULL, 0, args, 2, want, NULL);
    }
    char res[1400];
    snprintf(res, sizeof res, "%s/results.h5", run);
    assert_false(file_exists(res));
    /* merge into it too */
    char clean[1400];
    snprintf(clean, sizeof clean, "%s/clean/results.h5", dir);
    if (file_exists(clean)) {
        snprintf(args, sizeof args, "merge -o '%s' '%s'", run, clean);
        expect_exit_saying(NULL, NULL, 0, args, 2, want, NULL);
    }
    /* Released: the next writer runs. */
    close(fd);
    snprintf(args, sizeof args, "gate '%s' -o '%s'", suite_a, run);
    assert_int_equal(run_env(NULL, NULL, 0, args, &out), 0);
    free(out);
    assert_true(file_exists(res));
}

static int count_verdict(const char *path, const char *name)
{
    result_list_t rows;
    kr_error_t err;
    if (results_store_read(path, &rows, NULL, &err))
        fail_msg("%s", err.msg);
    int n = 0;
    for (int64_t i = 0; i < rows.count; i++)
        n += !strcmp(verdict_name(rows.rows[i].verdict), name);
    result_list_free(&rows);
    return n;
}

static void test_resume_checks_provenance(void **state)
{
    (void)state;
    char run[1200], args[4096], *out;
    gate_a_clean("resume", run, sizeof run);

    /* Another suite's partials. */
    snprintf(args, sizeof args, "gate '%s' -o '%s' --resume", suite_b, run);
    expect_exit_saying(NULL, NULL, 0, args, 2, "not this suite 'lost-b'", "/partial/");

    /* A policy change: the loose policy passes everything, the strict one
     * fails the W4A4 rows; resumed rows must be judged by the new one. */
    char loose[1300], strict[1300];
    snprintf(loose, sizeof loose, "%s/loose.yaml", dir);
    snprintf(strict, sizeof strict, "%s/strict.yaml", dir);
    write_text(loose, "policy: loose\nrules:\n  - kernel: \"*\"\n    rel_fro: 10\n    nonfinite: allow\n");
    write_text(strict, "policy: strict\nrules:\n  - kernel: \"w4a4.*\"\n    reference: R_source\n"
                       "    rel_fro: 1e-9\n  - kernel: \"*\"\n    rel_fro: 10\n    nonfinite: allow\n");
    char prun[1300], fresh[1300];
    snprintf(prun, sizeof prun, "%s/policy", dir);
    snprintf(fresh, sizeof fresh, "%s/policy_fresh", dir);
    snprintf(args, sizeof args, "gate '%s' -o '%s' --policy '%s'", suite_a, prun, loose);
    assert_int_equal(run_env(NULL, NULL, 0, args, &out), 0);
    free(out);
    snprintf(args, sizeof args, "gate '%s' -o '%s' --policy '%s'", suite_a, fresh, strict);
    assert_int_equal(run_env(NULL, NULL, 0, args, &out), 1);
    free(out);
    snprintf(args, sizeof args, "gate '%s' -o '%s' --policy '%s' --resume", suite_a, prun, strict);
    expect_exit_saying(NULL, NULL, 0, args, 1, "judged again", NULL);   /* as a fresh run */
    char a[1400], b[1400];
    snprintf(a, sizeof a, "%s/results.h5", prun);
    snprintf(b, sizeof b, "%s/results.h5", fresh);
    const int wrong = count_verdict(b, "WRONG") + count_verdict(b, "MAGNITUDE");
    assert_true(wrong > 0);
    assert_int_equal(count_verdict(a, "WRONG") + count_verdict(a, "MAGNITUDE"), wrong);
    assert_int_equal(count_verdict(a, "PASS"), count_verdict(b, "PASS"));

    /* A partial written by another kreplay build. */
    char res[1400];
    snprintf(res, sizeof res, "%s/results.h5", run);
    result_list_t rows;
    results_meta_t meta;
    kr_error_t err;
    if (results_store_read(res, &rows, &meta, &err))
        fail_msg("%s", err.msg);
    snprintf(meta.git_commit, sizeof meta.git_commit, "0123456789ab");
    snprintf(meta.version, sizeof meta.version, "0.0.1");
    if (results_store_append_case(run, "synth:from-another-build", rows.rows, 1, &meta, &err))
        fail_msg("%s", err.msg);
    result_list_free(&rows);
    snprintf(args, sizeof args, "gate '%s' -o '%s' --resume", suite_a, run);
    expect_exit_saying(NULL, NULL, 0, args, 2, "written by kreplay 0.0.1 (commit 0123456789ab)", NULL);
}

static void test_aborted_gate_says_incomplete(void **state)
{
    (void)state;
    char run[1200], part[1300], junit[1300], args[4096];
    snprintf(run, sizeof run, "%s/aborted", dir);
    snprintf(part, sizeof part, "%s/partial", run);
    snprintf(junit, sizeof junit, "%s/aborted.xml", dir);
    assert_int_equal(mkdir(run, 0777), 0);
    assert_int_equal(mkdir(part, 0777), 0);
    snprintf(args, sizeof args, "gate '%s' -o '%s' --junit '%s'", suite_a, run, junit);
    expect_exit_saying(part, "EROFS", 0, args, 2, part, NULL);
    char p[1400];
    snprintf(p, sizeof p, "%s/results.h5", run);
    assert_false(file_exists(p));
    snprintf(p, sizeof p, "%s/results.json", run);
    char *json = slurp(p);
    assert_non_null(json);
    assert_non_null(strstr(json, "\"incomplete\": true"));
    free(json);
    snprintf(p, sizeof p, "%s/report.md", run);
    char *md = slurp(p);
    assert_non_null(md);
    assert_non_null(strstr(md, "INCOMPLETE"));
    free(md);
    char *xml = slurp(junit);
    assert_non_null(xml);
    assert_null(strstr(xml, "failures=\"0\" errors=\"0\""));
    assert_non_null(strstr(xml, "ERROR"));
    free(xml);
}

KR_TEST_MAIN_SETUP(setup, NULL,
    test_full_disk_gate, test_full_disk_save_outputs, test_read_only_and_dev_full,
    test_second_writer_refused, test_resume_checks_provenance, test_aborted_gate_says_incomplete);
