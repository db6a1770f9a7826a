/* Partials, shards, baselines and histories that lie.
 *
 * Feeds kreplay (the binary) a clean gate run of a 4-case suite, then:
 * - under gate --resume: a partial for a case the suite does not have (its
 *   suite hash and build copied from a real partial), and a partial
 *   claiming 50 times its case's rows: refused naming the partial (they
 *   were merged: "gate PASSED: 102 rows" for a suite of 4);
 * - to merge: a shard holding every row twice: refused (8 rows from a run
 *   of 4, exit 0);
 * - a results file of 0 rows to baseline update and as gate --baseline, a
 *   baseline of another suite to gate and merge (--baseline-other-suite
 *   compares anyway): refused (a gate against them passed, every row NEW);
 * - to report: a run with a failing row: exit 1, as the gate would (0);
 * - to report --history: 12 runs, the two oldest with unreadable rows, the
 *   newest one too, with --last 10: only the 10 newest runs' rows are read
 *   (no warning about the two oldest), the newest's failure is a warning
 *   naming it; and 40 runs of 1500 rows against 12: the peak memory of
 *   report does not grow with the runs left out of the trend. */
/* ctest-labels: malformed */
#define _DEFAULT_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <hdf5.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hostile_files.h"
#include "kr_string.h"
#include "results_store.h"
#include "test_main.h"
#include "test_support.h"

extern char **environ;

static char dir[512];   /* the tiny suite and its clean run (dir/run) */

static int setup(void **state)
{
    (void)state;
    hostile_tiny_run(dir, sizeof dir, "hostile-runs", 1);
    return 0;
}

/* The rows and provenance of the clean run's results file. */
static void read_run(result_list_t *rows, results_meta_t *m)
{
    char path[1024];
    kr_error_t err = {{0}};
    snprintf(path, sizeof path, "%s/run/results.h5", dir);
    if (results_store_read(path, rows, m, &err))
        fail_msg("%s", err.msg);
}

/* A copy of the clean run to resume, and its first partial's key, rows and
 * provenance. */
static void copy_run(const char *to, char *key, size_t key_cap, result_list_t *rows,
                     results_meta_t *m)
{
    hostile_sh("rm -rf '%s' && cp -r '%s/run' '%s'", to, dir, to);
    read_run(rows, m);
    /* The partial of the first row's case: its key is the row's case path. */
    kr_strlcpy(key, rows->rows[0].case_path, key_cap);
    int64_t k = 0;
    for (int64_t i = 0; i < rows->count; i++)
        if (!strcmp(rows->rows[i].case_path, key))
            rows->rows[k++] = rows->rows[i];
    rows->count = k;
}

static void append_partial(const char *run, const char *key, const result_list_t *rows,
                           const results_meta_t *m)
{
    kr_error_t err = {{0}};
    if (results_store_append_case(run, key, rows->rows, rows->count, m, &err))
        fail_msg("%s", err.msg);
}

static void test_forged_partials(void **state)
{
    (void)state;
    char run[1024], key[512], *out = NULL;
    result_list_t rows;
    results_meta_t m;

    /* A case of another shape, its rows and provenance otherwise real. */
    snprintf(run, sizeof run, "%s/forged-case", dir);
    copy_run(run, key, sizeof key, &rows, &m);
    const char *forged_key = "synth:shape:128x256:M99:s9:i0";
    for (int64_t i = 0; i < rows.count; i++)
        kr_strlcpy(rows.rows[i].case_path, forged_key, sizeof rows.rows[i].case_path);
    append_partial(run, forged_key, &rows, &m);
    int rc = hostile_run(&out, "gate '%s/tiny.yaml' -o '%s' --resume", dir, run);
    assert_int_equal(rc, 2);
    hostile_expect(out, "/partial/");
    hostile_expect(out, "synth:shape:128x256:M99:s9:i0' is not one this run plans");
    free(out);
    result_list_free(&rows);

    /* A real case's partial claiming 50 times its rows. */
    snprintf(run, sizeof run, "%s/forged-rows", dir);
    copy_run(run, key, sizeof key, &rows, &m);
    result_list_t many = {0};
    for (int copy = 0; copy < 50; copy++)
        for (int64_t i = 0; i < rows.count; i++)
            *result_list_add(&many) = rows.rows[i];
    append_partial(run, key, &many, &m);
    rc = hostile_run(&out, "gate '%s/tiny.yaml' -o '%s' --resume", dir, run);
    assert_int_equal(rc, 2);
    hostile_expect(out, "occurs twice for its case: more rows than the plan gives");
    free(out);
    result_list_free(&rows);
    result_list_free(&many);
}

static void test_shard_with_repeated_rows(void **state)
{
    (void)state;
    result_list_t rows, twice = {0};
    results_meta_t m;
    read_run(&rows, &m);
    for (int copy = 0; copy < 2; copy++)
        for (int64_t i = 0; i < rows.count; i++)
            *result_list_add(&twice) = rows.rows[i];
    char shard[1024], *out = NULL;
    snprintf(shard, sizeof shard, "%s/twice.h5", dir);
    hostile_write(shard, &twice, &m);
    const int rc = hostile_run(&out, "merge -o '%s/twice-merged' '%s'", dir, shard);
    assert_int_equal(rc, 2);
    hostile_expect(out, "twice.h5: rows: case ");
    hostile_expect(out, "occurs twice");
    free(out);
    result_list_free(&rows);
    result_list_free(&twice);
}

static void test_baselines_that_cannot_judge(void **state)
{
    (void)state;
    result_list_t rows, none = {0};
    results_meta_t m;
    read_run(&rows, &m);
    char zero[1024], other[1024], *out = NULL;
    snprintf(zero, sizeof zero, "%s/zero.h5", dir);
    hostile_write(zero, &none, &m);
    int rc = hostile_run(&out, "baseline update '%s' --baseline '%s/zero-base.h5'", zero, dir);
    assert_int_equal(rc, 2);
    hostile_expect(out, "0 rows");
    free(out);
    rc = hostile_run(&out, "gate '%s/tiny.yaml' -o '%s/zero-gate' -q --baseline '%s' --allow-missing",
                     dir, dir, zero);
    assert_int_equal(rc, 2);
    hostile_expect(out, "zero.h5: baseline: 0 rows");
    free(out);

    results_meta_t o = m;
    kr_strlcpy(o.suite_name, "another-suite", sizeof o.suite_name);
    snprintf(other, sizeof other, "%s/other-suite.h5", dir);
    hostile_write(other, &rows, &o);
    rc = hostile_run(&out, "gate '%s/tiny.yaml' -o '%s/other-gate' -q --baseline '%s'", dir, dir, other);
    assert_int_equal(rc, 2);
    hostile_expect(out, "of suite 'another-suite', this run is of suite 'tiny'");
    free(out);
    rc = hostile_run(&out, "merge -o '%s/other-merge' --baseline '%s' '%s/run/results.h5'", dir, other, dir);
    assert_int_equal(rc, 2);
    hostile_expect(out, "another-suite");
    free(out);
    /* Asked for: compared (the same rows: nothing regressed). */
    rc = hostile_run(&out, "gate '%s/tiny.yaml' -o '%s/other-gate2' -q --baseline '%s' --baseline-other-suite",
                     dir, dir, other);
    if (rc != 0)
        fail_msg("gate --baseline-other-suite: exit %d: %s", rc, out);
    free(out);
    result_list_free(&rows);
}

static void test_report_exits_as_the_gate(void **state)
{
    (void)state;
    result_list_t rows;
    results_meta_t m;
    hostile_rows(&rows, 4, VERDICT_PASS);
    hostile_meta(&m, "tiny", "2024-05-01T03:00:00Z");
    char path[1024], *out = NULL;
    snprintf(path, sizeof path, "%s/passing.h5", dir);
    hostile_write(path, &rows, &m);
    int rc = hostile_run(&out, "report '%s' -o '%s/passing-report' --no-plots", path, dir);
    assert_int_equal(rc, 0);
    free(out);
    rows.rows[2].verdict = VERDICT_WRONG;
    snprintf(path, sizeof path, "%s/failing.h5", dir);
    hostile_write(path, &rows, &m);
    rc = hostile_run(&out, "report '%s' -o '%s/failing-report' --no-plots", path, dir);
    assert_int_equal(rc, 1);
    free(out);
    result_list_free(&rows);
}

/* ------------------------------------------------------------ history */

/* Run i of a history: the run's rows at time 2024-05-<i>; with broken, its
 * /rows an integer dataset of as many elements (its provenance and row
 * count still read). */
static void write_history_run(const char *hist, int i, const result_list_t *rows,
                              const results_meta_t *m0, int broken)
{
    results_meta_t m = *m0;
    char path[1200];
    snprintf(m.time_utc, sizeof m.time_utc, "2024-05-%02dT03:00:00Z", i % 100);
    snprintf(path, sizeof path, "%s/run%02d.h5", hist, i);
    hostile_write(path, rows, &m);
    if (!broken)
        return;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_int_equal(H5Ldelete(f, "rows", H5P_DEFAULT), 0);
    hsize_t n = (hsize_t)rows->count;
    hid_t sp = H5Screate_simple(1, &n, NULL);
    hid_t ds = H5Dcreate2(f, "rows", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int *zeros = calloc((size_t)n, sizeof *zeros);
    assert_int_equal(H5Dwrite(ds, H5T_NATIVE_INT, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros), 0);
    free(zeros);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);
}

static void test_history_newest_by_provenance(void **state)
{
    (void)state;
    result_list_t rows;
    results_meta_t m;
    read_run(&rows, &m);
    char hist[1024], *out = NULL;
    snprintf(hist, sizeof hist, "%s/history12", dir);
    assert_int_equal(mkdir(hist, 0755), 0);
    for (int i = 1; i <= 12; i++)
        write_history_run(hist, i, &rows, &m, i <= 2);
    int rc = hostile_run(&out, "report '%s/run' -o '%s/hist-report' --history '%s' --last 10 --no-plots",
                         dir, dir, hist);
    assert_int_equal(rc, 0);
    assert_null(strstr(out, "history run skipped"));
    hostile_expect(out, "trend over 11 runs");
    free(out);
    /* The newest unreadable: never skipped in silence. */
    write_history_run(hist, 12, &rows, &m, 1);
    rc = hostile_run(&out, "report '%s/run' -o '%s/hist-report' --history '%s' --last 10 --no-plots",
                     dir, dir, hist);
    assert_int_equal(rc, 0);
    hostile_expect(out, "history run skipped");
    hostile_expect(out, "run12.h5");
    hostile_expect(out, "trend over 10 runs");
    assert_null(strstr(out, "run01.h5"));
    free(out);
    result_list_free(&rows);
}

/* Peak resident memory (KiB) of kreplay report over HIST's runs. */
static long report_peak_kib(const char *hist)
{
    char rep[1200], binary[1024];
    snprintf(rep, sizeof rep, "%s/peak-report", dir);
    kr_strlcpy(binary, hostile_binary(), sizeof binary);
    char run[1024];
    snprintf(run, sizeof run, "%s/run", dir);
    char *argv[] = {binary, "report", run, "-o", rep, "--history", (char *)hist, "--last", "10",
                    "--no-plots", "-q", NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, binary, NULL, NULL, argv, environ), 0);
    int status = 0;
    struct rusage ru;
    assert_int_equal(wait4(pid, &status, 0, &ru), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    return ru.ru_maxrss;
}

static void test_history_memory_does_not_grow(void **state)
{
    (void)state;
    result_list_t rows, big = {0};
    results_meta_t m;
    read_run(&rows, &m);
    /* 1500 rows a run: 3.6 MB of rows in memory each. */
    for (int copy = 0; copy < 1500; copy++) {
        result_t *r = result_list_add(&big);
        *r = rows.rows[copy % rows.count];
        snprintf(r->case_path, sizeof r->case_path, "hist/case%04d.h5", copy);
        snprintf(r->case_name, sizeof r->case_name, "case%04d", copy);
    }
    char few[1024], many[1024];
    snprintf(few, sizeof few, "%s/history-few", dir);
    snprintf(many, sizeof many, "%s/history-many", dir);
    assert_int_equal(mkdir(few, 0755), 0);
    assert_int_equal(mkdir(many, 0755), 0);
    for (int i = 1; i <= 40; i++) {
        write_history_run(many, i, &big, &m, 0);
        if (i > 28)
            write_history_run(few, i, &big, &m, 0);
    }
    const long kib_few = report_peak_kib(few), kib_many = report_peak_kib(many);
    /* The 28 runs more, never loaded: 28 x 1500 x sizeof(result_t) = 100 MiB
     * were they loaded.  Allow 30 MiB of noise. */
    if (kib_many - kib_few > 30 * 1024)
        fail_msg("report's peak memory grew from %ld KiB (12 runs) to %ld KiB (40 runs), the trend "
                 "keeping 10", kib_few, kib_many);
    result_list_free(&rows);
    result_list_free(&big);
}

KR_TEST_MAIN_SETUP(setup, NULL, test_forged_partials, test_shard_with_repeated_rows,
                   test_baselines_that_cannot_judge, test_report_exits_as_the_gate,
                   test_history_newest_by_provenance, test_history_memory_does_not_grow);
