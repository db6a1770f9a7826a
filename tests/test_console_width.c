/* What replay and gate print fits the width and says why a row failed:
 *  - at COLUMNS=80 no line of `replay` (every bad-case dump of
 *    tests/fixtures/pt/diag, the NaN-head sample) or of the gate's console
 *    (a drill, --all-rows) is longer than 80 characters; the least useful
 *    columns are left out (and named), a long case name is cut in the
 *    middle, notes are wrapped, a rerun command is continued with a
 *    backslash;
 *  - without COLUMNS and without a terminal (a log) lines keep to 160, and
 *    names that fit are whole;
 *  - every failing row has its reason under it: a WRONG row whose rel_fro is
 *    under its threshold says which metric failed
 *    ("worst_row_rel 0.3543 > 0.09313 (row 7)"), and the poisoned block of
 *    the NaN-head sample is on the console, not only in --json;
 *  - --failed shows the failing rows alone;
 *  - list, inspect and compare fit 80 columns too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kreplay_checks.h"
#include "test_main.h"
#include "test_support.h"

#define DIAG KREPLAY_SOURCE_DIR "/tests/fixtures/pt/diag"
#define SAMPLES KREPLAY_SOURCE_DIR "/cases/samples"
#define NANHEAD SAMPLES "/gdn_out_proj_slice_N512_K3072_M17_nanhead.h5"

/* `ENV kreplay ARGS` (stdout and stderr), its exit code checked. */
__attribute__((noinline)) static char *run(const char *env, const char *args, int want_rc)
{
    char cmd[8192], *out = NULL;
    snprintf(cmd, sizeof cmd, "%s '%s' %s 2>&1", env, KREPLAY_BINARY, args);
    const int rc = test_exit_code(test_shell(cmd, &out));
    if (rc != want_rc)
        fail_msg("%s: exit %d, wanted %d:\n%s", cmd, rc, want_rc, out ? out : "");
    return out;
}

/* Is the line one word of a shell command and its continuation: a path no
 * width can break (a command must paste as one)? */
static int unbreakable(const char *p, size_t n)
{
    while (n && *p == ' ')
        p++, n--;
    if (n >= 2 && p[n - 1] == '\\' && p[n - 2] == ' ')
        n -= 2;
    return memchr(p, ' ', n) == NULL;
}

/* Fails naming the first line of text longer than width (but a lone shell
 * word). */
static void lines_within(const char *text, int width, const char *what)
{
    int line = 1;
    for (const char *p = text; *p; line++) {
        const size_t n = strcspn(p, "\n");
        if ((int)n > width && !unbreakable(p, n))
            fail_msg("%s: line %d is %zu characters (at most %d):\n%.*s", what, line, n, width, (int)n, p);
        p += n + (p[n] == '\n');
    }
}

static void test_replay_fits_80(void **state)
{
    (void)state;
    static const char *const targets[] = {DIAG "/wperm.pt", DIAG "/nan_head.pt", DIAG "/race.pt",
                                          DIAG "/scale_const.pt", DIAG "/clean.pt", NANHEAD};
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        char args[1024];
        snprintf(args, sizeof args, "replay '%s'", targets[i]);
        char *out = run("COLUMNS=80", args, strstr(targets[i], "clean") || strstr(targets[i], "nanhead.h5") ? 0 : 1);
        lines_within(out, 80, targets[i]);
        /* the columns left out are named, with how to see them */
        const char *left_out = strstr(out, "(not shown at width 80: ");
        assert_non_null(left_out);
        assert_true(strstr(left_out, "band") && strstr(left_out, "every column"));
        free(out);
    }
    /* a long case name is cut in the middle, both ends kept */
    char *out = run("COLUMNS=80", "replay '" NANHEAD "'", 0);
    const char *row = strstr(out, "\ncase ");
    assert_non_null(row);
    row = strchr(row + 1, '\n');
    char name[128];
    assert_int_equal(sscanf(row + 1, "%127s", name), 1);
    print_message("the case column at width 80: %s\n", name);
    const size_t n = strlen(name);
    assert_true(n < strlen("gdn_out_proj_slice_N512_K3072_M17_nanhead") && strstr(name, "..."));
    assert_int_equal(strncmp(name, "gdn_", 4), 0);
    assert_string_equal(name + n - 4, "head");
    free(out);
}

static void test_log_default_160(void **state)
{
    (void)state;
    char *out = run("env -u COLUMNS", "replay '" DIAG "/race.pt' < /dev/null", 1);
    lines_within(out, 160, "race.pt without COLUMNS");
    /* every column and whole names */
    TEST_EXPECT_PHRASES(out, " band ", " max_abs ", " nonfin ", "quant.fp8_token.traced ", "recorded.out_rerun ");
    assert_null(strstr(out, "not shown at width"));
    free(out);
}

static void test_reasons_under_failing_rows(void **state)
{
    (void)state;
    /* the drill's tile fault: w4a8.folded against R_source fails with a rel_fro
     * under its threshold; the reason names the metric that failed */
    char *out = run("COLUMNS=200",
                    "replay --kernels w4a8.folded --inject 'w4a8.folded=tile-scale:1.5' '" SAMPLES
                    "/gdn_in_proj_ba_N96_K5120_M64.h5'",
                    1);
    const char *row = strstr(out, "w4a8.folded R_source ");
    assert_non_null(row);
    const char *next = strchr(row, '\n');
    assert_non_null(next);
    assert_int_equal(strncmp(next + 1, "    why: worst_row_rel 0.3543 > 0.09313 (row 7)", 47), 0);
    /* its R_exact row: rel_fro over the threshold, and the diagnosis */
    TEST_EXPECT_PHRASES(out, "    why: rel_fro 0.06711 > 0.005038", "    diagnosis: rows 0-15");
    free(out);
    /* the poisoned block, on the console */
    out = run("COLUMNS=1000", "replay '" NANHEAD "'", 0);
    TEST_EXPECT_PHRASES(out, "poisoned input: x: rows 0-16 x columns 1024-1151 (17 x 128 = 2176 NaN)");
    free(out);
}

static void test_failed_only(void **state)
{
    (void)state;
    char *out = run("COLUMNS=120", "replay --failed '" DIAG "/race.pt'", 1);
    TEST_EXPECT_PHRASES(out, "race: kernel at fault", "recorded.out_rerun R_exact", "NONDETERMINISTIC",
                        "    why: rerun differs in 3 of 512 elements",
                        "2 failing rows shown (--failed); 31 rows: 27 PASS, 1 WRONG, 1 NONDETERMINISTIC, 2 UNSUPPORTED");
    /* no passing row in the table, every failing row with its reason */
    char *table = strstr(out, "\ncase ");
    assert_non_null(table);
    char *end = strstr(table, "failing rows shown");
    assert_non_null(end);
    *end = '\0';
    assert_null(strstr(table, " PASS\n"));
    assert_null(strstr(table, "UNSUPPORTED\n"));
    assert_int_equal(test_count_substr(table, "\n    why: "), 2);
    free(out);
    /* nothing fails: the headline and the counts, no empty table */
    out = run("COLUMNS=120", "replay --failed '" DIAG "/clean.pt'", 0);
    TEST_EXPECT_PHRASES(out, "clean: no party at fault (PASS)", "0 failing rows shown (--failed)");
    assert_null(strstr(out, "\ncase "));
    free(out);
}

static void test_gate_console_fits_80(void **state)
{
    (void)state;
    char dir[1024], args[4096];
    assert_int_equal(test_tmp_dir(dir, sizeof dir, "console-width"), 0);
    snprintf(args, sizeof args,
             "gate '" KREPLAY_SOURCE_DIR "/cases/suites/default.yaml' -o '%s/run' --only-case "
             "gdn_in_proj_ba_N96_K5120_M64 --inject 'w4a8.folded=tile-scale:1.5' --all-rows",
             dir);
    char *out = run("COLUMNS=80", args, 1);
    lines_within(out, 80, "the gate's console");
    /* notes wrapped, not cut; the rerun command continued */
    TEST_EXPECT_PHRASES(out, "gate FAILED", "worst_row_rel 0.3543 > 0.09313 (row 7)", "    rerun: ", " \\\n",
                        "--only-case gdn_in_proj_ba_N96_K5120_M64");
    free(out);
}

/* The other tables and lists: the last column (or a value) wrapped under
 * itself, the compare table's columns that compare kept. */
static void test_other_tables_fit_80(void **state)
{
    (void)state;
    static const struct {
        const char *args, *must;
    } cmds[] = {
        {"list kernels", "\nquant.fp8_token      quant   1 / 1+     vLLM per-token fp8"},
        {"list kernels --verbose", "\n  accumulation:  "},
        {"list shapes", "\nmlp_gate_up             17408   5120 mxfp4  MLP gate_up projection"},
        {"inspect '" NANHEAD "'", "    block: rows 0-16 x columns 1024-1151 (17 x 128 = 2176 NaN): one"},
        {"compare w4a8.folded w4a4.aiter '" SAMPLES "/moe_gate_N256_K2048_M8.h5'",
         "(N, K and cases not shown at width 80: COLUMNS=122 shows them)"},
    };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char *out = run("COLUMNS=80", cmds[i].args, 0);
        lines_within(out, 80, cmds[i].args);
        TEST_EXPECT_PHRASES(out, cmds[i].must);
        free(out);
    }
}

KR_TEST_MAIN(test_replay_fits_80, test_log_default_160, test_reasons_under_failing_rows, test_failed_only,
             test_gate_console_fits_80, test_other_tables_fit_80);
