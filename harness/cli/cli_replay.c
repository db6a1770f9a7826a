#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "output_store.h"
#include "run_lock.h"
#include "case_io.h"
#include "case_load.h"
#include "gpu_isolated.h"
#include "cli.h"
#include "plugin_loader.h"
#include "replay.h"
#include "report.h"
#include "report_bundle.h"
#include "results_store.h"
#include "kr_string.h"

static void replay_usage(FILE *fp)
{
    fprintf(fp,
            "usage: kreplay replay [options] CASE|DIR...\n"
            "\n"
            "Replays each case through the selected kernels' CPU models and compares every\n"
            "output, and the outputs recorded in the case, with the references.\n"
            "\n"
            "  -k, --kernels PATTERNS   comma-separated globs over kernel names (default: all;\n"
            "                           see 'kreplay list kernels')\n"
            "  -r, --refs LIST          references: exact,source (default: both)\n"
            "      --act-source MODE    auto (recorded fp8 if present, else quantize x),\n"
            "                           recorded, quantize (default: auto)\n"
            "      --fp8-quant V        vllm | traced | pure | reciprocal (default: vllm)\n"
            "      --mxfp4-quant V      aiter-even | ocp | ceil (default: aiter-even)\n"
            "      --e8m0-zero          weight scale byte 0 decodes to 0.0 (Triton's fallback)\n"
            "      --no-recorded        no rows for the outputs recorded in the case\n"
            "      --json               print JSON on stdout instead of the table\n"
            "  -o, --out DIR            write DIR/results.json, results.csv and report.md\n"
            "      --save-outputs FILE  HDF5 file with every kernel output and its operands\n"
            "  -t, --threads N          threads for the models (default: all cores)\n"
            "      --vs KERNEL          also compare each kernel's output with KERNEL's model, bit\n"
            "                           by bit (reference 'model:KERNEL', with the ULP histogram)\n"
            "      --inject [KERNELS=]FAULT  run kernels (all, or those matching KERNELS) as if\n"
            "                           they had FAULT (to see how kreplay\n"
            "                           reports it): wperm, wperm-inverse, scale-layout,\n"
            "                           scale-pow2:K, scale-const:C, sanitize, quant-variant:V,\n"
            "                           tile-unwritten, tile-zeros:N, rows-nan, ulp-nudge:P,\n"
            "                           tile-scale:C (see --inject help)\n"
            "      --no-diagnose        do not test hypotheses on failing rows\n"
            "      --device cpu|gpu     gpu: run the GPU kernels; each is rerun and compared bit\n"
            "                           by bit (NONDETERMINISTIC), guarded by canaries (OOB_WRITE),\n"
            "                           poisoned before each launch, timed, and compared with its\n"
            "                           CPU model (reference model:<kernel>, MODEL_MISMATCH)\n"
            "      --reruns N           runs of every kernel on the same inputs, compared bitwise\n"
            "                           (NONDETERMINISTIC); default 3 for GPU and plugin kernels,\n"
            "                           1 for kreplay's own CPU models\n"
            "      --matrix             also run the matrix-unit (MMA / WMMA) variant, measured\n"
            "      --plugin LIB.so      also run the kernels of a plugin (kernels/plugin.h); repeatable\n"
            "      --timeout SECONDS    limit of each isolated kernel run (default 300; 0 = none)\n"
            "      --isolate            run every kernel in a child process (plugins always are):\n"
            "                           a crash or hang is a CRASHED / TIMEOUT row, the run goes on\n"
            "      --no-isolate         run plugin kernels in-process too (for a debugger)\n"
            "      --oracle             also compute every reference in fp64 and report the fp32\n"
            "                           reference's own error (column ref_f32_vs_f64)\n"
            "      --block-mb MB        memory for a case's outputs and references at once\n"
            "                           (default 16): a larger case is replayed in blocks of rows,\n"
            "                           with the same outputs and merged metrics\n"
            "\n"
            "Exit: 0 all rows pass, 1 a failing verdict, 2 a usage or input error.\n");
}

static int parse_refs(const char *s, unsigned *refs)
{
    *refs = 0;
    char buf[256];
    kr_strlcpy(buf, s, sizeof buf);
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (!strcmp(p, "exact") || !strcmp(p, "R_exact"))
            *refs |= REF_EXACT;
        else if (!strcmp(p, "source") || !strcmp(p, "R_source"))
            *refs |= REF_SOURCE;
        else
            return -1;
    }
    return *refs ? 0 : -1;
}

int cli_replay(int argc, char **argv)
{
    enum { OPT_ACT = 256, OPT_FP8, OPT_MX, OPT_E8M0, OPT_NOREC, OPT_JSON, OPT_SAVE, OPT_ORACLE, OPT_VS, OPT_INJECT, OPT_NODIAG, OPT_DEVICE, OPT_RERUNS, OPT_MATRIX,
           OPT_PLUGIN, OPT_TIMEOUT, OPT_ISOLATE, OPT_NOISOLATE, OPT_BLOCK };
    static const struct option longopts[] = {
        {"kernels", required_argument, 0, 'k'},
        {"refs", required_argument, 0, 'r'},
        {"act-source", required_argument, 0, OPT_ACT},
        {"fp8-quant", required_argument, 0, OPT_FP8},
        {"mxfp4-quant", required_argument, 0, OPT_MX},
        {"e8m0-zero", no_argument, 0, OPT_E8M0},
        {"no-recorded", no_argument, 0, OPT_NOREC},
        {"json", no_argument, 0, OPT_JSON},
        {"out", required_argument, 0, 'o'},
        {"save-outputs", required_argument, 0, OPT_SAVE},
        {"threads", required_argument, 0, 't'},
        {"oracle", no_argument, 0, OPT_ORACLE},
        {"vs", required_argument, 0, OPT_VS},
        {"inject", required_argument, 0, OPT_INJECT},
        {"no-diagnose", no_argument, 0, OPT_NODIAG},
        {"device", required_argument, 0, OPT_DEVICE},
        {"reruns", required_argument, 0, OPT_RERUNS},
        {"matrix", no_argument, 0, OPT_MATRIX},
        {"plugin", required_argument, 0, OPT_PLUGIN},
        {"timeout", required_argument, 0, OPT_TIMEOUT},
        {"isolate", no_argument, 0, OPT_ISOLATE},
        {"no-isolate", no_argument, 0, OPT_NOISOLATE},
        {"block-mb", required_argument, 0, OPT_BLOCK},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    replay_options_t opt;
    replay_options_default(&opt);
    const char *out_dir = NULL, *save_path = NULL;
    int json = 0;
    kr_plugin_t *plugins[16];
    int n_plugins = 0;
    const kernel_desc_t *extra[16 * 256];
    int n_extra = 0;
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "k:r:o:t:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'k':
            opt.kernel_patterns = optarg;
            break;
        case 'r':
            if (parse_refs(optarg, &opt.refs)) {
                fprintf(stderr, "kreplay replay: --refs: unknown reference in '%s' (exact, source)\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case OPT_ACT:
            if (!strcmp(optarg, "auto"))
                opt.kernel.act_source = ACT_SOURCE_AUTO;
            else if (!strcmp(optarg, "recorded"))
                opt.kernel.act_source = ACT_SOURCE_RECORDED;
            else if (!strcmp(optarg, "quantize"))
                opt.kernel.act_source = ACT_SOURCE_QUANTIZE;
            else {
                fprintf(stderr, "kreplay replay: --act-source: '%s' is not auto, recorded or quantize\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case OPT_FP8:
            if (fp8_token_variant_from_name(optarg, &opt.kernel.fp8_variant)) {
                fprintf(stderr, "kreplay replay: --fp8-quant: unknown variant '%s' (vllm, traced, pure, reciprocal)\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case OPT_MX:
            if (mxfp4_variant_from_name(optarg, &opt.kernel.mxfp4_variant)) {
                fprintf(stderr, "kreplay replay: --mxfp4-quant: unknown variant '%s' (aiter-even, ocp, ceil)\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case OPT_E8M0:
            opt.weight_e8m0_mode = E8M0_ZERO_IS_ZERO;
            break;
        case OPT_NOREC:
            opt.include_recorded = 0;
            break;
        case OPT_JSON:
            json = 1;
            break;
        case 'o':
            out_dir = optarg;
            break;
        case OPT_SAVE:
            save_path = optarg;
            break;
        case 't':
            opt.kernel.threads = atoi(optarg);
            if (opt.kernel.threads <= 0) {
                fprintf(stderr, "kreplay replay: --threads: '%s' is not a positive integer\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case OPT_ORACLE:
            opt.oracle = 1;
            break;
        case OPT_INJECT: {
            kr_error_t ferr = {{0}};
            const char *spec = optarg;
            char *eq = strchr(optarg, '=');
            if (eq) { /* KERNELS=FAULT: only matching kernels get it */
                *eq = '\0';
                opt.fault_kernels = optarg;
                spec = eq + 1;
            }
            if (fault_parse(spec, &opt.fault, &ferr)) {
                fprintf(stderr, "kreplay replay: --inject: %s\n%s", ferr.msg, fault_usage());
                return EXIT_USAGE;
            }
            break;
        }
        case OPT_NODIAG:
            opt.diagnose = 0;
            break;
        case OPT_DEVICE:
            if (!strcmp(optarg, "gpu")) {
                char why[256];
                /* Asked in a child: a parent that touched the GPU runtime
                 * could not fork isolated GPU runs. */
                if (!gpu_available_isolated(why, sizeof why)) {
                    fprintf(stderr, "kreplay replay: --device gpu: %s\n", why);
                    return EXIT_USAGE;
                }
                opt.device_gpu = 1;
            } else if (strcmp(optarg, "cpu") != 0) {
                fprintf(stderr, "kreplay replay: --device: '%s' is not cpu or gpu\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case OPT_RERUNS:
            opt.gpu_reruns = opt.model_reruns = atoi(optarg);
            if (opt.gpu_reruns < 1) {
                fprintf(stderr, "kreplay replay: --reruns: '%s' is not a positive integer\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case OPT_MATRIX:
            opt.gpu_matrix = 1;
            break;
        case OPT_PLUGIN: {
            kr_error_t perr = {{0}};
            if (n_plugins == 16) {
                fprintf(stderr, "kreplay replay: --plugin: at most 16 plugins\n");
                return EXIT_USAGE;
            }
            if (plugin_load(optarg, &plugins[n_plugins], &perr)) {
                fprintf(stderr, "kreplay replay: --plugin: %s\n", perr.msg);
                return EXIT_USAGE;
            }
            for (int i = 0; i < plugin_kernel_count(plugins[n_plugins]); i++)
                extra[n_extra++] = plugin_kernel_at(plugins[n_plugins], i);
            n_plugins++;
            break;
        }
        case OPT_TIMEOUT: {
            char *end;
            opt.timeout_s = strtod(optarg, &end);
            if (*end || !(opt.timeout_s >= 0)) {
                fprintf(stderr, "kreplay replay: --timeout: '%s' is not a number of seconds >= 0\n", optarg);
                return EXIT_USAGE;
            }
            break;
        }
        case OPT_ISOLATE:
            opt.isolate_all = 1;
            break;
        case OPT_BLOCK: {
            char *end;
            double mb = strtod(optarg, &end);
            if (*end || !(mb > 0) || mb > 1e7) {
                fprintf(stderr, "kreplay replay: --block-mb: '%s' is not a size in MiB > 0\n", optarg);
                return EXIT_USAGE;
            }
            opt.block_bytes = (int64_t)(mb * 1048576.0);
            break;
        }
        case OPT_NOISOLATE:
            opt.no_isolate = 1;
            break;
        case OPT_VS:
            if (!kernel_find(optarg) || kernel_find(optarg)->op != KERNEL_OP_GEMM) {
                fprintf(stderr, "kreplay replay: --vs: '%s' is not a GEMM kernel (see 'kreplay list kernels')\n", optarg);
                return EXIT_USAGE;
            }
            opt.vs_kernel = optarg;
            break;
        case 'h':
            replay_usage(stdout);
            return 0;
        default:
            replay_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "kreplay replay: no case given\n");
        replay_usage(stderr);
        return EXIT_USAGE;
    }
    opt.extra_kernels = extra;
    opt.n_extra_kernels = n_extra;
    if (opt.kernel_patterns) {
        int any = 0;
        for (int i = 0; i < kernel_count(); i++)
            any |= kernel_name_matches(kernel_at(i)->name, opt.kernel_patterns);
        for (int i = 0; i < n_extra; i++)
            any |= kernel_name_matches(extra[i]->name, opt.kernel_patterns);
        if (!any) {
            fprintf(stderr, "kreplay replay: --kernels '%s' matches no kernel (see 'kreplay list kernels')\n",
                    opt.kernel_patterns);
            return EXIT_USAGE;
        }
    }
    kr_error_t err = {{0}};
    run_lock_t lock = {-1};
    if (out_dir && run_lock_acquire(out_dir, &lock, &err)) {
        fprintf(stderr, "kreplay: error: %s\n", err.msg);
        return EXIT_USAGE;
    }
    /* Outputs go to a temporary file renamed into place at the end, so an
     * interrupted run never leaves a file that looks complete. */
    char save_tmp[4200] = "";
    if (save_path) {
        snprintf(save_tmp, sizeof save_tmp, "%s.tmp.%d", save_path, (int)getpid());
        unlink(save_tmp);
        opt.save_outputs_path = save_tmp;
    }

    int n_cases = 0;
    char **cases = cli_expand_cases(argc - optind, argv + optind, &n_cases);
    if (n_cases == 0) {
        fprintf(stderr, "kreplay replay: no case files (*.h5, *.pt) found in the arguments\n");
        cli_free_strings(cases);
        run_lock_release(&lock);
        return EXIT_USAGE;
    }
    int replay_errors = 0;   /* a case that stopped part-way: its outputs may be missing */
    result_list_t rows = {0};
    int input_errors = 0;
    const char **failed = calloc((size_t)n_cases + 1, sizeof *failed);
    int n_failed = 0;
    for (int i = 0; i < n_cases; i++) {
        case_t cs;
        if (case_load_safe(cases[i], &cs, NULL, 0, &err)) {
            fprintf(stderr, "kreplay: error: %s\n", err.msg);
            if (failed)
                failed[n_failed++] = strdup(cases[i]);
            input_errors++;
            continue;
        }
        if (replay_case(&cs, &opt, &rows, &err)) {
            fprintf(stderr, "kreplay: error: %s\n", err.msg);
            replay_errors++;
            if (failed)
                failed[n_failed++] = strdup(cases[i]);
            input_errors++;
        }
        case_free(&cs);
    }
    char *cmdline = cli_command_line(argc, argv);
    run_info_t info;
    run_info_fill(&info, cmdline, cli_version(), cli_git_commit());
    info.failed_inputs = failed;
    info.n_failed_inputs = n_failed;
    if (json)
        report_json_write(stdout, &rows, &info);
    else if (rows.count > 0) {
        report_table_print(stdout, &rows);
        report_summary_line(stdout, &rows);
    }
    int status = 0;
    if (out_dir) {
        results_meta_t meta;
        results_meta_init(&meta);
        kr_strlcpy(meta.command, cmdline, sizeof meta.command);
        kr_strlcpy(meta.version, cli_version(), sizeof meta.version);
        kr_strlcpy(meta.git_commit, cli_git_commit(), sizeof meta.git_commit);
        kr_strlcpy(meta.device, opt.device_gpu ? "gpu" : "cpu", sizeof meta.device);
        report_options_t ro;
        report_options_init(&ro);
        ro.meta = &meta;
        char title[128];
        if (n_failed > 0) {
            snprintf(title, sizeof title, "kreplay report (INCOMPLETE: %d input(s) could not be read)", n_failed);
            ro.title = title;
        }
        char rpath[4400];
        snprintf(rpath, sizeof rpath, "%s/results.h5", out_dir);
        /* The results file is sorted like every run's (results_store.h); the
         * table and JSON above kept the replay's own order. */
        result_list_sort(&rows);
        if (report_write_dir(out_dir, &rows, &info, &err) ||
            results_store_write(rpath, &rows, &meta, &err) ||
            report_generate(out_dir, &rows, NULL, 0, &ro, &err)) {
            fprintf(stderr, "kreplay: error: %s\n", err.msg);
            status = EXIT_USAGE;
        } else if (!json) {
            printf("report: %s/report.html (report.md, results.h5, results.json, results.csv beside it)\n",
                   out_dir);
        }
    }
    if (save_path && output_store_commit(save_tmp, save_path, replay_errors > 0, &err)) {
        fprintf(stderr, "kreplay: error: %s\n", err.msg);
        status = EXIT_USAGE;
    }
    run_lock_release(&lock);
    int failing = 0;
    for (int64_t i = 0; i < rows.count; i++)
        failing += verdict_is_failure(rows.rows[i].verdict);
    free(cmdline);
    cli_free_strings(cases);
    for (int i = 0; i < n_failed; i++)
        free((char *)failed[i]);
    free(failed);
    result_list_free(&rows);
    for (int i = 0; i < n_plugins; i++)
        plugin_unload(plugins[i]);
    if (status || input_errors)
        return EXIT_USAGE;
    return failing ? EXIT_VERDICT_FAILED : 0;
}
