#include "cli_run_options.h"

#include <stdlib.h>
#include <string.h>

#include "run_options.h"

/* One row's values, in the order given, appended to the fingerprint. */
static int add_values(const cli_command_t *cmd, const cli_option_t *row, int argc, char **argv, char *buf,
                      size_t cap)
{
    cli_parser_t parser;
    if (cli_parser_init(&parser, cmd, argc, argv))
        return -1;
    optind = 0;   /* getopt's whole state anew: argv was scanned once already */
    cli_value_t v;
    int c, status = 0;
    while (status == 0 && (c = cli_parser_next(&parser, &v)) > 0)
        if (v.opt == row)
            status = run_options_append(buf, cap, row->name, v.arg);
    return status;
}

int cli_options_fingerprint(const cli_command_t *cmd, int argc, char **argv, char *buf, size_t cap)
{
    if (cap == 0)
        return -1;
    buf[0] = '\0';
    const int saved_optind = optind;
    int status = 0;
    for (int i = 0; status == 0 && i < cmd->n_options; i++)
        if (cmd->options[i].rows == CLI_ROWS_CHANGED)
            status = add_values(cmd, &cmd->options[i], argc, argv, buf, cap);
    optind = saved_optind;
    return status;
}

int cli_options_unclassified(const cli_command_t *cmd, const char **first)
{
    int n = 0;
    for (int i = 0; i <= cmd->n_options; i++) {
        const cli_option_t *o = cli_option_row(cmd, i);
        if (o->rows != CLI_ROWS_UNSAID)
            continue;
        if (n++ == 0 && first)
            *first = o->name;
    }
    return n;
}
