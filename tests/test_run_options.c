/* The options fingerprint `gate --resume` compares (run_options.h,
 * cli_run_options.h).
 *
 * Every row of every command's option table says what it does to a run's
 * rows (a row that says nothing is CLI_ROWS_UNSAID, and none may be left):
 * so an option added later cannot be forgotten by the resume check.  The
 * gate's rows are checked by name against the list written here by hand:
 * kernels, faults, filters, seeds and shards change rows; where rows go or
 * how they are shown does not; the policy only judges them again.
 *
 * The fingerprint of a command line is compared with strings written by
 * hand (canonical: the table's order, not the order typed), and the diff
 * names each differing option with its old and new value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli_commands.h"
#include "cli_run_options.h"
#include "run_options.h"
#include "test_main.h"

static void test_every_option_says_what_it_does_to_rows(void **state)
{
    (void)state;
    for (int i = 0; cli_commands[i]; i++) {
        const char *first = NULL;
        int n = cli_options_unclassified(cli_commands[i], &first);
        if (n != 0)
            fail_msg("kreplay %s: %d option(s) do not say whether they change rows, first --%s",
                     cli_commands[i]->name, n, first);
    }
}

/* The gate's table, by name: what --resume must match. */
static void test_gate_rows_classified_by_hand(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        cli_rows_t rows;
    } want[] = {
        {"out", CLI_ROWS_SAME},          {"baseline", CLI_ROWS_SAME},    {"baseline-init", CLI_ROWS_SAME},
        {"allow-missing", CLI_ROWS_SAME}, {"junit", CLI_ROWS_SAME},      {"policy", CLI_ROWS_REJUDGED},
        {"history", CLI_ROWS_SAME},      {"shard", CLI_ROWS_CHANGED},    {"resume", CLI_ROWS_SAME},
        {"force", CLI_ROWS_SAME},        {"only-shape", CLI_ROWS_CHANGED}, {"only-band", CLI_ROWS_CHANGED},
        {"only-case", CLI_ROWS_CHANGED}, {"kernels", CLI_ROWS_CHANGED},  {"list-shapes", CLI_ROWS_SAME},
        {"seeds", CLI_ROWS_CHANGED},     {"inject", CLI_ROWS_CHANGED},   {"all-rows", CLI_ROWS_SAME},
        {"quiet", CLI_ROWS_SAME},        {"threads", CLI_ROWS_SAME},     {"help", CLI_ROWS_SAME},
        {"device", CLI_ROWS_CHANGED},    {"gpus", CLI_ROWS_SAME},        {"model-rows", CLI_ROWS_CHANGED},
        {"baseline-other-suite", CLI_ROWS_SAME},
    };
    const cli_command_t *gate = &cli_gate_command;
    assert_int_equal(gate->n_options + 1, (int)(sizeof want / sizeof want[0]));
    for (int i = 0; i <= gate->n_options; i++) {
        const cli_option_t *o = cli_option_row(gate, i);
        int found = 0;
        for (size_t j = 0; j < sizeof want / sizeof want[0]; j++)
            if (!strcmp(want[j].name, o->name)) {
                found = 1;
                if (o->rows != want[j].rows)
                    fail_msg("gate --%s: classified %d, expected %d", o->name, o->rows, want[j].rows);
            }
        if (!found)
            fail_msg("gate --%s: not in this test's list: say whether it changes rows", o->name);
    }
}

static void fingerprint_of(char **argv, int argc, char *buf, size_t cap)
{
    assert_int_equal(cli_options_fingerprint(&cli_gate_command, argc, argv, buf, cap), 0);
}

static void test_gate_fingerprint(void **state)
{
    (void)state;
    char buf[2048];
    /* Typed in another order than the table's; the display options and the
     * run directory are not part of it. */
    char *a[] = {"gate", "--inject", "w4a8.folded=tile-scale:1.5", "-q", "suite.yaml", "-o", "runs/x",
                 "--seeds", "1-3", "-k", "w4a8.*", "--junit", "j.xml", "-t", "2", NULL};
    fingerprint_of(a, 15, buf, sizeof buf);
    assert_string_equal(buf, "kernels=w4a8.*;seeds=1-3;inject=w4a8.folded=tile-scale:1.5");
    char *b[] = {"gate", "suite.yaml", "-o", "runs/y", "--all-rows", "--resume", "--force", NULL};
    fingerprint_of(b, 7, buf, sizeof buf);
    assert_string_equal(buf, "");
    char *c[] = {"gate", "suite.yaml", "--only-band", "decode", "--only-case", "a;b", "--shard", "2/4",
                 "--only-shape", "48x5120", NULL};
    fingerprint_of(c, 10, buf, sizeof buf);
    assert_string_equal(buf, "shard=2/4;only-shape=48x5120;only-band=decode;only-case=a\\;b");
    /* Too small a buffer is an error, not a cut fingerprint. */
    char tiny[16];
    assert_int_equal(cli_options_fingerprint(&cli_gate_command, 15, a, tiny, sizeof tiny), -1);
}

static void test_append_escapes(void **state)
{
    (void)state;
    char buf[64] = "";
    assert_int_equal(run_options_append(buf, sizeof buf, "inject", "a;b\\c"), 0);
    assert_int_equal(run_options_append(buf, sizeof buf, "flag", NULL), 0);
    assert_string_equal(buf, "inject=a\\;b\\\\c;flag");
    char small[12] = "x=1";
    assert_int_equal(run_options_append(small, sizeof small, "kernels", "w4a8"), -1);
    assert_string_equal(small, "x=1");   /* unchanged */
}

static void test_diff_names_each_option(void **state)
{
    (void)state;
    char msg[1024];
    assert_int_equal(run_options_diff("kernels=w4a8.*;seeds=1-3", "kernels=w4a8.*;seeds=1-3", msg, sizeof msg), 0);
    assert_int_equal(run_options_diff("", "", msg, sizeof msg), 0);
    assert_int_equal(run_options_diff("", "inject=w4a8.folded=tile-scale:1.5", msg, sizeof msg), 1);
    assert_string_equal(msg, "--inject: was not given, now 'w4a8.folded=tile-scale:1.5'");
    assert_int_equal(run_options_diff("kernels=w4a8.*;only-case=a\\;b", "kernels=w4a4.*", msg, sizeof msg), 2);
    assert_string_equal(msg, "--kernels: was 'w4a8.*', now 'w4a4.*'; --only-case: was 'a;b', now not given");
    /* An entry the gate adds is no option: no dashes. */
    assert_int_equal(run_options_diff("python kernel k.py:f=00ff", "python kernel k.py:f=11ee", msg, sizeof msg), 1);
    assert_string_equal(msg, "python kernel k.py:f: was '00ff', now '11ee'");
    /* The same values in another order of the same option differ. */
    assert_int_equal(run_options_diff("seeds=1-2;seeds=3-4", "seeds=3-4;seeds=1-2", msg, sizeof msg), 1);
    assert_string_equal(msg, "--seeds: was '1-2', '3-4', now '3-4', '1-2'");
}

KR_TEST_MAIN(test_every_option_says_what_it_does_to_rows, test_gate_rows_classified_by_hand, test_gate_fingerprint,
             test_append_escapes, test_diff_names_each_option);
