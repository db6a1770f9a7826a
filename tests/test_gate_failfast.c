/* Fail fast: every input a gate needs is checked before its first case.
 *
 * Feeds kreplay gate: a --baseline path that does not exist (and then
 * --baseline-init, which creates it, directories included), a baseline that
 * is not a results file, a --junit path under a regular file, `baseline
 * update` into a directory that does not exist, and suites whose sweeps make
 * 10223616 cases (39 items of 64 shapes x 64 m x 64 seeds) or 524288 through
 * --seeds.  Each refusal must come before any case ran (no partial/ file
 * written), with exit 2 and one line naming the file or the limit. */
/* ctest-labels: fault;gate */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kreplay_checks.h"
#include "results_store.h"
#include "suite_file.h"
#include "test_main.h"
#include "test_support.h"

#define SAMPLE KREPLAY_SOURCE_DIR "/cases/samples/moe_gate_N256_K2048_M8.h5"

static char dir[1024];
static char suite[1200];

#define write_text(path, text) assert_int_equal(test_write_text(path, text), 0)

/* DIR/NAME, a path in this test's directory, into buf. */
static void in_dir(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
}

static int setup(void **state)
{
    (void)state;
    assert_int_equal(test_tmp_dir(dir, sizeof dir, "failfast"), 0);
    in_dir(suite, sizeof suite, "suite.yaml");
    const test_suite_spec_t spec = {.name = "failfast", .files = SAMPLE, .shapes = "64x256",
                                    .m = "1, 8", .kernels = "\"w4a8.folded\""};
    test_write_suite(suite, &spec);
    return 0;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Files in RUN/partial: how many cases ran. */
static int partials(const char *run)
{
    char p[1400];
    snprintf(p, sizeof p, "%s/partial", run);
    DIR *d = opendir(p);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static int64_t row_count(const char *path)
{
    result_list_t rows;
    kr_error_t err;
    if (results_store_read(path, &rows, NULL, &err))
        fail_msg("%s", err.msg);
    int64_t n = rows.count;
    result_list_free(&rows);
    return n;
}

static void expect_refused_before_cases(const char *args, const char *run, const char *want)
{
    test_kreplay_expect(args, 2, want);
    if (run)
        assert_int_equal(partials(run), 0);
}

static void test_missing_baseline(void **state)
{
    (void)state;
    char run[1200], base[1300], junit[1300], args[8192], *out;
    in_dir(run, sizeof run, "run");
    in_dir(base, sizeof base, "baselines/nightly/main.h5");
    in_dir(junit, sizeof junit, "run.xml");
    snprintf(args, sizeof args, "gate '%s' -o '%s' --baseline '%s' --junit '%s'", suite, run, base, junit);
    expect_refused_before_cases(args, run, base);
    char *msg = test_kreplay_output(args, 2);
    assert_non_null(strstr(msg, "--baseline-init"));
    assert_non_null(strstr(msg, "kreplay baseline update"));
    free(msg);
    char res[1400];
    snprintf(res, sizeof res, "%s/results.h5", run);
    assert_false(file_exists(res));
    /* The JUnit file, if any, must not read as a passing run. */
    FILE *fp = fopen(junit, "r");
    if (fp) {
        char xml[8192];
        size_t n = fread(xml, 1, sizeof xml - 1, fp);
        xml[n] = '\0';
        fclose(fp);
        assert_null(strstr(xml, "failures=\"0\" errors=\"0\""));
    }

    /* --baseline-init creates it (and its directories) from this run... */
    snprintf(args, sizeof args, "gate '%s' -o '%s' --baseline '%s' --baseline-init", suite, run, base);
    test_kreplay_expect(args, 0, "created from this run");
    assert_true(file_exists(base));
    assert_int_equal(row_count(base), row_count(res));
    /* ...and once it exists the same command compares with it. */
    out = test_kreplay_output(args, 0);
    assert_null(strstr(out, "created from this run"));
    assert_non_null(strstr(out, "0 regressed"));
    free(out);

    /* baseline update makes missing parent directories. */
    char deep[1300];
    in_dir(deep, sizeof deep, "new/dirs/base.h5");
    snprintf(args, sizeof args, "baseline update '%s' --baseline '%s'", run, deep);
    test_kreplay_expect(args, 0, NULL);
    assert_int_equal(row_count(deep), row_count(res));
}

static void test_bad_inputs_refused_up_front(void **state)
{
    (void)state;
    char run[1200], bad[1300], args[4096];
    in_dir(run, sizeof run, "run2");
    /* A baseline that is not a results file. */
    in_dir(bad, sizeof bad, "not_results.h5");
    write_text(bad, "this is not HDF5\n");
    snprintf(args, sizeof args, "gate '%s' -o '%s' --baseline '%s'", suite, run, bad);
    expect_refused_before_cases(args, run, bad);
    /* A JUnit path whose directory cannot exist (under a regular file). */
    char junit[1400];
    snprintf(junit, sizeof junit, "%s/j.xml", bad);
    snprintf(args, sizeof args, "gate '%s' -o '%s' --junit '%s'", suite, run, junit);
    expect_refused_before_cases(args, run, bad);
    /* A history directory under a regular file. */
    snprintf(args, sizeof args, "gate '%s' -o '%s' --history '%s/hist'", suite, run, bad);
    expect_refused_before_cases(args, run, bad);
    /* --baseline-init without --baseline. */
    snprintf(args, sizeof args, "gate '%s' -o '%s' --baseline-init", suite, run);
    expect_refused_before_cases(args, run, "--baseline-init");
}

/* A sweep over `items` synth items of 64 shapes x 64 m x `seeds` seeds. */
static void write_sweep(const char *path, int items, int seeds)
{
    size_t cap = 1 << 20, len = 0;
    char *t = malloc(cap);
    len += (size_t)snprintf(t + len, cap - len, "suite: huge\ncases:\n");
    for (int i = 0; i < items; i++) {
        len += (size_t)snprintf(t + len, cap - len, "  - synth:\n      shapes: [");
        for (int s = 0; s < 64; s++)
            len += (size_t)snprintf(t + len, cap - len, "%s%dx256", s ? ", " : "", 16 * (s + 1));
        len += (size_t)snprintf(t + len, cap - len, "]\n      m: [");
        for (int m = 0; m < 64; m++)
            len += (size_t)snprintf(t + len, cap - len, "%s%d", m ? ", " : "", m + 1);
        len += (size_t)snprintf(t + len, cap - len, "]\n      seeds: [");
        for (int s = 0; s < seeds; s++)
            len += (size_t)snprintf(t + len, cap - len, "%s%d", s ? ", " : "", s + 1);
        len += (size_t)snprintf(t + len, cap - len, "]\n");
    }
    snprintf(t + len, cap - len, "kernels: [\"w4a8.folded\"]\n");
    write_text(path, t);
    free(t);
}

static void test_sweep_limit_up_front(void **state)
{
    (void)state;
    char huge[1200], run[1200], args[4096], want[256];
    in_dir(huge, sizeof huge, "huge.yaml");
    in_dir(run, sizeof run, "huge_run");
    write_sweep(huge, 39, 64);
    /* 39 x 64 x 64 x 64, counted here, not by kreplay. */
    snprintf(want, sizeof want, "%lld cases", 39LL * 64 * 64 * 64);
    /* A memory cap that a plan of 10^7 cases does not fit (and sanitizers
     * cannot run under: they reserve terabytes of address space). */
#if defined(__SANITIZE_ADDRESS__)
    const char *cap = "";
#else
    const char *cap = "ulimit -v 1048576; ";
#endif
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "%s'%s' gate '%s' -o '%s' 2>&1", cap, KREPLAY_BINARY, huge, run);
    for (int form = 0; form < 2; form++) {
        if (form == 1)
            snprintf(cmd, sizeof cmd, "%s'%s' gate '%s' --list-shapes 2>&1", cap, KREPLAY_BINARY, huge);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        char out[8192];
        size_t n = fread(out, 1, sizeof out - 1, p);
        out[n] = '\0';
        int st = pclose(p);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 2 || !strstr(out, want) || !strstr(out, "SUITE_MAX_CASES") ||
            !strstr(out, huge))
            fail_msg("%s: expected exit 2 naming the suite, '%s' and the limit:\n%s", cmd, want, out);
    }
    assert_int_equal(partials(run), 0);

    /* Within the limit in the file, over it through --seeds: 2 x 64 x 64 x 64. */
    char two[1200];
    in_dir(two, sizeof two, "two.yaml");
    write_sweep(two, 2, 1);
    snprintf(want, sizeof want, "%lld cases", 2LL * 64 * 64 * 64);
    snprintf(args, sizeof args, "gate '%s' -o '%s' --seeds 1-64", two, run);
    expect_refused_before_cases(args, run, want);
}

KR_TEST_MAIN_SETUP(setup, NULL,
    test_missing_baseline, test_bad_inputs_refused_up_front, test_sweep_limit_up_front);
