/* cli_parse, the one option loop of every subcommand: a row's store puts
 * the value in its field, the other rows reach the command's apply step in
 * order, and the loop ends with the operands or with the exit code.  Every
 * command's rows store only what their kind yields. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_commands.h"
#include "cli_options.h"
#include "test_main.h"

enum { ID_NAME = 1, ID_ON, ID_NO_OFF, ID_COUNT, ID_RATE, ID_CODE, ID_STOP };

typedef struct {
    const char *name;
    int on, off, count;
    double rate;
    const char *code_args[8];   /* what the apply step saw, in order */
    int n_code;
} toy_args_t;

static const cli_option_t toy_rows[] = {
    {ID_NAME, "name", 'n', "NAME", CLI_STRING, NULL, "a string", CLI_SET_STRING(toy_args_t, name), CLI_ROWS_SAME},
    {ID_ON, "on", 0, NULL, CLI_FLAG, NULL, "a flag", CLI_SET_TRUE(toy_args_t, on), CLI_ROWS_SAME},
    {ID_NO_OFF, "no-off", 0, NULL, CLI_FLAG, NULL, "a --no-X flag", CLI_SET_FALSE(toy_args_t, off), CLI_ROWS_SAME},
    {ID_COUNT, "count", 'c', "N", CLI_POS_INT, NULL, "an integer", CLI_SET_INT(toy_args_t, count), CLI_ROWS_CHANGED},
    {ID_RATE, "rate", 0, "R", CLI_POS_NUMBER, NULL, "a number", CLI_SET_NUMBER(toy_args_t, rate), CLI_ROWS_SAME},
    {ID_CODE, "code", 0, "TEXT", CLI_STRING, NULL, "taken by the apply step", CLI_BY_CODE, CLI_ROWS_CHANGED},
    {ID_STOP, "stop", 0, NULL, CLI_FLAG, NULL, "the apply step ends the command with 0", CLI_BY_CODE, CLI_ROWS_SAME},
};

static const cli_command_t toy_command = {
    .name = "toy",
    .synopsis = "[options] FILE...",
    .summary = "the parser under test",
    CLI_ROWS(toy_rows),
};

static int toy_apply(void *args, const cli_value_t *v)
{
    toy_args_t *a = args;
    if (v->id == ID_STOP)
        return 0;
    if (v->id == ID_CODE && a->n_code < 8)
        a->code_args[a->n_code++] = v->arg;
    return CLI_GO_ON;
}

static toy_args_t toy_defaults(void)
{
    toy_args_t a = {.off = 1, .count = 7, .rate = 0.5};
    return a;
}

static void test_stores_and_apply_in_order(void **state)
{
    (void)state;
    char *argv[] = {"toy", "--name", "alpha", "--code", "x", "--on", "-c", "12", "--no-off", "--rate", "2.5e-1",
                    "--code", "y", "file1", "file2", NULL};
    int argc = (int)(sizeof argv / sizeof argv[0]) - 1;
    toy_args_t a = toy_defaults();
    assert_int_equal(cli_parse(&toy_command, argc, argv, &a, toy_apply), CLI_GO_ON);
    assert_string_equal(a.name, "alpha");
    assert_int_equal(a.on, 1);
    assert_int_equal(a.off, 0);
    assert_int_equal(a.count, 12);
    assert_true(a.rate == 0.25);
    assert_int_equal(a.n_code, 2);
    assert_string_equal(a.code_args[0], "x");
    assert_string_equal(a.code_args[1], "y");
    assert_int_equal(optind, argc - 2);
    assert_string_equal(argv[optind], "file1");
    assert_string_equal(argv[optind + 1], "file2");
}

static void test_absent_options_keep_defaults(void **state)
{
    (void)state;
    char *argv[] = {"toy", "file1", NULL};
    toy_args_t a = toy_defaults();
    assert_int_equal(cli_parse(&toy_command, 2, argv, &a, toy_apply), CLI_GO_ON);
    assert_null(a.name);
    assert_int_equal(a.on, 0);
    assert_int_equal(a.off, 1);
    assert_int_equal(a.count, 7);
    assert_true(a.rate == 0.5);
    assert_int_equal(a.n_code, 0);
    assert_int_equal(optind, 1);
}

/* An option after the one that ends the command is never applied. */
static void test_apply_exit_code_ends_parsing(void **state)
{
    (void)state;
    char *argv[] = {"toy", "--stop", "--name", "late", "file1", NULL};
    toy_args_t a = toy_defaults();
    assert_int_equal(cli_parse(&toy_command, 5, argv, &a, toy_apply), 0);
    assert_null(a.name);
}

static void test_bad_options_exit_2(void **state)
{
    (void)state;
    char *unknown[] = {"toy", "--nmae", "x", NULL};
    char *missing[] = {"toy", "--name", NULL};
    char *not_int[] = {"toy", "--count", "0", NULL};
    char *not_number[] = {"toy", "--rate", "0", NULL};
    char *const *cases[] = {unknown, missing, not_int, not_number};
    const int argcs[] = {3, 2, 3, 3};
    for (int i = 0; i < 4; i++) {
        toy_args_t a = toy_defaults();
        assert_int_equal(cli_parse(&toy_command, argcs[i], (char **)cases[i], &a, toy_apply), EXIT_USAGE);
        assert_int_equal(a.count, 7);
        assert_true(a.rate == 0.5);
    }
}

static void test_help_exits_0(void **state)
{
    (void)state;
    char *argv[] = {"toy", "--on", "--help", "--name", "late", NULL};
    toy_args_t a = toy_defaults();
    assert_int_equal(cli_parse(&toy_command, 5, argv, &a, toy_apply), 0);
    assert_int_equal(a.on, 1);
    assert_null(a.name);
}

/* A store writes the value its kind yields: a string for an argument, a
 * flag's 1 or 0, an integer for CLI_POS_INT, a double for a number. */
static void test_every_command_stores_what_its_kind_yields(void **state)
{
    (void)state;
    int stored = 0;
    for (int c = 0; cli_commands[c]; c++) {
        const cli_command_t *cmd = cli_commands[c];
        for (int i = 0; i < cmd->n_options; i++) {
            const cli_option_t *o = &cmd->options[i];
            switch (o->store) {
            case CLI_STORE_NONE:
                assert_int_equal(o->offset, 0);
                continue;
            case CLI_STORE_STRING:
                assert_int_not_equal(o->kind, CLI_FLAG);
                break;
            case CLI_STORE_TRUE:
            case CLI_STORE_FALSE:
                assert_int_equal(o->kind, CLI_FLAG);
                break;
            case CLI_STORE_INT:
                assert_int_equal(o->kind, CLI_POS_INT);
                break;
            case CLI_STORE_NUMBER:
                assert_true(o->kind == CLI_POS_NUMBER || o->kind == CLI_NONNEG_NUMBER);
                break;
            default:
                fail_msg("kreplay %s --%s: unknown store %d", cmd->name, o->name, (int)o->store);
            }
            stored++;
        }
    }
    /* The table is really used: most rows of the subcommands store. */
    assert_true(stored >= 40);
}

static void test_int_list_option(void **state)
{
    (void)state;
    long long ms[4] = {0};
    cli_value_t v = {.id = ID_NAME, .opt = &toy_rows[0], .arg = "1,64,512"};
    assert_int_equal(cli_option_int_list(&toy_command, &v, ms, 4), 3);
    assert_int_equal(ms[0], 1);
    assert_int_equal(ms[1], 64);
    assert_int_equal(ms[2], 512);
    v.arg = "1,x";
    assert_int_equal(cli_option_int_list(&toy_command, &v, ms, 4), -1);
}

static void test_scale_layout_words(void **state)
{
    (void)state;
    const struct {
        const char *word;
        int ok;
        scale_layout_t layout;
    } cases[] = {
        {"nk", 1, SCALE_LAYOUT_NK}, {"N,K/32", 1, SCALE_LAYOUT_NK}, {"kn", 1, SCALE_LAYOUT_KN},
        {"K/32,N", 1, SCALE_LAYOUT_KN}, {"NK", 0, SCALE_LAYOUT_NK}, {"", 0, SCALE_LAYOUT_NK},
        {"nk ", 0, SCALE_LAYOUT_NK},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        /* The other layout, so a word that leaves *out alone is seen. */
        scale_layout_t got = cases[i].layout == SCALE_LAYOUT_NK ? SCALE_LAYOUT_KN : SCALE_LAYOUT_NK;
        int rc = cli_scale_layout_from_word(cases[i].word, &got);
        assert_int_equal(rc, cases[i].ok ? 0 : -1);
        if (cases[i].ok)
            assert_int_equal(got, cases[i].layout);
    }
}

KR_TEST_MAIN(
    test_stores_and_apply_in_order, test_absent_options_keep_defaults,
    test_apply_exit_code_ends_parsing, test_bad_options_exit_2, test_help_exits_0,
    test_every_command_stores_what_its_kind_yields, test_int_list_option, test_scale_layout_words);
