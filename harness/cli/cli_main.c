#include "cli.h"

#include <stdio.h>
#include <string.h>

#include "blas_info.h"
#include "case_mapping.h"
#include "cli_commands.h"
#include "cli_output.h"
#include "gpu_backend_info.h"

const cli_command_t *const cli_commands[] = {
    &cli_replay_command,   &cli_list_command,     &cli_synth_command,     &cli_inspect_command,
    &cli_compare_command,  &cli_gate_command,     &cli_merge_command,     &cli_baseline_command,
    &cli_calibrate_command, &cli_import_command,  &cli_report_command,    &cli_reduce_command,
    &cli_completion_command,
    &cli_man_command,      &cli_help_command,     &cli_version_command,   NULL,
};

const cli_command_t *cli_command_find(const char *name)
{
    for (int i = 0; cli_commands[i]; i++)
        if (!strcmp(cli_commands[i]->name, name))
            return cli_commands[i];
    return NULL;
}

static void usage(FILE *fp)
{
    fprintf(fp, "usage: kreplay <command> [options]\n\ncommands:\n");
    for (int i = 0; cli_commands[i]; i++)
        fprintf(fp, "  %-12s %s\n", cli_commands[i]->name, cli_commands[i]->summary);
    fprintf(fp, "\nRun 'kreplay help <command>' or 'kreplay <command> --help' for a command's options.\n"
                "Exit codes: 0 pass, 1 a failing verdict, 2 a usage or input error.\n");
}

static int cli_help(int argc, char **argv)
{
    if (argc < 2) {
        usage(stdout);
        return 0;
    }
    const cli_command_t *cmd = cli_command_find(argv[1]);
    if (!cmd) {
        fprintf(stderr, "kreplay help: unknown command '%s'\n", argv[1]);
        usage(stderr);
        return EXIT_USAGE;
    }
    cli_print_usage(stdout, cmd);
    return 0;
}

static int cli_version_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("kreplay %s (commit %s)\n", cli_version(), cli_git_commit());
    blas_info_t blas;
    char line[512];
    blas_info_get(&blas);
    blas_info_format(&blas, line, sizeof line);
    printf("BLAS: %s\n", line);
    gpu_backend_info_format(line, sizeof line);
    printf("GPU backend: %s\n", line);
    return 0;
}

/* The options of a command that takes none of its own (--help and the
 * like): 1 when the command is done (--help, a usage error) with its exit
 * status in *status, 0 when it goes on. */
static int parse_common_options(const cli_command_t *cmd, int argc, char **argv, int *status)
{
    cli_parser_t p;
    cli_value_t v;
    int c;
    cli_parser_init(&p, cmd, argc, argv);
    while ((c = cli_parser_next(&p, &v)) > 0)
        ;
    if (c < 0)
        *status = cli_parse_exit(c);
    return c < 0;
}

static int cli_completion(int argc, char **argv)
{
    int status;
    if (parse_common_options(&cli_completion_command, argc, argv, &status))
        return status;
    if (optind != argc - 1 || strcmp(argv[optind], "bash") != 0) {
        fprintf(stderr, "kreplay completion: expected 'bash'\n");
        return EXIT_USAGE;
    }
    cli_write_bash_completion(stdout, cli_commands);
    return 0;
}

static int cli_man(int argc, char **argv)
{
    int status;
    if (parse_common_options(&cli_man_command, argc, argv, &status))
        return status;
    cli_write_man_page(stdout, cli_commands);
    return 0;
}

const cli_command_t cli_help_command = {
    .name = "help", .synopsis = "[COMMAND]", .summary = "this list, or a command's options",
    .operands = "replay list synth inspect compare gate merge baseline calibrate import report completion man version",
    .run = cli_help,
};
const cli_command_t cli_version_command = {
    .name = "version", .synopsis = "", .summary = "print the version and commit", .run = cli_version_run,
};
const cli_command_t cli_completion_command = {
    .name = "completion", .synopsis = "bash", .summary = "a bash completion script for every command and option",
    .description = "Usage: source <(kreplay completion bash)", .operands = "bash", .run = cli_completion,
};
const cli_command_t cli_man_command = {
    .name = "man", .synopsis = "", .summary = "the kreplay(1) man page, in roff",
    .description = "Usage: kreplay man > kreplay.1; man ./kreplay.1", .run = cli_man,
};

int kreplay_main(int argc, char **argv)
{
    case_mapping_explain_bus_errors();
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--version"))
        name = "version";
    if (!strcmp(name, "--help") || !strcmp(name, "-h"))
        name = "help";
    const cli_command_t *cmd = cli_command_find(name);
    if (!cmd) {
        const char *names[32];
        int n = 0;
        for (int i = 0; cli_commands[i] && n < 32; i++)
            names[n++] = cli_commands[i]->name;
        const char *near = cli_closest(name, names, n);
        fprintf(stderr, "kreplay: unknown command '%s'", name);
        if (near)
            fprintf(stderr, " (did you mean %s?)", near);
        fprintf(stderr, "\n");
        usage(stderr);
        return EXIT_USAGE;
    }
    return cli_close_output(cmd->run(argc - 1, argv + 1));
}
