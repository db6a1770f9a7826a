#include "cli_options.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "closest_name.h"
#include "quant_fp8.h"
#include "quant_mxfp4.h"

static const cli_option_t help_row = {CLI_ID_HELP, "help", 'h', NULL, CLI_FLAG, NULL,
                                      "this text", CLI_BY_CODE, CLI_ROWS_SAME};

/* The command's rows, then --help (every command has it). */
const cli_option_t *cli_option_row(const cli_command_t *cmd, int i)
{
    return i < cmd->n_options ? &cmd->options[i] : &help_row;
}

int cli_parser_init(cli_parser_t *p, const cli_command_t *cmd, int argc, char **argv)
{
    memset(p, 0, sizeof *p);
    p->cmd = cmd;
    p->argc = argc;
    p->argv = argv;
    int n = cmd->n_options + 1;
    if (n > CLI_MAX_OPTIONS + 1)
        return -1;
    /* ':' first: missing arguments are told apart from unknown options. */
    size_t len = 0;
    p->shortopts[len++] = ':';
    for (int i = 0; i < n; i++) {
        const cli_option_t *o = cli_option_row(cmd, i);
        p->longopts[i].name = o->name;
        p->longopts[i].has_arg = o->kind == CLI_FLAG ? no_argument : required_argument;
        p->longopts[i].flag = NULL;
        p->longopts[i].val = o->id;
        if (o->short_name && len + 3 < sizeof p->shortopts) {
            p->shortopts[len++] = o->short_name;
            if (o->kind != CLI_FLAG)
                p->shortopts[len++] = ':';
        }
    }
    p->shortopts[len] = '\0';
    optind = 1;
    opterr = 0;
    return 0;
}

int cli_parse_exit(int result)
{
    return result == CLI_PARSE_HELP ? 0 : EXIT_USAGE;
}

int cli_option_error(const cli_command_t *cmd, const char *option, const char *fmt, ...)
{
    fprintf(stderr, "kreplay %s: --%s: ", cmd->name, option);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    return EXIT_USAGE;
}

static const cli_option_t *row_by_short(const cli_command_t *cmd, int c)
{
    for (int i = 0; i <= cmd->n_options; i++)
        if (cli_option_row(cmd, i)->short_name == c)
            return cli_option_row(cmd, i);
    for (int i = 0; i <= cmd->n_options; i++)
        if (cli_option_row(cmd, i)->id == c)
            return cli_option_row(cmd, i);
    return NULL;
}

static int choice_ok(const char *choices, const char *arg)
{
    size_t n = strlen(arg);
    for (const char *p = choices; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, arg, n))
            return 1;
        p += len + (bar ? 1 : 0);
    }
    return 0;
}

/* Checks and converts the argument by the row's kind. */
static int check_arg(const cli_command_t *cmd, const cli_option_t *o, const char *arg, cli_value_t *v)
{
    char *end;
    switch (o->kind) {
    case CLI_POS_INT:
        v->i = strtoll(arg, &end, 10);
        if (end == arg || *end || v->i < 1)
            return cli_option_error(cmd, o->name, "'%s' is not a positive integer", arg);
        break;
    case CLI_NONNEG_NUMBER:
    case CLI_POS_NUMBER:
        v->d = strtod(arg, &end);
        if (end == arg || *end || !isfinite(v->d) || v->d < 0 || (o->kind == CLI_POS_NUMBER && v->d == 0))
            return cli_option_error(cmd, o->name, "'%s' is not a number %s 0", arg,
                                    o->kind == CLI_POS_NUMBER ? ">" : ">=");
        break;
    case CLI_CHOICE:
        if (!choice_ok(o->choices, arg)) {
            /* The metavar names what is chosen: "unknown variant 'x'". */
            char what[32];
            size_t n = 0;
            for (const char *m = o->metavar; m && *m && n + 1 < sizeof what; m++)
                what[n++] = (char)(*m >= 'A' && *m <= 'Z' ? *m - 'A' + 'a' : *m);
            what[n] = '\0';
            return cli_option_error(cmd, o->name, "unknown %s '%s' (one of %s)", n ? what : "value", arg,
                                    o->choices);
        }
        break;
    default:
        if (!*arg)
            return cli_option_error(cmd, o->name, "empty argument");
        break;
    }
    return 0;
}

static void unknown_option(const cli_command_t *cmd, const char *given)
{
    const char *names[128];
    int n = 0;
    for (int i = 0; i <= cmd->n_options && n < 128; i++)
        names[n++] = cli_option_row(cmd, i)->name;
    char word[128];
    const char *w = given;
    while (*w == '-')
        w++;
    snprintf(word, sizeof word, "%s", w);
    char *eq = strchr(word, '=');
    if (eq)
        *eq = '\0';
    const char *near = cli_closest(word, names, n);
    fprintf(stderr, "kreplay %s: unknown option '%s'", cmd->name, given);
    if (near)
        fprintf(stderr, " (did you mean --%s?)", near);
    fprintf(stderr, "\nRun 'kreplay help %s' for its options.\n", cmd->name);
}

int cli_parser_next(cli_parser_t *p, cli_value_t *v)
{
    memset(v, 0, sizeof *v);
    int c = getopt_long(p->argc, p->argv, p->shortopts, p->longopts, NULL);
    if (c == -1) {
        p->optind = optind;
        return CLI_PARSE_END;
    }
    const cli_command_t *cmd = p->cmd;
    if (c == '?') {
        const char *given = optind > 0 && optind <= p->argc ? p->argv[optind - 1] : "?";
        if (optopt && optopt < 256) {
            char buf[4] = {'-', (char)optopt, 0, 0};
            unknown_option(cmd, buf);
        } else {
            unknown_option(cmd, given);
        }
        return CLI_PARSE_ERROR;
    }
    const cli_option_t *o = (c == ':') ? NULL : row_by_short(cmd, c);
    if (c == ':') {
        const cli_option_t *m = row_by_short(cmd, optopt);
        fprintf(stderr, "kreplay %s: --%s needs an argument (%s)\n", cmd->name, m ? m->name : "?",
                m && m->metavar ? m->metavar : "?");
        return CLI_PARSE_ERROR;
    }
    if (!o)
        return CLI_PARSE_ERROR;
    if (o->id == CLI_ID_HELP) {
        cli_print_usage(stdout, cmd);
        return CLI_PARSE_HELP;
    }
    v->id = o->id;
    v->opt = o;
    v->arg = o->kind == CLI_FLAG ? NULL : optarg;
    if (v->arg && check_arg(cmd, o, v->arg, v))
        return CLI_PARSE_ERROR;
    return o->id;
}

/* The row's field in args gets the value; the rows were checked to name a
 * field of the store's type (CLI_FIELD_OF). */
static void store_value(const cli_value_t *v, void *args)
{
    char *field = (char *)args + v->opt->offset;
    switch (v->opt->store) {
    case CLI_STORE_STRING:
        *(const char **)(void *)field = v->arg;
        break;
    case CLI_STORE_TRUE:
    case CLI_STORE_FALSE:
        *(int *)(void *)field = v->opt->store == CLI_STORE_TRUE;
        break;
    case CLI_STORE_INT:
        *(int *)(void *)field = (int)v->i;
        break;
    case CLI_STORE_NUMBER:
        *(double *)(void *)field = v->d;
        break;
    default:
        break;
    }
}

int cli_parse(const cli_command_t *cmd, int argc, char **argv, void *args, cli_apply_fn apply)
{
    cli_parser_t parser;
    if (cli_parser_init(&parser, cmd, argc, argv))
        return EXIT_USAGE;
    cli_value_t v;
    int c;
    while ((c = cli_parser_next(&parser, &v)) > 0) {
        if (v.opt->store != CLI_STORE_NONE) {
            store_value(&v, args);
            continue;
        }
        int rc = apply ? apply(args, &v) : CLI_GO_ON;
        if (rc != CLI_GO_ON)
            return rc;
    }
    return c < 0 ? cli_parse_exit(c) : CLI_GO_ON;
}

int cli_option_int_list(const cli_command_t *cmd, const cli_value_t *v, long long *values, int cap)
{
    int n = cli_parse_int_list(v->arg, values, cap);
    if (n < 0)
        cli_option_error(cmd, v->opt->name, "expected M[,M...], got '%s'", v->arg);
    return n;
}

int cli_apply_kernel_option(const cli_value_t *v, kernel_options_t *k)
{
    switch (v->id) {
    case CLI_ID_THREADS:
        k->threads = (int)v->i;
        return 1;
    case CLI_ID_FP8_QUANT:
        /* The row's choices were checked; the names are the quantizer's own. */
        return fp8_token_variant_from_name(v->arg, &k->fp8_variant) == 0 ? 1 : 0;
    case CLI_ID_MXFP4_QUANT:
        return mxfp4_variant_from_name(v->arg, &k->mxfp4_variant) == 0 ? 1 : 0;
    default:
        return 0;
    }
}

int cli_apply_synth_option(const cli_value_t *v, synth_params_t *p)
{
    switch (v->id) {
    case CLI_ID_OUTLIERS:
        p->outlier_channels = atoi(v->arg);
        return 1;
    case CLI_ID_OUTLIER_GAIN:
        p->outlier_gain = v->d;
        return 1;
    case CLI_ID_TOKEN_SPREAD:
        p->token_spread = v->d;
        return 1;
    case CLI_ID_WEIGHT_SPREAD:
        p->weight_exp_spread = v->d;
        return 1;
    default:
        return 0;
    }
}

static void print_wrapped(FILE *fp, const char *lead, const char *text)
{
    const int col = 28;
    int w = fprintf(fp, "%s", lead);
    for (const char *p = text; p && *p;) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        fprintf(fp, "%*s%.*s\n", w < col ? col - w : 1, "", len, p);
        w = 0;
        p = nl ? nl + 1 : p + len;
    }
    if (!text || !*text)
        fputc('\n', fp);
}

void cli_print_usage(FILE *fp, const cli_command_t *cmd)
{
    const char *prefix = "usage:";
    if (!cmd->synopsis || !*cmd->synopsis)
        fprintf(fp, "usage: kreplay %s\n", cmd->name);
    for (const char *p = cmd->synopsis; p && *p;) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        fprintf(fp, "%s kreplay %s %.*s\n", prefix, cmd->name, len, p);
        prefix = "      ";
        p = nl ? nl + 1 : p + len;
    }
    if (cmd->description)
        fprintf(fp, "\n%s\n", cmd->description);
    fprintf(fp, "\n");
    for (int i = 0; i <= cmd->n_options; i++) {
        const cli_option_t *o = cli_option_row(cmd, i);
        char lead[128];
        int n = snprintf(lead, sizeof lead, "  %c%c%s--%s", o->short_name ? '-' : ' ',
                         o->short_name ? o->short_name : ' ', o->short_name ? ", " : "  ", o->name);
        if (o->metavar && n > 0 && (size_t)n < sizeof lead)
            snprintf(lead + n, sizeof lead - (size_t)n, " %s", o->metavar);
        print_wrapped(fp, lead, o->help);
    }
    fprintf(fp, "\nExit: 0 pass, 1 a failing verdict, 2 a usage or input error.\n");
}

const char *cli_closest(const char *word, const char *const *candidates, int n)
{
    return closest_name(word, candidates, n);
}
