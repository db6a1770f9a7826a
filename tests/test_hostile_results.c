/* Hostile results files, FIFOs and names: what report, merge, baseline
 * update, gate --baseline, --history and --resume read.
 *
 * Feeds kreplay (the binary, each run under a time limit so that a hang of
 * an old build fails instead of hanging the test):
 * - tests/fixtures/corrupt_results/: results files that crash libhdf5 1.10
 *   itself (SIGSEGV in a variable-length attribute and in the rows'
 *   compound conversion, "free(): invalid pointer"), or hang it, through
 *   report, merge, baseline update, gate --baseline, report --history (a
 *   warning naming the file, the report still written) and a partial under
 *   gate --resume: one error naming the file, exit 2, never a crash or a hang;
 * - a FIFO as a results file (report, merge), inside --history, named by a
 *   row's case_path (the non-finite map opens it), as a partial, as a case,
 *   as --plugin, as --policy (replay, gate) and as a suite's policy: refused
 *   by what it is, at once, never opened for a blocking read;
 * - names with ANSI escapes, BEL, CR and newlines in a results file: in the
 *   gate's MISSING rows (a name that forges a "gate PASSED" line), in
 *   merge's and report's errors, and a newline in an attribute value: none
 *   reaches the terminal raw, every message stays one line. */
/* ctest-labels: security;malformed */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <hdf5.h>
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

#define FIXTURES KREPLAY_SOURCE_DIR "/tests/fixtures/corrupt_results"

static char dir[512];    /* the tiny suite and its clean run (dir/run) */

/* kreplay gives up on a read after KREPLAY_READ_TIMEOUT seconds: READ_LIMIT
 * for every file, HANG_LIMIT (short, so the test stays fast) only where the
 * file read is the hanging one.  A crash is said as one only if the reading
 * process dies within the limit, and under AddressSanitizer it first writes
 * a symbolized report, which takes seconds on a loaded machine: under the
 * short limit its phrase would turn into the hang's. */
#define READ_LIMIT "10"
#define HANG_LIMIT "2"

static void read_time_limit(const char *seconds)
{
    setenv("KREPLAY_READ_TIMEOUT", seconds, 1);
}

static int setup(void **state)
{
    (void)state;
    read_time_limit(READ_LIMIT);
    hostile_tiny_run(dir, sizeof dir, "hostile-results", 1);
    char *out = NULL;
    const int rc = hostile_run(&out, "synth --shape 64x256 --m 4 --out '%s/cases'", dir);
    if (rc != 0)
        fail_msg("synth: exit %d: %s", rc, out);
    free(out);
    return 0;
}

static void expect_refused(int rc, const char *out, const char *a, const char *b)
{
    if (rc != 2)
        fail_msg("expected exit 2, got %d:\n%s", rc, out);
    hostile_expect(out, "kreplay: error:");
    hostile_expect(out, a);
    if (b)
        hostile_expect(out, b);
}

/* ---------------------------------------------------- libhdf5's crashers */

static void test_crashing_results_files(void **state)
{
    (void)state;
    /* The signal is the library's (SIGSEGV, SIGABRT); under AddressSanitizer
     * the reading process ends on the sanitizer's report instead. */
    static const struct {
        const char *name, *phrase;
    } fixtures[] = {
        {"results_segv_vlen_attr.h5", "the HDF5 library crashed reading it"},
        {"results_segv_rows_compound.h5", "the HDF5 library crashed reading it"},
        {"results_abort_free.h5", "the HDF5 library crashed reading it"},
        {"results_hang.h5", "reading it did not finish"},
    };
    char out_dir[1024], base[1024];
    snprintf(out_dir, sizeof out_dir, "%s/crash-report", dir);
    snprintf(base, sizeof base, "%s/crash-base.h5", dir);
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        read_time_limit(strstr(fixtures[i].name, "hang") ? HANG_LIMIT : READ_LIMIT);
        char *out = NULL;
        int rc = hostile_run(&out, "report '%s/%s' -o '%s' --no-plots", FIXTURES, fixtures[i].name,
                             out_dir);
        expect_refused(rc, out, fixtures[i].name, fixtures[i].phrase);
        free(out);
        /* After a good shard the reading process's heap is another: a file
         * that crashes libhdf5 from a fresh start may then read as garbage
         * instead; refused either way. */
        rc = hostile_run(&out, "merge -o '%s/crash-merge' '%s/run/results.h5' '%s/%s'", dir, dir,
                         FIXTURES, fixtures[i].name);
        expect_refused(rc, out, fixtures[i].name, NULL);
        free(out);
        rc = hostile_run(&out, "baseline update '%s/%s' --baseline '%s'", FIXTURES,
                         fixtures[i].name, base);
        expect_refused(rc, out, fixtures[i].name, fixtures[i].phrase);
        assert_int_equal(access(base, F_OK), -1);
        free(out);
    }
    read_time_limit(READ_LIMIT);
}

/* The gate reads a baseline at its end and partials at its start. */
static void test_crashing_baseline_and_partial(void **state)
{
    (void)state;
    char *out = NULL;
    int rc = hostile_run(&out, "gate '%s/tiny.yaml' -o '%s/crash-gate' -q --baseline '%s/%s'", dir,
                         dir, FIXTURES, "results_segv_vlen_attr.h5");
    expect_refused(rc, out, "results_segv_vlen_attr.h5", "crashed reading it");
    free(out);

    /* A run to resume whose first partial is the hanging file. */
    char resume[768];
    snprintf(resume, sizeof resume, "%s/crash-resume", dir);
    hostile_sh("cp -r '%s/run' '%s' && p=$(ls '%s/partial' | head -1) && "
               "cp '%s/results_hang.h5' \"%s/partial/$p\"",
               dir, resume, resume, FIXTURES, resume);
    rc = hostile_run(&out, "gate '%s/tiny.yaml' -o '%s' -q --resume", dir, resume);
    expect_refused(rc, out, "/partial/", "reading it did not finish");
    free(out);
}

/* A history run that cannot be read is a warning naming it; the report is
 * still written from the others. */
static void test_crashing_history(void **state)
{
    (void)state;
    char hist[768], cmd[1024];
    snprintf(hist, sizeof hist, "%s/crash-history", dir);
    hostile_sh("mkdir -p '%s' && cp '%s/results_segv_rows_compound.h5' '%s/a.h5' && "
               "cp '%s/results_hang.h5' '%s/b.h5' && cp '%s/run/results.h5' '%s/c.h5'",
               hist, FIXTURES, hist, FIXTURES, hist, dir, hist);
    char *out = NULL;
    const int rc = hostile_run(&out, "report '%s/run' -o '%s/crash-hist-report' --history '%s' --no-plots",
                               dir, dir, hist);   /* the hanging run costs all of READ_LIMIT */
    if (rc != 0)
        fail_msg("report with an unreadable history run: exit %d:\n%s", rc, out);
    hostile_expect(out, "history run skipped");
    hostile_expect(out, "a.h5: the HDF5 library crashed reading it");
    hostile_expect(out, "b.h5: reading it did not finish");
    snprintf(cmd, sizeof cmd, "%s/crash-hist-report/report.html", dir);
    assert_int_equal(access(cmd, F_OK), 0);
    free(out);
}

/* ------------------------------------------------------------------ FIFOs */

static void make_fifo(const char *path)
{
    unlink(path);
    if (mkfifo(path, 0644) != 0)
        fail_msg("mkfifo %s failed", path);
}

static void test_fifos_are_refused(void **state)
{
    (void)state;
    char fifo[1024], sub[768], *out = NULL;
    snprintf(fifo, sizeof fifo, "%s/fifo.h5", dir);
    make_fifo(fifo);
    int rc = hostile_run(&out, "report '%s' -o '%s/fifo-report' --no-plots", fifo, dir);
    expect_refused(rc, out, "fifo.h5", "is a FIFO (named pipe)");
    free(out);
    rc = hostile_run(&out, "merge -o '%s/fifo-merge' '%s'", dir, fifo);
    expect_refused(rc, out, "fifo.h5", "is a FIFO");
    free(out);
    rc = hostile_run(&out, "replay '%s'", fifo);
    expect_refused(rc, out, "fifo.h5", "is a FIFO");
    free(out);
    rc = hostile_run(&out, "baseline update '%s' --baseline '%s/fifo-base.h5'", fifo, dir);
    expect_refused(rc, out, "fifo.h5", "is a FIFO");
    free(out);
    rc = hostile_run(&out, "replay --plugin '%s' '%s/cases'", fifo, dir);
    assert_int_equal(rc, 2);   /* an option's error: "kreplay replay: --plugin: ..." */
    hostile_expect(out, "fifo.h5: is a FIFO (named pipe), not a plugin shared library");
    free(out);

    /* --policy, to replay and to gate; a suite's policy: */
    char policy[1024], suite[1024], text[2048];
    snprintf(policy, sizeof policy, "%s/fifo-policy.yaml", dir);
    make_fifo(policy);
    rc = hostile_run(&out, "replay --policy '%s' '%s/cases'", policy, dir);
    expect_refused(rc, out, "fifo-policy.yaml", "is a FIFO");
    free(out);
    rc = hostile_run(&out, "gate '%s/tiny.yaml' -o '%s/fifo-gate' --policy '%s'", dir, dir, policy);
    expect_refused(rc, out, "fifo-policy.yaml", "is a FIFO");
    free(out);
    snprintf(suite, sizeof suite, "%s/fifo-suite.yaml", dir);
    snprintf(text, sizeof text, "suite: tiny\npolicy: fifo-policy.yaml\ncases:\n  - synth:\n"
                                "      shapes: [64x256]\n      m: [1]\nkernels: [\"w4a8.folded\"]\n");
    assert_int_equal(test_write_text(suite, text), 0);
    rc = hostile_run(&out, "gate '%s' -o '%s/fifo-gate2'", suite, dir);
    expect_refused(rc, out, "fifo-policy.yaml", "is a FIFO (named pipe), not a regular file");
    assert_null(strstr(out, "does not exist"));
    free(out);

    /* A FIFO in --history: a warning, the report written. */
    snprintf(sub, sizeof sub, "%s/fifo-history", dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    snprintf(fifo, sizeof fifo, "%s/run.h5", sub);
    make_fifo(fifo);
    rc = hostile_run(&out, "report '%s/run' -o '%s/fifo-hist-report' --history '%s' --no-plots",
                     dir, dir, sub);
    if (rc != 0)
        fail_msg("report with a FIFO in --history: exit %d:\n%s", rc, out);
    hostile_expect(out, "history run skipped");
    hostile_expect(out, "run.h5: file: is a FIFO");
    free(out);
}

/* A FIFO as a partial of the run to resume, and as the case file a row
 * names (the non-finite map reads the cases of rows whose x had NaN/Inf). */
static void test_fifo_partial_and_case_path(void **state)
{
    (void)state;
    char resume[768], *out = NULL;
    snprintf(resume, sizeof resume, "%s/fifo-resume", dir);
    hostile_sh("cp -r '%s/run' '%s' && mkfifo '%s/partial/0000000000000000-fifo.h5'", dir, resume,
               resume);
    int rc = hostile_run(&out, "gate '%s/tiny.yaml' -o '%s' -q --resume", dir, resume);
    expect_refused(rc, out, "0000000000000000-fifo.h5", "is a FIFO");
    free(out);

    result_list_t rows;
    results_meta_t m;
    hostile_rows(&rows, 2, VERDICT_POISONED_INPUT);
    snprintf(rows.rows[0].case_path, sizeof rows.rows[0].case_path, "%.480s/fifo-case.h5", dir);
    make_fifo(rows.rows[0].case_path);
    rows.rows[0].input_nf.nan = 5;
    hostile_meta(&m, "tiny", "2024-05-01T03:00:00Z");
    char path[1024];
    snprintf(path, sizeof path, "%s/fifo-case-rows.h5", dir);
    hostile_write(path, &rows, &m);
    rc = hostile_run(&out, "report '%s' -o '%s/fifo-case-report' --no-plots", path, dir);
    if (rc != 0)
        fail_msg("report naming a FIFO as a case: exit %d:\n%s", rc, out);
    hostile_expect(out, "no non-finite map");
    hostile_expect(out, "fifo-case.h5: file: is a FIFO");
    free(out);
    result_list_free(&rows);
}

/* ------------------------------------------------------ names from files */

/* Nothing of the terminal's control language in out: no ESC, BEL or CR,
 * and no line that a name could have forged. */
static void expect_inert(const char *out)
{
    if (strchr(out, '\x1b') || strchr(out, '\a') || strchr(out, '\r'))
        fail_msg("a control character reached the output:\n%s", out);
    if (strstr(out, "\ngate PASSED: forged") || strstr(out, "\nkreplay: error: forged"))
        fail_msg("a name forged a line of the output:\n%s", out);
}

/* kreplay ARGS exits `want`, says phrase, and nothing of a name reaches its
 * output raw. */
static void expect_inert_run(const char *args, int want, const char *phrase)
{
    char *out = NULL;
    const int rc = hostile_run(&out, "%s", args);
    if (rc != want)
        fail_msg("%s: exit %d, expected %d:\n%s", args, rc, want, out);
    hostile_expect(out, phrase);
    expect_inert(out);
    free(out);
}

#define EVIL "evil\x1b]0;owned\a\x1b[2K\r\ngate PASSED: forged\x1b[0m"

static void test_names_never_reach_the_terminal_raw(void **state)
{
    (void)state;
    /* A baseline of the run plus a row the run lacks: listed as MISSING. */
    char base[1200];
    snprintf(base, sizeof base, "%s/evil-base.h5", dir);
    result_list_t rows;
    results_meta_t m;
    kr_error_t err = {{0}};
    char run_results[1200];
    snprintf(run_results, sizeof run_results, "%s/run/results.h5", dir);
    assert_int_equal(results_store_read(run_results, &rows, &m, &err), 0);
    result_t *extra = result_list_add(&rows);
    *extra = rows.rows[0];
    kr_strlcpy(extra->case_name, EVIL, sizeof extra->case_name);
    kr_strlcpy(extra->case_path, "hostile/" EVIL ".h5", sizeof extra->case_path);
    hostile_write(base, &rows, &m);
    char args[4096];
    snprintf(args, sizeof args, "gate '%s/tiny.yaml' -o '%s/evil-gate' --baseline '%s'", dir, dir, base);
    expect_inert_run(args, 1, "MISSING from this run");
    expect_inert_run(args, 1, "evil?]0;owned??[2K??gate PASSED: forged?[0m");

    /* The same row twice in two files of one run: report's error names it. */
    char a[1200], b[1200];
    snprintf(a, sizeof a, "%s/evil-a.h5", dir);
    snprintf(b, sizeof b, "%s/evil-b.h5", dir);
    const result_list_t evil_only = {.rows = extra, .count = 1, .cap = 1};
    hostile_write(a, &evil_only, &m);
    hostile_write(b, &evil_only, &m);
    snprintf(args, sizeof args, "report '%s' '%s' -o '%s/evil-report' --no-plots", a, b, dir);
    expect_inert_run(args, 2, "is in two of the files");

    /* Two shards of different suite hashes: merge's error quotes both. */
    kr_strlcpy(m.suite_hash, "h\x1b[31m\r\nkreplay: error: forged", sizeof m.suite_hash);
    hostile_write(b, &rows, &m);
    snprintf(args, sizeof args, "merge -o '%s/evil-merge' '%s/run/results.h5' '%s'", dir, dir, b);
    expect_inert_run(args, 2, "suite_hash");
    result_list_free(&rows);
}

/* An attribute whose value holds a newline: the error quoting it is one line. */
static void test_attribute_newline_one_line(void **state)
{
    (void)state;
    char path[768], *out = NULL;
    snprintf(path, sizeof path, "%s/newline-schema.h5", dir);
    hostile_sh("cp '%s/run/results.h5' '%s'", dir, path);
    hostile_set_attr(path, "schema", "kreplay.results/9\nkreplay: error: forged");
    const int rc = hostile_run(&out, "report '%s' -o '%s/newline-report' --no-plots", path, dir);
    assert_int_equal(rc, 2);
    hostile_expect(out, "schema: is \"kreplay.results/9?kreplay: erro\"");
    expect_inert(out);
    assert_int_equal(test_count_substr(out, "\n"), 1);
    free(out);
}

KR_TEST_MAIN_SETUP(setup, NULL, test_crashing_results_files, test_crashing_baseline_and_partial,
                   test_crashing_history, test_fifos_are_refused, test_fifo_partial_and_case_path,
                   test_names_never_reach_the_terminal_raw, test_attribute_newline_one_line);
