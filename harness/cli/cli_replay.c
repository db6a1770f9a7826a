#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "output_store.h"
#include "run_lock.h"
#include "case_io.h"
#include "case_load.h"
#include "gpu_setup.h"
#include "judge.h"
#include "cli.h"
#include "cli_commands.h"
#include "cli_inject.h"
#include "cli_kernel_patterns.h"
#include "cli_options.h"
#include "cli_patterns_check.h"
#include "cli_run_summary.h"
#include "plugin_loader.h"
#include "py_kernels.h"
#include "replay.h"
#include "report.h"
#include "report_bundle.h"
#include "results_store.h"
#include "run_dir_check.h"
#include "kr_string.h"

static int cli_replay(int argc, char **argv);

enum {
    OPT_KERNELS = 1, OPT_REFS, OPT_ACT, OPT_E8M0, OPT_NOREC, OPT_OUT, OPT_SAVE, OPT_ORACLE, OPT_VS,
    OPT_NODIAG, OPT_DEVICE, OPT_RERUNS, OPT_MATRIX, OPT_PLUGIN, OPT_TIMEOUT, OPT_ISOLATE,
    OPT_NOISOLATE, OPT_BLOCK, OPT_SPLITS, OPT_POLICY, OPT_PY, OPT_FAILED, OPT_FORCE, OPT_GPUS,
    OPT_MODEL_ROWS,
};

/* What the command line asks of one replay, and the kernels it loaded. */
typedef struct {
    const cli_command_t *cmd;
    replay_options_t opt;
    const char *out_dir, *save_path, *policy_path;
    int json, failed_only;
    int force;              /* -o DIR may hold another run (run_dir_check.h) */
    char inject_buf[256];
    kr_plugin_t *plugins[16];
    int n_plugins;
    const kernel_desc_t *extra[16 * 256];
    int n_extra;
    const char *py_specs[PY_KERNELS_MAX];
    int n_py;
    gpu_list_t gpus;
} replay_cli_t;

static const cli_option_t replay_options[] = {
    {OPT_KERNELS, "kernels", 'k', "PATTERNS", CLI_KERNELS, NULL,
     "comma-separated globs over kernel names (default: all;\nsee 'kreplay list kernels'); each must match a kernel",
     CLI_SET_STRING(replay_cli_t, opt.kernel_patterns), CLI_ROWS_CHANGED},
    {OPT_REFS, "refs", 'r', "LIST", CLI_STRING, NULL, "references: exact,source (default: both)",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_ACT, "act-source", 0, "MODE", CLI_CHOICE, "auto|recorded|quantize",
     "auto (recorded fp8 if present, else quantize x),\nrecorded, quantize (default: auto)",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    CLI_OPT_FP8_QUANT,
    CLI_OPT_MXFP4_QUANT,
    {OPT_E8M0, "e8m0-zero", 0, NULL, CLI_FLAG, NULL, "weight scale byte 0 decodes to 0.0 (Triton's fallback)",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_SPLITS, "decode-splits", 0, "S", CLI_POS_INT, NULL,
     "split-K of w4a8.decode (default 4) and bf16.skinny (default:\nthe dispatch's table)",
     CLI_SET_INT(replay_cli_t, opt.kernel.decode_splits), CLI_ROWS_CHANGED},
    {OPT_NOREC, "no-recorded", 0, NULL, CLI_FLAG, NULL, "no rows for the outputs recorded in the case",
     CLI_SET_FALSE(replay_cli_t, opt.include_recorded), CLI_ROWS_CHANGED},
    CLI_OPT_JSON(CLI_SET_TRUE(replay_cli_t, json)),
    {OPT_FAILED, "failed", 0, NULL, CLI_FLAG, NULL, "the table shows only the failing rows (each with why)",
     CLI_SET_TRUE(replay_cli_t, failed_only), CLI_ROWS_SAME},
    {OPT_OUT, "out", 'o', "DIR", CLI_DIR, NULL, "write DIR/results.json, results.csv and report.md",
     CLI_SET_STRING(replay_cli_t, out_dir), CLI_ROWS_SAME},
    {OPT_FORCE, "force", 0, NULL, CLI_FLAG, NULL,
     "-o DIR may hold a gate run (its results, an interrupted\nrun's partial/): replaced",
     CLI_SET_TRUE(replay_cli_t, force), CLI_ROWS_SAME},
    {OPT_SAVE, "save-outputs", 0, "FILE", CLI_FILE, NULL, "HDF5 file with every kernel output and its operands",
     CLI_SET_STRING(replay_cli_t, save_path), CLI_ROWS_SAME},
    CLI_OPT_THREADS,
    {OPT_VS, "vs", 0, "KERNEL", CLI_KERNELS, NULL,
     "also compare each kernel's output with KERNEL's model, bit\nby bit (reference 'model:KERNEL', with the ULP histogram)",
      CLI_BY_CODE, CLI_ROWS_CHANGED},
    CLI_OPT_INJECT,
    {OPT_NODIAG, "no-diagnose", 0, NULL, CLI_FLAG, NULL, "do not test hypotheses on failing rows",
     CLI_SET_FALSE(replay_cli_t, opt.diagnose), CLI_ROWS_CHANGED},
    {OPT_DEVICE, "device", 0, "DEVICE", CLI_CHOICE, "cpu|gpu",
     "gpu: run the GPU kernels; each is rerun and compared bit\n"
     "by bit (NONDETERMINISTIC), guarded by canaries (OOB_WRITE),\n"
     "poisoned before each launch, timed, and compared with its\n"
     "CPU model (reference model:<kernel>, MODEL_MISMATCH)", CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_GPUS, "gpus", 0, "LIST", CLI_STRING, NULL,
     "the GPU a GPU run uses: the first of LIST (e.g. 1;\ndefault 0; 'gate' spreads its cases over all)", CLI_BY_CODE,
     CLI_ROWS_SAME},
    {OPT_MODEL_ROWS, "model-rows", 0, "N|all", CLI_STRING, NULL,
     "rows of each GPU kernel's output compared with its CPU\n"
     "model (default 32, spread over M; all: every row; 0: none)", CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_RERUNS, "reruns", 0, "N", CLI_POS_INT, NULL,
     "runs of every kernel on the same inputs, compared bitwise\n"
     "(NONDETERMINISTIC); default 3 for GPU and plugin kernels,\n"
     "1 for kreplay's own CPU models", CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_MATRIX, "matrix", 0, NULL, CLI_FLAG, NULL, "also run the matrix-unit (MMA / WMMA) variant, measured",
     CLI_SET_TRUE(replay_cli_t, opt.gpu_matrix), CLI_ROWS_CHANGED},
    {OPT_PLUGIN, "plugin", 0, "LIB.so", CLI_FILE, NULL,
     "also run the kernels of a plugin (kernels/plugin.h); repeatable", CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_PY, "py", 0, "MODULE:FUNCTION", CLI_STRING, NULL,
     "also run a Python callable as a kernel, isolated like a\nplugin (kernels/plugins/python); repeatable, at most 8",
      CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_TIMEOUT, "timeout", 0, "SECONDS", CLI_NONNEG_NUMBER, NULL,
     "limit of each isolated kernel run (default 300; 0 = none)",
     CLI_SET_NUMBER(replay_cli_t, opt.timeout_s), CLI_ROWS_CHANGED},
    {OPT_ISOLATE, "isolate", 0, NULL, CLI_FLAG, NULL,
     "run every kernel in a child process (plugins always are):\na crash or hang is a CRASHED / TIMEOUT row, the run goes on",
     CLI_SET_TRUE(replay_cli_t, opt.isolate_all), CLI_ROWS_CHANGED},
    {OPT_NOISOLATE, "no-isolate", 0, NULL, CLI_FLAG, NULL, "run plugin kernels in-process too (for a debugger)",
     CLI_SET_TRUE(replay_cli_t, opt.no_isolate), CLI_ROWS_CHANGED},
    {OPT_ORACLE, "oracle", 0, NULL, CLI_FLAG, NULL,
     "also compute every reference in fp64 and report the fp32\nreference's own error (column ref_f32_vs_f64)",
     CLI_SET_TRUE(replay_cli_t, opt.oracle), CLI_ROWS_CHANGED},
    {OPT_BLOCK, "block-mb", 0, "MB", CLI_POS_NUMBER, NULL,
     "memory for a case's outputs and references at once\n"
     "(default: a quarter of the available memory, 16 to 4096):\n"
     "a larger case is replayed in blocks of rows,\n"
     "with the same outputs and merged metrics", CLI_BY_CODE, CLI_ROWS_SAME},
    {OPT_POLICY, "policy", 0, "FILE", CLI_STRING, NULL,
     "judge by this policy (default: the calibrated\ncases/policies/default.yaml)",
     CLI_SET_STRING(replay_cli_t, policy_path), CLI_ROWS_REJUDGED},
};

const cli_command_t cli_replay_command = {
    .name = "replay",
    .synopsis = "[options] CASE|DIR...",
    .summary = "replay cases through the kernel models and references",
    .description = "Replays each case through the selected kernels' CPU models and compares every\n"
                   "output, and the outputs recorded in the case, with the references.",
    .operands = "file",
    CLI_ROWS(replay_options),
    .run = cli_replay,
};

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

/* A loaded plugin's kernels join the replay beside the registry's. */
static void add_plugin(replay_cli_t *st, kr_plugin_t *plugin)
{
    st->plugins[st->n_plugins++] = plugin;
    for (int i = 0; i < plugin_kernel_count(plugin); i++)
        st->extra[st->n_extra++] = plugin_kernel_at(plugin, i);
}

static int apply_plugin_option(replay_cli_t *st, const char *path)
{
    kr_error_t perr = {{0}};
    kr_plugin_t *plugin;
    if (st->n_plugins == 16)
        return cli_option_error(st->cmd, "plugin", "at most 16 plugins");
    if (plugin_load(path, &plugin, &perr))
        return cli_option_error(st->cmd, "plugin", "%s", perr.msg);
    add_plugin(st, plugin);
    return CLI_GO_ON;
}

/* --gpus and --model-rows (gpu_setup.h); --device gpu is checked once the
 * GPU worker has opened its device (gpu_setup_ready). */
static int apply_gpu_option(replay_cli_t *st, const cli_value_t *v)
{
    kr_error_t e = {{0}};
    if (v->id == OPT_GPUS && gpu_list_parse(v->arg, &st->gpus, &e))
        return cli_option_error(st->cmd, "gpus", "%s", e.msg);
    if (v->id == OPT_MODEL_ROWS && gpu_model_rows_parse(v->arg, &st->opt.model_rows, &e))
        return cli_option_error(st->cmd, "model-rows", "%s", e.msg);
    return CLI_GO_ON;
}

/* The options the rows do not store: the numerics (cli_apply_kernel_option),
 * the ones checked as they are given, and the kernels loaded.  Returns
 * CLI_GO_ON or the exit code. */
static int apply_option(void *args, const cli_value_t *v)
{
    replay_cli_t *st = args;
    const char *optarg = v->arg;
    replay_options_t *opt = &st->opt;
    if (cli_apply_kernel_option(v, &opt->kernel))
        return CLI_GO_ON;
    switch (v->id) {
    case OPT_REFS:
        if (parse_refs(optarg, &opt->refs))
            return cli_option_error(st->cmd, "refs", "unknown reference in '%s' (exact, source)", optarg);
        break;
    case OPT_ACT:
        opt->kernel.act_source = !strcmp(optarg, "recorded")   ? ACT_SOURCE_RECORDED
                                 : !strcmp(optarg, "quantize") ? ACT_SOURCE_QUANTIZE
                                                               : ACT_SOURCE_AUTO;
        break;
    case OPT_E8M0:
        opt->weight_e8m0_mode = E8M0_ZERO_IS_ZERO;
        break;
    case CLI_ID_INJECT: {
        int rc = cli_parse_inject(st->cmd, optarg, st->inject_buf, sizeof st->inject_buf, &opt->fault,
                                  &opt->fault_kernels);
        if (rc != 0)    /* "help" printed the faults (exit 0), or a bad fault */
            return rc > 0 ? 0 : EXIT_USAGE;
        break;
    }
    case OPT_VS:
        if (!kernel_find(optarg) || kernel_find(optarg)->op != KERNEL_OP_GEMM) {
            cli_kernel_typo(st->cmd, "vs", optarg, NULL, 0);
            return EXIT_USAGE;
        }
        opt->vs_kernel = optarg;
        break;
    case OPT_DEVICE:
        opt->device_gpu = !strcmp(optarg, "gpu");
        break;
    case OPT_GPUS:
    case OPT_MODEL_ROWS:
        return apply_gpu_option(st, v);
    case OPT_RERUNS:
        opt->gpu_reruns = opt->model_reruns = (int)v->i;
        break;
    case OPT_PLUGIN:
        return apply_plugin_option(st, optarg);
    case OPT_PY:
        if (st->n_py == PY_KERNELS_MAX)
            return cli_option_error(st->cmd, "py", "at most %d Python kernels", PY_KERNELS_MAX);
        st->py_specs[st->n_py++] = optarg;
        break;
    case OPT_BLOCK:
        if (v->d > 1e7)
            return cli_option_error(st->cmd, "block-mb", "'%s' is not a size in MiB in (0, 1e7]", optarg);
        opt->block_bytes = (int64_t)(v->d * 1048576.0);
        break;
    default:
        break;
    }
    return CLI_GO_ON;
}

/* The cases' rows, and which inputs could not be read or stopped part-way. */
typedef struct {
    result_list_t rows;
    const char **failed;
    int n_failed;
    int input_errors;
    int replay_errors;      /* a case that stopped part-way: its outputs may be missing */
    int device_error;       /* the GPU the run needs cannot be used: nothing ran */
} replay_run_t;

/* The run's GPU, once its worker has started (in the background, while the
 * first case was read): 0, or the exit code after saying why it is unusable. */
static int device_ready(const cli_command_t *cmd, replay_options_t *opt, replay_run_t *run)
{
    kr_error_t err = {{0}};
    if (gpu_setup_ready(opt, &err) == 0)
        return 0;
    run->device_error = 1;
    return cli_option_error(cmd, "device", "gpu: %s", err.msg);
}

static void replay_cases(const cli_command_t *cmd, char **cases, int n_cases, replay_options_t *opt,
                         replay_run_t *run)
{
    kr_error_t err = {{0}};
    run->failed = calloc((size_t)n_cases + 1, sizeof *run->failed);
    progress_t prog;
    progress_start(&prog, "kreplay replay", n_cases);
    opt->progress = &prog;
    for (int i = 0; i < n_cases; i++) {
        progress_update(&prog, i);
        case_t cs;
        int loaded = case_load_safe(cases[i], &cs, NULL, 0, &err) == 0;
        if (i == 0 && device_ready(cmd, opt, run)) {
            if (loaded)
                case_free(&cs);
            break;
        }
        int replayed = loaded && replay_case(&cs, opt, &run->rows, &err) == 0;
        if (!replayed) {
            cli_error(&err);
            run->replay_errors += loaded;
            if (run->failed)
                run->failed[run->n_failed++] = strdup(cases[i]);
            run->input_errors++;
        }
        if (loaded)
            case_free(&cs);
    }
    progress_update(&prog, n_cases);
    progress_finish(&prog);
    opt->progress = NULL;
}

/* -o DIR: results.json/csv, report.md, results.h5 and the HTML report. */
static int write_run_dir(const replay_cli_t *st, replay_run_t *run, const run_info_t *info, const char *cmdline,
                         kr_error_t *err)
{
    results_meta_t meta;
    results_meta_init(&meta);
    kr_strlcpy(meta.command, cmdline, sizeof meta.command);
    kr_strlcpy(meta.version, cli_version(), sizeof meta.version);
    kr_strlcpy(meta.git_commit, cli_git_commit(), sizeof meta.git_commit);
    kr_strlcpy(meta.device, st->opt.device_gpu ? "gpu" : "cpu", sizeof meta.device);
    report_options_t ro;
    report_options_init(&ro);
    ro.meta = &meta;
    char title[128];
    if (run->n_failed > 0) {
        snprintf(title, sizeof title, "kreplay report (INCOMPLETE: %d input(s) could not be read)", run->n_failed);
        ro.title = title;
    }
    char rpath[4400];
    snprintf(rpath, sizeof rpath, "%s/results.h5", st->out_dir);
    /* The results file is sorted like every run's (results_store.h); the
     * table and JSON on stdout kept the replay's own order. */
    result_list_sort(&run->rows);
    return report_write_dir(st->out_dir, &run->rows, info, err) ||
                   results_store_write(rpath, &run->rows, &meta, err) ||
                   report_generate(st->out_dir, &run->rows, NULL, 0, &ro, err)
               ? -1
               : 0;
}

/* stdout (table or JSON) and -o DIR.  Returns 0 or EXIT_USAGE. */
static int report_run(const replay_cli_t *st, replay_run_t *run, int argc, char **argv)
{
    char *cmdline = cli_command_line(argc, argv);
    run_info_t info;
    run_info_fill(&info, cmdline, cli_version(), cli_git_commit());
    info.failed_inputs = run->failed;
    info.n_failed_inputs = run->n_failed;
    if (st->json)
        report_json_write(stdout, &run->rows, &info);
    else if (run->rows.count > 0) {
        report_console_print(stdout, &run->rows, st->failed_only);
        cli_summary_line(stdout, &run->rows, run->n_failed);
        cli_fault_summary(stdout, &run->rows);
    }
    int status = 0;
    kr_error_t err = {{0}};
    if (st->out_dir) {
        if (write_run_dir(st, run, &info, cmdline, &err)) {
            status = cli_error(&err);
        } else if (!st->json) {
            printf("report: %s/report.html (report.md, results.h5, results.json, results.csv beside it)\n",
                   st->out_dir);
        }
    }
    free(cmdline);
    return status;
}

/* The options, then the --py kernels (loaded once all are known).  Returns
 * CLI_GO_ON with st filled and *first_operand set, or the exit code. */
static int parse_command_line(replay_cli_t *st, int argc, char **argv, int *first_operand)
{
    int rc = cli_parse(st->cmd, argc, argv, st, apply_option);
    if (rc != CLI_GO_ON)
        return rc;
    *first_operand = optind;
    if (*first_operand >= argc) {
        fprintf(stderr, "kreplay replay: no case given\nRun 'kreplay help replay' for its options.\n");
        return EXIT_USAGE;
    }
    if (st->n_py) {
        kr_error_t perr = {{0}};
        kr_plugin_t *py;
        if (st->n_plugins == 16)
            return cli_option_error(st->cmd, "py", "at most 16 plugins");
        if (py_kernels_load(st->py_specs, st->n_py, &py, &perr))
            return cli_option_error(st->cmd, "py", "%s", perr.msg);
        add_plugin(st, py);
    }
    st->opt.extra_kernels = st->extra;
    st->opt.n_extra_kernels = st->n_extra;
    if (st->opt.kernel_patterns &&
        cli_check_kernel_patterns(st->cmd, st->opt.kernel_patterns, st->extra, st->n_extra))
        return EXIT_USAGE;
    if (cli_check_named_kernels(st->cmd, &st->opt, st->plugins, st->n_plugins,
                                st->n_py ? st->plugins[st->n_plugins - 1] : NULL, st->py_specs))
        return EXIT_USAGE;
    kr_error_t gerr = {{0}};
    if (gpu_setup_open(&st->opt, st->gpus.n ? st->gpus.index[0] : 0, &gerr))
        return cli_option_error(st->cmd, "device", "%s", gerr.msg);
    return CLI_GO_ON;
}

/* The lock on -o DIR, the case list and the policy, in that order; on
 * failure what was taken is given back.  Returns 0 or EXIT_USAGE. */
static int prepare_run(replay_cli_t *st, int argc, char **argv, run_lock_t *lock, char ***cases, int *n_cases,
                       policy_t *policy)
{
    kr_error_t err = {{0}};
    if (st->out_dir && run_lock_acquire(st->out_dir, lock, &err)) {
        return cli_error(&err);
    }
    const run_dir_request_t rq = {.dir = st->out_dir, .force = st->force};
    if (st->out_dir && run_dir_check(&rq, &err)) {
        cli_error(&err);
        run_lock_release(lock);
        return EXIT_USAGE;
    }
    if (st->out_dir)
        run_dir_clear_partials(st->out_dir);   /* only a --force run finds any */
    *cases = cli_expand_cases(argc, argv, n_cases);
    if (*n_cases == 0) {
        fprintf(stderr, "kreplay replay: no case files (*.h5, *.pt) found in the arguments\n");
        cli_free_strings(*cases);
        run_lock_release(lock);
        return EXIT_USAGE;
    }
    /* One judgement: the thresholds come from a policy, the calibrated
     * default unless --policy names another. */
    if (st->policy_path ? policy_load(st->policy_path, policy, &err) : judge_default_policy(policy, &err)) {
        cli_error(&err);
        cli_free_strings(*cases);
        run_lock_release(lock);
        return EXIT_USAGE;
    }
    st->opt.policy = policy;
    return 0;
}

static int cli_replay(int argc, char **argv)
{
    replay_cli_t st;
    memset(&st, 0, sizeof st);
    st.cmd = &cli_replay_command;
    replay_options_default(&st.opt);
    int first_operand = 0;
    run_lock_t lock = {-1};
    char **cases = NULL;
    int n_cases = 0;
    policy_t policy;
    int rc = parse_command_line(&st, argc, argv, &first_operand);
    optind = first_operand;
    if (rc == CLI_GO_ON && prepare_run(&st, argc - first_operand, argv + first_operand, &lock, &cases, &n_cases,
                                       &policy))
        rc = EXIT_USAGE;
    if (rc != CLI_GO_ON) {
        gpu_setup_close(&st.opt);
        for (int i = 0; i < st.n_plugins; i++)   /* loaded before the refusal */
            plugin_unload(st.plugins[i]);
        return rc;
    }
    /* Outputs go to a temporary file renamed into place at the end, so an
     * interrupted run never leaves a file that looks complete. */
    char save_tmp[4200] = "";
    if (st.save_path) {
        snprintf(save_tmp, sizeof save_tmp, "%s.tmp.%d", st.save_path, (int)getpid());
        unlink(save_tmp);
        st.opt.save_outputs_path = save_tmp;
    }
    /* Printed as a table alone, the rows' digests would be computed for no
     * reader (the table shows neither). */
    st.opt.skip_identities = !st.json && !st.out_dir;
    replay_run_t run;
    memset(&run, 0, sizeof run);
    replay_cases(st.cmd, cases, n_cases, &st.opt, &run);
    gpu_setup_close(&st.opt);
    int status = run.device_error ? EXIT_USAGE : report_run(&st, &run, argc, argv);
    kr_error_t err = {{0}};
    if (st.save_path && output_store_commit(save_tmp, st.save_path, run.replay_errors > 0, &err)) {
        status = cli_error(&err);
    }
    run_lock_release(&lock);
    int failing = 0;
    for (int64_t i = 0; i < run.rows.count; i++)
        failing += verdict_is_failure(run.rows.rows[i].verdict);
    /* A run that read every case yet compared nothing passed nothing. */
    const int empty = !status && !run.input_errors && cli_rows_compared_nothing("replay", &run.rows);
    cli_free_strings(cases);
    for (int i = 0; i < run.n_failed; i++)
        free((char *)run.failed[i]);
    free(run.failed);
    result_list_free(&run.rows);
    policy_free(&policy);
    for (int i = 0; i < st.n_plugins; i++)
        plugin_unload(st.plugins[i]);
    if (status || run.input_errors || run.device_error || empty)
        return EXIT_USAGE;
    return failing ? EXIT_VERDICT_FAILED : 0;
}
