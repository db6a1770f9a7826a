/* A gate row's identity is its case's content and name, never the path the
 * case was read from: the ulp-nudge drill run from the tree's root, from a
 * build directory below it and with absolute paths from elsewhere finds the
 * same regressions against one baseline, with nothing missing or new; a case
 * whose content changed under the same name is MISSING (and fails the gate)
 * instead of being compared with another case's numbers; each failing row's
 * printed rerun command reruns exactly that row. */
/* ctest-labels: gate */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "results_store.h"
#include "suite_file.h"
#include "test_main.h"
#include "kreplay_checks.h"
#include "test_support.h"

static char root[512];


static void must(const char *cmd)
{
    char *out;
    int rc = test_sh(cmd, &out);
    if (rc != 0)
        fail_msg("'%s' exited %d: %s", cmd, rc, out);
    free(out);
}

/* "N <word>" in the gate's summary, e.g. count_of(out, "regressed"). */
static long count_of(const char *out, const char *word)
{
    char pat[64];
    snprintf(pat, sizeof pat, " %s,", word);
    const char *p = strstr(out, pat);
    if (!p)
        snprintf(pat, sizeof pat, " %s ", word), p = strstr(out, pat);
    if (!p)
        fail_msg("no '%s' count in: %.2000s", word, out);
    while (p > out && p[-1] >= '0' && p[-1] <= '9')
        p--;
    return strtol(p, NULL, 10);
}

static void read_rows(const char *path, result_list_t *rows)
{
    kr_error_t err;
    if (results_store_read(path, rows, NULL, &err))
        fail_msg("%s", err.msg);
}

static int setup(void **state)
{
    (void)state;
    test_tmp_path(root, sizeof root, "identity");
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s/cases/samples' '%s/cases/suites' '%s/build' '%s/bl' && "
             "cp '%s/cases/samples/moe_gate_N256_K2048_M8.h5' '%s/cases/samples/gdn_in_proj_ba_N48_K5120_M17.h5' "
             "'%s/cases/samples/'",
             root, root, root, root, KREPLAY_SOURCE_DIR, KREPLAY_SOURCE_DIR, root);
    must(cmd);
    char suite[1200];
    snprintf(suite, sizeof suite, "%s/cases/suites/t.yaml", root);
    const test_suite_spec_t spec = {.name = "identity", .files = "../samples/*.h5",
                                    .shapes = "64x256", .m = "1, 17", .seeds = "1",
                                    .kernels = "\"w4a8.perblock\", \"w4a8.folded\""};
    test_write_suite(suite, &spec);
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' gate cases/suites/t.yaml -o runs/base --quiet && "
             "'%s' baseline update runs/base --baseline bl/main.h5",
             root, KREPLAY_BINARY, KREPLAY_BINARY);
    must(cmd);
    return 0;
}

static void test_same_regressions_from_any_directory(void **state)
{
    (void)state;
    const char *drill = "--inject 'w4a8.folded=ulp-nudge:0.01'";
    char cmd[3][8192];
    snprintf(cmd[0], sizeof cmd[0], "cd '%s' && '%s' gate cases/suites/t.yaml -o runs/a --baseline bl/main.h5 %s",
             root, KREPLAY_BINARY, drill);
    snprintf(cmd[1], sizeof cmd[1],
             "cd '%s/build' && '%s' gate ../cases/suites/t.yaml -o ../runs/b --baseline ../bl/main.h5 %s", root,
             KREPLAY_BINARY, drill);
    snprintf(cmd[2], sizeof cmd[2],
             "cd / && '%s' gate '%s/cases/suites/t.yaml' -o '%s/runs/c' --baseline '%s/bl/main.h5' %s",
             KREPLAY_BINARY, root, root, root, drill);
    long regressed[3];
    char *first_out = NULL;
    for (int i = 0; i < 3; i++) {
        char *out;
        assert_int_equal(test_sh(cmd[i], &out), 1);
        regressed[i] = count_of(out, "regressed");
        assert_int_equal(count_of(out, "missing"), 0);
        assert_int_equal(count_of(out, "new"), 0);
        if (i == 0)
            first_out = out;
        else
            free(out);
    }
    assert_true(regressed[0] > 0);
    assert_int_equal(regressed[1], regressed[0]);
    assert_int_equal(regressed[2], regressed[0]);

    /* Only the nudged kernel regressed, in every run's results file. */
    const char *runs[3] = {"a", "b", "c"};
    for (int i = 0; i < 3; i++) {
        char path[1300];
        snprintf(path, sizeof path, "%s/runs/%s/results.h5", root, runs[i]);
        result_list_t rows;
        read_rows(path, &rows);
        long n = 0;
        for (int64_t j = 0; j < rows.count; j++) {
            if (rows.rows[j].verdict != VERDICT_REGRESSED)
                continue;
            assert_string_equal(rows.rows[j].kernel, "w4a8.folded");
            assert_int_equal(strlen(rows.rows[j].case_id), 16);
            n++;
        }
        assert_int_equal(n, regressed[0]);
        result_list_free(&rows);
    }

    /* The first failing row's rerun command reruns that case and kernel
     * alone, and regresses again. */
    /* A long command is continued over lines, each ending in a backslash (the
     * console fits its width): pasted into a shell, it is one command. */
    char rerun[4096];
    test_console_command(first_out, "    rerun: ", rerun, sizeof rerun);
    char *out;
    assert_int_equal(test_sh(rerun, &out), 1);
    assert_true(count_of(out, "regressed") >= 1);
    free(out);
    const char *name = strstr(rerun, "--only-case ") + strlen("--only-case ");
    char case_name[256];
    sscanf(name, "%255s", case_name);
    char path[1300];
    snprintf(path, sizeof path, "%s/runs/a/rerun/results.h5", root);
    result_list_t rows;
    read_rows(path, &rows);
    assert_true(rows.count >= 1);
    for (int64_t j = 0; j < rows.count; j++) {
        assert_string_equal(rows.rows[j].case_name, case_name);
        assert_string_equal(rows.rows[j].kernel, "w4a8.folded");
    }
    result_list_free(&rows);
    free(first_out);
}

static void test_changed_content_is_missing_not_compared(void **state)
{
    (void)state;
    /* Another case under the same file name: the same name, other operands. */
    char cmd[8192], *out;
    snprintf(cmd, sizeof cmd,
             "cd '%s' && mkdir -p other && '%s' synth --shape 256x2048 --m 8 --seed 7 --name moe_gate_N256_K2048_M8 "
             "--out other && cp other/moe_gate_N256_K2048_M8.h5 cases/samples/",
             root, KREPLAY_BINARY);
    must(cmd);
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' gate cases/suites/t.yaml -o runs/changed --baseline bl/main.h5",
             root, KREPLAY_BINARY);
    assert_int_equal(test_sh(cmd, &out), 1);
    long missing = count_of(out, "missing"), added = count_of(out, "new");
    assert_true(missing > 0);
    assert_int_equal(added, missing);
    assert_non_null(strstr(out, "MISSING from this run (fails the gate)"));
    assert_non_null(strstr(out, "moe_gate_N256_K2048_M8 ["));
    free(out);
    /* Allowed, the same run passes: nothing else moved. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s' gate cases/suites/t.yaml -o runs/changed2 --baseline bl/main.h5 --allow-missing", root,
             KREPLAY_BINARY);
    assert_int_equal(test_sh(cmd, &out), 0);
    assert_non_null(strstr(out, "(allowed)"));
    free(out);
}

KR_TEST_MAIN_SETUP(setup, NULL,
    test_same_regressions_from_any_directory, test_changed_content_is_missing_not_compared);
