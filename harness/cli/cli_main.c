#include "cli.h"

#include "blas_info.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: kreplay <command> [options]\n"
            "\n"
            "commands:\n"
            "  replay CASE...        replay cases through the kernel models and references\n"
            "  list kernels          the kernel registry (--verbose: formats and accumulation order)\n"
            "  synth                 write synthetic schema-v1 cases\n"
            "  inspect CASE...       what a case holds, and the health of its inputs\n"
            "  compare [A B] ...     W4A8 against W4A4 (or any two kernels), per shape and M band\n"
            "  gate SUITE -o RUNDIR  the nightly gate: suite, policy, results file, baseline, JUnit\n"
            "  merge -o OUT R.h5...  combine shard results into one run\n"
            "  baseline update R.h5 --baseline FILE   promote a run to the baseline\n"
            "  calibrate SUITE --seeds A-B -o DIR     thresholds from clean models over many seeds\n"
            "  import X.pt -o X.h5   convert a torch.save bad-case dump into a schema-v1 case\n"
            "  report RESULTS.h5... -o DIR  HTML page (plots inline) and Markdown from results files\n"
            "  version               print the version\n"
            "\n"
            "Run 'kreplay <command> --help' for a command's options.\n"
            "Exit codes: 0 pass, 1 a failing verdict, 2 a usage or input error.\n");
}

int kreplay_main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "replay"))
        return cli_replay(argc - 1, argv + 1);
    if (!strcmp(cmd, "list"))
        return cli_list(argc - 1, argv + 1);
    if (!strcmp(cmd, "synth"))
        return cli_synth(argc - 1, argv + 1);
    if (!strcmp(cmd, "inspect"))
        return cli_inspect(argc - 1, argv + 1);
    if (!strcmp(cmd, "compare"))
        return cli_compare(argc - 1, argv + 1);
    if (!strcmp(cmd, "gate"))
        return cli_gate(argc - 1, argv + 1);
    if (!strcmp(cmd, "merge"))
        return cli_merge(argc - 1, argv + 1);
    if (!strcmp(cmd, "baseline"))
        return cli_baseline(argc - 1, argv + 1);
    if (!strcmp(cmd, "calibrate"))
        return cli_calibrate(argc - 1, argv + 1);
    if (!strcmp(cmd, "import"))
        return cli_import(argc - 1, argv + 1);
    if (!strcmp(cmd, "report")) return cli_report(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("kreplay %s (commit %s)\n", cli_version(), cli_git_commit());
        blas_info_t blas;
        char line[512];
        blas_info_get(&blas);
        blas_info_format(&blas, line, sizeof line);
        printf("BLAS: %s\n", line);
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "kreplay: unknown command '%s'\n", cmd);
    usage(stderr);
    return EXIT_USAGE;
}
