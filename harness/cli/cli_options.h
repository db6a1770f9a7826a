/* The option table behind every subcommand: one row per option, which parses
 * and checks its own argument, prints its own usage line, and describes how
 * a shell completes it.  Usage text, parsing, `kreplay completion bash` and
 * `kreplay man` all read the same rows, so they cannot disagree.
 *
 * A subcommand is a cli_command_t (its synopsis, description, rows and entry
 * point); the table in cli_main.c lists them for dispatch, `help CMD`, completion and
 * the man page. */
#ifndef KR_CLI_OPTIONS_H
#define KR_CLI_OPTIONS_H

#include <getopt.h>
#include <stddef.h>
#include <stdio.h>

#include "registry.h"
#include "synth.h"

typedef enum {
    CLI_FLAG = 0,   /* no argument */
    CLI_STRING,     /* any text */
    CLI_FILE,       /* a path (completed as a file) */
    CLI_DIR,        /* a directory (completed as a directory) */
    CLI_POS_INT,    /* an integer >= 1 */
    CLI_NONNEG_NUMBER, /* a number >= 0 */
    CLI_POS_NUMBER, /* a number > 0 */
    CLI_CHOICE,     /* one of the words in choices ("a|b|c") */
    CLI_KERNELS,    /* comma-separated kernel globs (completed with the registry's names) */
} cli_arg_kind_t;

/* Where cli_parse puts an option that needs no code of its own: a field of
 * the command's argument struct, named in the row by the CLI_SET_* macros
 * below.  CLI_STORE_NONE: the command's apply step takes it. */
typedef enum {
    CLI_STORE_NONE = 0,
    CLI_STORE_STRING,  /* const char *: the argument as given */
    CLI_STORE_TRUE,    /* int: 1 */
    CLI_STORE_FALSE,   /* int: 0 (a --no-X flag) */
    CLI_STORE_INT,     /* int: the CLI_POS_INT value */
    CLI_STORE_NUMBER,  /* double: the CLI_*_NUMBER value */
} cli_store_t;

/* What an option does to a run's rows, which `gate --resume` must match:
 * the CLI_ROWS_CHANGED options make the run's options fingerprint
 * (cli_run_options.h).  Every row of a command that resumes says which
 * (test_cli_parse checks the gate's), so a new option cannot be left out. */
typedef enum {
    CLI_ROWS_UNSAID = 0,
    CLI_ROWS_CHANGED,     /* another value gives other rows (kernels, faults, filters, seeds) */
    CLI_ROWS_SAME,        /* where the rows go or how they are shown, never what they hold */
    CLI_ROWS_REJUDGED,    /* the judgement only: resumed rows are judged again (--policy) */
} cli_rows_t;

typedef struct {
    int id;               /* what cli_parser_next returns for it (> 0) */
    const char *name;     /* long name, without "--" */
    char short_name;      /* 0: none */
    const char *metavar;  /* the argument's name in usage ("N", "FILE"); NULL for a flag */
    cli_arg_kind_t kind;
    const char *choices;  /* CLI_CHOICE: "a|b|c" */
    const char *help;     /* '\n' starts a continuation line */
    cli_store_t store;
    size_t offset;        /* of the stored field in the argument struct */
    cli_rows_t rows;      /* what the option does to the rows (after the store's tail) */
} cli_option_t;

/* A row's tail: CLI_BY_CODE (the command's apply step takes the option), or
 * where its value is stored in the argument struct type:
 * {..., "help", CLI_SET_STRING(gate_args_t, o.run_dir)}.  A field of any
 * other type than the store writes does not compile. */
#define CLI_BY_CODE CLI_STORE_NONE, 0
#define CLI_FIELD_OF(type, field, ctype) \
    (offsetof(type, field) + 0 * sizeof(char[_Generic(((type *)0)->field, ctype: 1, default: -1)]))
#define CLI_SET_STRING(type, field) CLI_STORE_STRING, CLI_FIELD_OF(type, field, const char *)
#define CLI_SET_TRUE(type, field) CLI_STORE_TRUE, CLI_FIELD_OF(type, field, int)
#define CLI_SET_FALSE(type, field) CLI_STORE_FALSE, CLI_FIELD_OF(type, field, int)
#define CLI_SET_INT(type, field) CLI_STORE_INT, CLI_FIELD_OF(type, field, int)
#define CLI_SET_NUMBER(type, field) CLI_STORE_NUMBER, CLI_FIELD_OF(type, field, double)

typedef struct cli_command {
    const char *name;         /* "replay" */
    const char *synopsis;     /* after "kreplay NAME ": "[options] CASE|DIR..."; '\n' separates forms */
    const char *summary;      /* one line, for the command list */
    const char *description;  /* a paragraph for --help and the man page (may be NULL) */
    const char *operands;     /* how a shell completes operands: "file", "dir", or "word word ..." */
    const cli_option_t *options;
    int n_options;
    int (*run)(int argc, char **argv);
} cli_command_t;

/* .options and .n_options of a command from its row array. */
#define CLI_ROWS(table) .options = (table), .n_options = (int)(sizeof(table) / sizeof((table)[0]))

/* Ids shared by several subcommands: their rows are the CLI_OPT_* macros
 * below, so each shared option is written once. */
enum {
    CLI_ID_THREADS = 1000,
    CLI_ID_FP8_QUANT,
    CLI_ID_MXFP4_QUANT,
    CLI_ID_INJECT,
    CLI_ID_JSON,
    CLI_ID_VERBOSE,
    CLI_ID_QUIET,
    CLI_ID_ALL_ROWS,
    CLI_ID_HELP,
    CLI_ID_OUTLIERS,
    CLI_ID_OUTLIER_GAIN,
    CLI_ID_TOKEN_SPREAD,
    CLI_ID_WEIGHT_SPREAD,
};

/* THREADS, FP8_QUANT, MXFP4_QUANT and INJECT are taken by code
 * (cli_apply_kernel_option, cli_parse_inject); CLI_OPT_THREADS_SET stores
 * the count in an int instead.  The flags take the CLI_SET_* tail that
 * says where they go. */
#define CLI_ROW_THREADS \
    CLI_ID_THREADS, "threads", 't', "N", CLI_POS_INT, NULL, "threads for the models (default: the cores this process may run on)"
#define CLI_OPT_THREADS {CLI_ROW_THREADS, CLI_BY_CODE, CLI_ROWS_SAME}
#define CLI_OPT_THREADS_SET(type, field) {CLI_ROW_THREADS, CLI_SET_INT(type, field), CLI_ROWS_SAME}
#define CLI_OPT_FP8_QUANT                                                                         \
    {CLI_ID_FP8_QUANT, "fp8-quant", 0, "VARIANT", CLI_CHOICE, "vllm|traced|pure|reciprocal",            \
     "vllm | traced | pure | reciprocal (default: vllm)", CLI_BY_CODE, CLI_ROWS_CHANGED}
#define CLI_OPT_MXFP4_QUANT                                                                       \
    {CLI_ID_MXFP4_QUANT, "mxfp4-quant", 0, "VARIANT", CLI_CHOICE, "aiter-even|ocp|ceil",                \
     "aiter-even | ocp | ceil (default: aiter-even)", CLI_BY_CODE, CLI_ROWS_CHANGED}
#define CLI_OPT_INJECT                                                                            \
    {CLI_ID_INJECT, "inject", 0, "[KERNELS=]FAULT", CLI_STRING, NULL,                             \
     "\nrun kernels (all, or those matching KERNELS) as if they\n"                                 \
     "had FAULT, to see how kreplay reports it: wperm,\n"                                          \
     "wperm-inverse, scale-layout, scale-pow2:K, scale-const:C,\n"                                 \
     "sanitize, quant-variant:V, tile-unwritten, tile-zeros:N,\n"                                  \
     "rows-nan, ulp-nudge:P, tile-scale:C ('--inject help')", CLI_BY_CODE, CLI_ROWS_CHANGED}
#define CLI_OPT_JSON(set) \
    {CLI_ID_JSON, "json", 0, NULL, CLI_FLAG, NULL, "JSON on stdout instead of the table", set, CLI_ROWS_SAME}
#define CLI_OPT_VERBOSE(help, set) {CLI_ID_VERBOSE, "verbose", 'v', NULL, CLI_FLAG, NULL, help, set, CLI_ROWS_SAME}
#define CLI_OPT_QUIET(set) \
    {CLI_ID_QUIET, "quiet", 'q', NULL, CLI_FLAG, NULL, "print the summary alone, no rows", set, CLI_ROWS_SAME}
#define CLI_OPT_ALL_ROWS(set)                                                                     \
    {CLI_ID_ALL_ROWS, "all-rows", 'v', NULL, CLI_FLAG, NULL,                                      \
     "print every row (default: the summary, then the failing\nand regressed rows)", set, CLI_ROWS_SAME}

/* The synthetic activations' options of synth and compare, taken by
 * cli_apply_synth_option; each command words their help (synth's gives the
 * defaults). */
#define CLI_OPT_OUTLIERS(help) \
    {CLI_ID_OUTLIERS, "outliers", 0, "N", CLI_STRING, NULL, help, CLI_BY_CODE, CLI_ROWS_CHANGED}
#define CLI_OPT_OUTLIER_GAIN(help) \
    {CLI_ID_OUTLIER_GAIN, "outlier-gain", 0, "G", CLI_NONNEG_NUMBER, NULL, help, CLI_BY_CODE, CLI_ROWS_CHANGED}
#define CLI_OPT_TOKEN_SPREAD(help) \
    {CLI_ID_TOKEN_SPREAD, "token-spread", 0, "S", CLI_NONNEG_NUMBER, NULL, help, CLI_BY_CODE, CLI_ROWS_CHANGED}
#define CLI_OPT_WEIGHT_SPREAD(help) \
    {CLI_ID_WEIGHT_SPREAD, "weight-spread", 0, "B", CLI_NONNEG_NUMBER, NULL, help, CLI_BY_CODE, CLI_ROWS_CHANGED}

/* One parsed option. */
typedef struct {
    int id;
    const cli_option_t *opt;
    const char *arg;      /* the argument as given (NULL for a flag) */
    long long i;          /* CLI_POS_INT */
    double d;             /* CLI_*_NUMBER */
} cli_value_t;

#define CLI_MAX_OPTIONS 64

typedef struct {
    const cli_command_t *cmd;
    int argc;
    char **argv;
    struct option longopts[CLI_MAX_OPTIONS + 2];
    char shortopts[2 * CLI_MAX_OPTIONS + 4];
    int optind;           /* after the loop: the first operand */
} cli_parser_t;

/* cli_parser_next's results besides an option id. */
#define CLI_PARSE_END 0
#define CLI_PARSE_HELP (-1)   /* --help was given and printed: exit 0 */
#define CLI_PARSE_ERROR (-2)  /* a message was printed: exit 2 */

/* An option's id is returned by cli_parser_next; an id below 256 may be the
 * option's short letter, so a getopt-style switch on 'o' keeps working.
 * After the loop, optind (and p->optind) is the first operand. */
int cli_parser_init(cli_parser_t *p, const cli_command_t *cmd, int argc, char **argv);
int cli_parser_next(cli_parser_t *p, cli_value_t *v);
/* The exit code for a CLI_PARSE_HELP / CLI_PARSE_ERROR result. */
int cli_parse_exit(int result);

/* What cli_parse and an apply step return to go on; anything else is the
 * command's exit code. */
#define CLI_GO_ON (-1)

/* A command's code for the options its rows do not store (CLI_STORE_NONE):
 * args is what cli_parse was given.  Returns CLI_GO_ON or the exit code. */
typedef int (*cli_apply_fn)(void *args, const cli_value_t *v);

/* The whole option loop of a command: parses argv by cmd's rows, stores
 * each stored option's value in args, gives the others to apply (NULL:
 * there are none), and prints usage or the error itself.  Returns CLI_GO_ON
 * with optind at the first operand, or the exit code (0 after --help, 2
 * after a bad option, or what apply returned). */
int cli_parse(const cli_command_t *cmd, int argc, char **argv, void *args, cli_apply_fn apply);

/* Reports a bad value of an option (for checks beyond the row's kind) and
 * returns the usage exit code. */
int cli_option_error(const cli_command_t *cmd, const char *option, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* --m M[,M...]: the values (returns their count), or -1 after saying what
 * was expected. */
int cli_option_int_list(const cli_command_t *cmd, const cli_value_t *v, long long *values, int cap);

/* Applies the shared numerics options (threads, fp8-quant, mxfp4-quant) to
 * *k.  Returns 1 if id is one of them, 0 otherwise. */
int cli_apply_kernel_option(const cli_value_t *v, kernel_options_t *k);

/* Applies the synthetic activations' options (outliers, outlier-gain,
 * token-spread, weight-spread) to *p.  Returns 1 if id is one of them, 0
 * otherwise. */
int cli_apply_synth_option(const cli_value_t *v, synth_params_t *p);

void cli_print_usage(FILE *fp, const cli_command_t *cmd);

/* Row i of cmd: its own rows for i < n_options, then --help (every command
 * has it) at i == n_options. */
const cli_option_t *cli_option_row(const cli_command_t *cmd, int i);

/* The name among candidates closest to word (edit distance at most about a
 * third of its length, at least 1), or NULL. */
const char *cli_closest(const char *word, const char *const *candidates, int n);

#endif
