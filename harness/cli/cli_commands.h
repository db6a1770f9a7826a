/* Every subcommand's cli_command_t, in the order `kreplay help` lists them. */
#ifndef KR_CLI_COMMANDS_H
#define KR_CLI_COMMANDS_H

#include "cli_options.h"

extern const cli_command_t cli_replay_command, cli_list_command, cli_synth_command,
    cli_inspect_command, cli_compare_command, cli_gate_command, cli_merge_command,
    cli_baseline_command, cli_calibrate_command, cli_import_command, cli_report_command,
    cli_reduce_command,
    cli_help_command, cli_version_command, cli_completion_command, cli_man_command;

/* NULL-terminated. */
extern const cli_command_t *const cli_commands[];

const cli_command_t *cli_command_find(const char *name);

/* `kreplay completion bash` and `kreplay man`: generated from the tables of
 * the NULL-terminated `commands` (cli_commands), handed in so that the
 * writers never reach back into the dispatcher that calls them. */
void cli_write_bash_completion(FILE *fp, const cli_command_t *const *commands);
void cli_write_man_page(FILE *fp, const cli_command_t *const *commands);

#endif
