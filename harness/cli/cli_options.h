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
#include <stdio.h>

#include "registry.h"

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

typedef struct {
    int id;               /* what cli_parser_next returns for it (> 0) */
    const char *name;     /* long name, without "--" */
    char short_name;      /* 0: none */
    const char *metavar;  /* the argument's name in usage ("N", "FILE"); NULL for a flag */
    cli_arg_kind_t kind;
    const char *choices;  /* CLI_CHOICE: "a|b|c" */
    const char *help;     /* '\n' starts a continuation line */
} cli_option_t;

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
};

#define CLI_OPT_THREADS \
    {CLI_ID_THREADS, "threads", 't', "N", CLI_POS_INT, NULL, "threads for the models (default: all cores)"}
#define CLI_OPT_FP8_QUANT                                                                         \
    {CLI_ID_FP8_QUANT, "fp8-quant", 0, "VARIANT", CLI_CHOICE, "vllm|traced|pure|reciprocal",            \
     "vllm | traced | pure | reciprocal (default: vllm)"}
#define CLI_OPT_MXFP4_QUANT                                                                       \
    {CLI_ID_MXFP4_QUANT, "mxfp4-quant", 0, "VARIANT", CLI_CHOICE, "aiter-even|ocp|ceil",                \
     "aiter-even | ocp | ceil (default: aiter-even)"}
#define CLI_OPT_INJECT                                                                            \
    {CLI_ID_INJECT, "inject", 0, "[KERNELS=]FAULT", CLI_STRING, NULL,                             \
     "\nrun kernels (all, or those matching KERNELS) as if they\n"                                 \
     "had FAULT, to see how kreplay reports it: wperm,\n"                                          \
     "wperm-inverse, scale-layout, scale-pow2:K, scale-const:C,\n"                                 \
     "sanitize, quant-variant:V, tile-unwritten, tile-zeros:N,\n"                                  \
     "rows-nan, ulp-nudge:P, tile-scale:C ('--inject help')"}
#define CLI_OPT_JSON {CLI_ID_JSON, "json", 0, NULL, CLI_FLAG, NULL, "JSON on stdout instead of the table"}
#define CLI_OPT_VERBOSE(help) {CLI_ID_VERBOSE, "verbose", 'v', NULL, CLI_FLAG, NULL, help}
#define CLI_OPT_QUIET \
    {CLI_ID_QUIET, "quiet", 'q', NULL, CLI_FLAG, NULL, "print the summary alone, no rows"}
#define CLI_OPT_ALL_ROWS                                                                          \
    {CLI_ID_ALL_ROWS, "all-rows", 'v', NULL, CLI_FLAG, NULL,                                      \
     "print every row (default: the summary, then the failing\nand regressed rows)"}

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

/* Reports a bad value of an option (for checks beyond the row's kind) and
 * returns the usage exit code. */
int cli_option_error(const cli_command_t *cmd, const char *option, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Applies the shared numerics options (threads, fp8-quant, mxfp4-quant) to
 * *k.  Returns 1 if id is one of them, 0 otherwise. */
int cli_apply_kernel_option(const cli_value_t *v, kernel_options_t *k);

void cli_print_usage(FILE *fp, const cli_command_t *cmd);

/* The name among candidates closest to word (edit distance at most about a
 * third of its length, at least 1), or NULL. */
const char *cli_closest(const char *word, const char *const *candidates, int n);

#endif
