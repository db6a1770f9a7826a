/* The options fingerprint: what a command line asks that changes the rows
 * (the CLI_ROWS_CHANGED rows of its option table), as one canonical string
 * a run stores in its provenance and `gate --resume` compares
 * (run_options.h: the format and the comparison).  Derived from the table,
 * so a new option that changes rows enters it by its row alone. */
#ifndef KR_CLI_RUN_OPTIONS_H
#define KR_CLI_RUN_OPTIONS_H

#include <stddef.h>

#include "cli_options.h"

/* The fingerprint of argv under cmd's table into buf: "name=value" for
 * each value given to a CLI_ROWS_CHANGED option (a flag: "name"), in the
 * table's order and, for one option given twice, in the order given; ""
 * when none.  argv must have parsed cleanly with cli_parse (it is parsed
 * again; optind is left as it was).  Returns 0, or -1 when buf is too
 * small. */
int cli_options_fingerprint(const cli_command_t *cmd, int argc, char **argv, char *buf, size_t cap);

/* The options of cmd whose row does not say what they do to rows
 * (CLI_ROWS_UNSAID), their count; names the first in *first (may be NULL). */
int cli_options_unclassified(const cli_command_t *cmd, const char **first);

#endif
