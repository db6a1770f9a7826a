/* A gate is never green by mistake.  Each check is a command a user typed
 * that used to end in "gate PASSED", exit 0, without checking what was
 * asked:
 *   - --resume after the options changed (a fault injected, other kernels)
 *     reused the old rows: now exit 2 naming each option, old and new value;
 *     the same options still resume;
 *   - an --inject KERNELS glob or a suite's kernel that matches nothing
 *     (exit 2 with "did you mean");
 *   - --only-case / --only-band / --only-shape that select nothing (exit 2);
 *   - a gate into a directory of an interrupted run discarded its finished
 *     cases ("0 resumed"): now "N cases finished: add --resume"; a gate into
 *     another suite's run directory needs --force;
 *   - SIGINT ended a gate without a word: now it says what was kept and the
 *     exact resume command, dies by SIGINT, and that command finishes the run;
 *   - progress was silent where stderr is not a terminal (a CI log);
 *   - `ctest -L nightly` from the source root found no tests and exited 0.
 * The suites are small (a bundled sample and small synthetic shapes), so
 * each gate takes about a second. */
/* ctest-labels: gate */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kreplay_checks.h"
#include "suite_file.h"
#include "test_main.h"
#include "test_support.h"

#define SAMPLE KREPLAY_SOURCE_DIR "/cases/samples/moe_gate_N256_K2048_M8.h5"

static char dir[1024];
static char suite[1200];

static int setup(void **state)
{
    (void)state;
    assert_int_equal(test_tmp_dir(dir, sizeof dir, "gate-green"), 0);
    snprintf(suite, sizeof suite, "%s/suite.yaml", dir);
    const test_suite_spec_t spec = {.name = "green", .files = SAMPLE, .shapes = "64x256", .m = "1, 8",
                                    .kernels = "\"w4a8.folded\", \"w4a8.perblock\""};
    test_write_suite(suite, &spec);
    return 0;
}

static void run_dir(char *buf, size_t cap, const char *name)
{
    snprintf(buf, cap, "%s/%s", dir, name);
}

static void gate_expect(const char *run, const char *extra, int rc, const char *want)
{
    char args[4096];
    snprintf(args, sizeof args, "gate '%s' -o '%s' -q %s", suite, run, extra);
    test_kreplay_expect(args, rc, want);
}

static char *gate_output(const char *run, const char *extra, int rc)
{
    char args[4096];
    snprintf(args, sizeof args, "gate '%s' -o '%s' -q %s", suite, run, extra);
    return test_kreplay_output(args, rc);
}

/* The gate's output holds every phrase; a refused run never says PASSED. */
static void gate_says_list(const char *run, const char *extra, int rc, const char *const *phrases)
{
    char *out = gate_output(run, extra, rc);
    test_expect_phrases(out, phrases);
    if (rc != 0 && strstr(out, "gate PASSED"))
        fail_msg("exit %d yet 'gate PASSED': %s", rc, out);
    free(out);
}
#define GATE_SAYS(run, extra, rc, ...) gate_says_list(run, extra, rc, (const char *const[]){__VA_ARGS__, NULL})

static int partials(const char *run)
{
    char p[1400];
    snprintf(p, sizeof p, "%s/partial", run);
    return test_count_files(p, ".h5");
}

static void test_resume_checks_the_options(void **state)
{
    (void)state;
    char run[1200];
    run_dir(run, sizeof run, "resume");
    gate_expect(run, "", 0, "gate PASSED");
    /* The drill that must fail: a fault on resume is refused by name. */
    GATE_SAYS(run, "--resume --inject 'w4a8.folded=tile-scale:1.5'", 2,
              "--resume", "--inject: was not given, now 'w4a8.folded=tile-scale:1.5'");
    GATE_SAYS(run, "--resume --kernels 'w4a8.*'", 2, "--kernels: was not given, now 'w4a8.*'");
    /* A run with options, resumed without them, or with others. */
    char run2[1200];
    run_dir(run2, sizeof run2, "resume-seeds");
    gate_expect(run2, "--seeds 2-3 --kernels w4a8.folded", 0, "gate PASSED");
    GATE_SAYS(run2, "--resume --seeds 2-4 --kernels w4a8.folded", 2, "--seeds: was '2-3', now '2-4'");
    GATE_SAYS(run2, "--resume --seeds 2-3", 2, "--kernels: was 'w4a8.folded', now not given");
    /* The same options in another order, display options added: resumed. */
    GATE_SAYS(run2, "--kernels w4a8.folded --all-rows --resume --seeds 2-3", 0, "gate PASSED", "(5 resumed)");
}

static void test_patterns_must_match(void **state)
{
    (void)state;
    char run[1200];
    run_dir(run, sizeof run, "patterns");
    GATE_SAYS(run, "--inject 'w4a8.foldd=ulp-nudge:0.01'", 2,
              "'w4a8.foldd' matches none of the kernels", "did you mean w4a8.folded?");
    /* A kernel the suite does not run is no target either. */
    GATE_SAYS(run, "--inject 'w4a4.aiter=ulp-nudge:0.01'", 2, "'w4a4.aiter' matches none of the kernels");
    GATE_SAYS(run, "--only-case nosuch", 2, "--only-case: no case of the suite is named 'nosuch'");
    GATE_SAYS(run, "--only-case moe_gate_N256_K2048_M9", 2, "did you mean moe_gate_N256_K2048_M8?");
    GATE_SAYS(run, "--only-band prefil", 2, "'prefil' is not a band", "did you mean prefill?");
    /* A real band and shape that hold none of the suite's cases. */
    GATE_SAYS(run, "--only-band mid", 2,
              "--only-band mid: no case of suite 'green' is selected", "64x256", "256x2048");
    GATE_SAYS(run, "--only-shape 17408x5120", 2, "--only-shape 17408x5120: no case", "nothing was checked");
    assert_int_equal(partials(run), 0);
    /* ...and leaves no results file that could pass for a run. */
    char results[1400];
    snprintf(results, sizeof results, "%s/results.h5", run);
    assert_int_equal(access(results, F_OK), -1);
    /* What matches still runs... */
    gate_expect(run, "--only-case moe_gate_N256_K2048_M8", 0, "gate PASSED");
    /* ...unless every row is UNSUPPORTED: the run compared nothing. */
    GATE_SAYS(run, "--only-case moe_gate_N256_K2048_M8 --kernels bf16.skinny", 2,
              "no row compared anything", "UNSUPPORTED");
    /* A suite's kernel list with a typo. */
    char bad[1300], args[4096];
    snprintf(bad, sizeof bad, "%s/typo.yaml", dir);
    const test_suite_spec_t spec = {.name = "typo", .files = SAMPLE, .shapes = "64x256", .m = "1",
                                    .kernels = "\"w4a8.foldd\""};
    test_write_suite(bad, &spec);
    snprintf(args, sizeof args, "gate '%s' -o '%s/typo'", bad, dir);
    test_kreplay_expect(args, 2, "did you mean w4a8.folded?");
}

static void test_run_directory_of_another_run(void **state)
{
    (void)state;
    char run[1200], path[1400];
    run_dir(run, sizeof run, "interrupted");
    gate_expect(run, "", 0, "gate PASSED");
    const int kept = partials(run);
    assert_true(kept >= 3);
    /* A run killed before its end leaves partials and no results.h5. */
    snprintf(path, sizeof path, "%s/results.h5", run);
    assert_int_equal(unlink(path), 0);
    char want[64];
    snprintf(want, sizeof want, "%d cases finished", kept);
    GATE_SAYS(run, "", 2, want, "add --resume", "--force");
    assert_int_equal(partials(run), kept);   /* nothing discarded */
    snprintf(want, sizeof want, "(%d resumed)", kept);
    GATE_SAYS(run, "--resume", 0, want);
    /* replay -o into the gate's directory: refused, then replaced by --force. */
    char args[4096];
    snprintf(args, sizeof args, "replay -o '%s' --kernels w4a8.folded '%s'", run, SAMPLE);
    test_kreplay_expect(args, 2, "holds a gate run");
    snprintf(args, sizeof args, "replay -o '%s' --force --kernels w4a8.folded '%s'", run, SAMPLE);
    test_kreplay_expect(args, 0, "2 rows: 2 PASS");
    assert_int_equal(partials(run), 0);
    /* Now a replay's results: a gate asks for --force too. */
    GATE_SAYS(run, "", 2, "holds another run, the results of a replay", "--force");
    gate_expect(run, "--force", 0, "gate PASSED");
    /* The nightly's fixed directory: the same suite again is replaced. */
    gate_expect(run, "", 0, "gate PASSED");
}

static void test_progress_in_a_log(void **state)
{
    (void)state;
    char run[1200];
    run_dir(run, sizeof run, "progress");
    /* An interval shorter than a case: a line after each (the gate's output
     * is a pipe here, as in a CI log). */
    setenv("KREPLAY_PROGRESS_SECONDS", "0.000001", 1);
    char *out = gate_output(run, "", 0);
    unsetenv("KREPLAY_PROGRESS_SECONDS");
    TEST_EXPECT_PHRASES(out, "[kreplay gate] 1/3 (33%), ", "[kreplay gate] 3/3 (100%), ");
    assert_null(strchr(out, '\r'));
    free(out);
}

/* Waits until run/partial holds a case, then sends SIGINT to pid. */
static void interrupt_after_first_case(pid_t pid, const char *run)
{
    for (int i = 0; i < 6000 && partials(run) == 0; i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    assert_true(partials(run) > 0);
    assert_int_equal(kill(pid, SIGINT), 0);
}

static void test_sigint_says_how_to_resume(void **state)
{
    (void)state;
    char big[1300], run[1200], err_path[1300];
    snprintf(big, sizeof big, "%s/many.yaml", dir);
    const test_suite_spec_t spec = {.name = "many", .files = SAMPLE, .shapes = "64x256",
                                    .m = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16",
                                    .seeds = "1, 2", .kernels = "\"w4a8.folded\""};
    test_write_suite(big, &spec);
    run_dir(run, sizeof run, "interrupt");
    snprintf(err_path, sizeof err_path, "%s/interrupt.err", dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, STDERR_FILENO);
        dup2(fd, STDOUT_FILENO);
        execl(KREPLAY_BINARY, KREPLAY_BINARY, "gate", big, "-o", run, "-q", "--force", (char *)NULL);
        _exit(127);
    }
    interrupt_after_first_case(pid, run);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    /* Ended by the signal, as an interrupted program is (130 in a shell). */
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGINT);
    char *err = test_read_file(err_path, NULL);
    assert_non_null(err);
    const int kept = partials(run);
    char want[1600];
    snprintf(want, sizeof want, "interrupted by SIGINT; %d case%s finished and kept in %s/partial/", kept,
             kept == 1 ? "" : "s", run);
    TEST_EXPECT_PHRASES(err, want, "finish the run with:\n  ");
    /* The command printed, run as it is, finishes the run. */
    const char *cmd = strstr(err, "finish the run with:\n  ") + strlen("finish the run with:\n  ");
    char line[4096];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(cmd, "\n"), cmd);
    assert_non_null(strstr(line, " --resume"));
    assert_null(strstr(line, "--force"));
    char *out = NULL;
    assert_int_equal(test_sh(line, &out), 0);
    snprintf(want, sizeof want, "(%d resumed)", kept);
    TEST_EXPECT_PHRASES(out, "gate PASSED", want);
    free(out);
    free(err);
}

/* `ctest -L nightly` from the source root: build/'s tests, or a failure
 * that says to build first; never "No tests were found" and exit 0. */
static void test_ctest_from_the_root(void **state)
{
    (void)state;
    char root[1200], cmd[4096], *out = NULL;
    run_dir(root, sizeof root, "root");
    assert_int_equal(mkdir(root, 0755), 0);
    snprintf(cmd, sizeof cmd, "cp '%s/CTestTestfile.cmake' '%s/' && cd '%s' && ctest -L nightly", KREPLAY_SOURCE_DIR,
             root, root);
    assert_true(test_sh(cmd, &out) != 0);
    TEST_EXPECT_PHRASES(out, "no_build_directory");
    free(out);
    char build[1100];
    snprintf(build, sizeof build, "%s", KREPLAY_BINARY);
    snprintf(cmd, sizeof cmd, "ln -s '%s' '%s/build' && cd '%s' && ctest -N -L nightly", dirname(build), root, root);
    assert_int_equal(test_sh(cmd, &out), 0);
    TEST_EXPECT_PHRASES(out, "nightly_gate_drill", "nightly_gate_baseline");
    free(out);
}

KR_TEST_MAIN_SETUP(setup, NULL, test_resume_checks_the_options, test_patterns_must_match,
                   test_run_directory_of_another_run, test_progress_in_a_log,
                   test_sigint_says_how_to_resume, test_ctest_from_the_root);
