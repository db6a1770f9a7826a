/* kreplay reduce: a failing row's case shrunk to a small case that fails the
 * same way (harness/reduce/reduce.h), written atomically, with the log of
 * the search and the one command that replays the small case. */
/* realpath(3) */
#define _DEFAULT_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "case_io.h"
#include "case_name.h"
#include "cli.h"
#include "cli_commands.h"
#include "cli_inject.h"
#include "cli_kernel_patterns.h"
#include "cli_options.h"
#include "cli_reduce_input.h"
#include "judge.h"
#include "kr_string.h"
#include "plugin_loader.h"
#include "py_kernels.h"
#include "reduce.h"
#include "suite.h"
#include "row_reference.h"

static int cli_reduce(int argc, char **argv);

enum {
    OPT_KERNEL = 1, OPT_REF, OPT_ROW, OPT_OUT, OPT_PLUGIN, OPT_PY, OPT_SUITE, OPT_BUDGET, OPT_MAX_RUNS,
    OPT_SEED, OPT_STEPS, OPT_RERUNS, OPT_ACT, OPT_E8M0, OPT_SPLITS, OPT_POLICY, OPT_TIMEOUT,
    OPT_ISOLATE,
};

#define REDUCE_MAX_PLUGINS 16

typedef struct {
    const cli_command_t *cmd;
    reduce_options_t ro;
    const char *kernel, *ref, *out_path, *suite_path, *policy_path, *row_arg, *seed_arg;
    int reruns_given;
    char inject_buf[256];
    kr_plugin_t *plugins[REDUCE_MAX_PLUGINS];
    int n_plugins;
    const kernel_desc_t *extra[REDUCE_MAX_PLUGINS * 256];
    int n_extra;
    const char *py_specs[PY_KERNELS_MAX];
    int n_py;
    char replay_args[2048];     /* the replay options given, for the printed command */
    char row_kernel[64], row_ref[32], row_policy[512];  /* taken from a results row */
    int n_lib_plugins;          /* plugins[0..n) are --plugin libraries; then the --py one */
    suite_t suite;
    int have_suite;
    policy_t policy;
    int have_policy;
} reduce_cli_t;

static const cli_option_t reduce_options[] = {
    {OPT_KERNEL, "kernels", 'k', "KERNEL", CLI_KERNELS, NULL,
     "the failing row's kernel (one name; 'recorded.out' and the\nlike for an output the case recorded)",
     CLI_SET_STRING(reduce_cli_t, kernel), CLI_ROWS_CHANGED},
    {OPT_REF, "ref", 0, "REF", CLI_STRING, NULL,
     "the row's reference: R_exact (default), R_source,\nR_sanitized, out_rerun", CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_ROW, "row", 0, "N", CLI_STRING, NULL,
     "the operand is a results file: reduce its row N (0-based,\nthe order of results.h5's /rows)",
     CLI_SET_STRING(reduce_cli_t, row_arg), CLI_ROWS_CHANGED},
    {OPT_OUT, "out", 'o', "SMALL.h5", CLI_FILE, NULL,
     "the reduced case (default: CASE_NAME.reduced.h5 here),\nwritten atomically",
     CLI_SET_STRING(reduce_cli_t, out_path), CLI_ROWS_SAME},
    {OPT_PLUGIN, "plugin", 0, "LIB.so", CLI_FILE, NULL, "a plugin's kernels (kernels/plugin.h); repeatable",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_PY, "py", 0, "MODULE:FUNCTION", CLI_STRING, NULL, "a Python callable as a kernel; repeatable",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_SUITE, "suite", 0, "SUITE", CLI_FILE, NULL,
     "a gate's row: its suite's policy, bands and Python kernels,\nand its synthetic cases by key (synth:...)",
     CLI_SET_STRING(reduce_cli_t, suite_path), CLI_ROWS_CHANGED},
    {OPT_BUDGET, "budget", 0, "SECONDS", CLI_POS_NUMBER, NULL,
     "start no candidate after this long; the smallest failing\ncase found is written, marked cut short",
     CLI_SET_NUMBER(reduce_cli_t, ro.budget_s), CLI_ROWS_SAME},
    {OPT_MAX_RUNS, "max-runs", 0, "N", CLI_POS_INT, NULL, "replay at most N candidates (the original included)",
     CLI_BY_CODE, CLI_ROWS_SAME},
    {OPT_SEED, "seed", 0, "S", CLI_STRING, NULL,
     "the order chunks are tried in (default 0: in order); the\nresult is the same for the same case and seed",
     CLI_SET_STRING(reduce_cli_t, seed_arg), CLI_ROWS_SAME},
    {OPT_STEPS, "steps", 0, "DIR", CLI_DIR, NULL, "also write every accepted candidate, DIR/step-NNN.h5",
     CLI_SET_STRING(reduce_cli_t, ro.steps_dir), CLI_ROWS_SAME},
    {OPT_RERUNS, "reruns", 0, "N", CLI_POS_INT, NULL,
     "runs of the kernel per candidate, compared bitwise (default\n1; 3 from a results row that is NONDETERMINISTIC)",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_ACT, "act-source", 0, "MODE", CLI_CHOICE, "auto|recorded|quantize",
     "auto, recorded, quantize (as replay's)", CLI_BY_CODE, CLI_ROWS_CHANGED},
    CLI_OPT_FP8_QUANT,
    CLI_OPT_MXFP4_QUANT,
    {OPT_E8M0, "e8m0-zero", 0, NULL, CLI_FLAG, NULL, "weight scale byte 0 decodes to 0.0", CLI_BY_CODE,
     CLI_ROWS_CHANGED},
    {OPT_SPLITS, "decode-splits", 0, "S", CLI_POS_INT, NULL, "split-K of the decode and skinny kernels",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_POLICY, "policy", 0, "FILE", CLI_FILE, NULL,
     "judge by this policy (default: the suite's, the results\nfile's, else cases/policies/default.yaml)",
     CLI_BY_CODE, CLI_ROWS_REJUDGED},
    CLI_OPT_INJECT,
    {OPT_TIMEOUT, "timeout", 0, "SECONDS", CLI_NONNEG_NUMBER, NULL, "limit of each isolated kernel run",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_ISOLATE, "isolate", 0, NULL, CLI_FLAG, NULL, "run every kernel in a child process", CLI_BY_CODE,
     CLI_ROWS_CHANGED},
    CLI_OPT_THREADS,
};

const cli_command_t cli_reduce_command = {
    .name = "reduce",
    .synopsis = "[options] CASE --kernels KERNEL\nRESULTS.h5 --row N",
    .summary = "shrink a failing case to a small case that fails the same way",
    .description =
        "Replays the case, takes the row's verdict and diagnosis family as the property to\n"
        "keep, and searches for a smaller case that keeps it: delta debugging over the\n"
        "activation rows (never below the kernel's M band), the weight rows in units of\n"
        "the kernel's N multiple and the 32-blocks of K in units of its K multiple, then\n"
        "simpler values.  Prints the log of the search and, last, the command that\n"
        "replays the reduced case.  Exit 0: written; 2: usage or input error, or nothing\n"
        "fails; 1: the written case did not fail the same way when read back.",
    .operands = "file",
    CLI_ROWS(reduce_options),
    .run = cli_reduce,
};

/* Appends " WORD" to buf, single-quoted when the shell would split or
 * expand it. */
static void append_word(char *buf, size_t cap, const char *word)
{
    size_t len = strlen(buf);
    int plain = *word != '\0';
    for (const char *p = word; *p && plain; p++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=,+@%", *p) != NULL;
    if (len + 2 < cap)
        buf[len++] = ' ';
    if (!plain && len + 1 < cap)
        buf[len++] = '\'';
    for (const char *p = word; *p && len + 5 < cap; p++) {
        if (*p == '\'' && !plain) {
            memcpy(buf + len, "'\\''", 4);
            len += 4;
        } else {
            buf[len++] = *p;
        }
    }
    if (!plain && len + 1 < cap)
        buf[len++] = '\'';
    buf[len] = '\0';
}

/* A path as an absolute word where it exists. */
static void append_path(char *buf, size_t cap, const char *path)
{
    char abs[PATH_MAX];
    append_word(buf, cap, realpath(path, abs) ? abs : path);
}

/* Remembers an option given, to repeat it in the printed replay command. */
static void remember(reduce_cli_t *st, const cli_value_t *v)
{
    char flag[80];
    snprintf(flag, sizeof flag, "--%s", v->opt->name);
    append_word(st->replay_args, sizeof st->replay_args, flag);
    if (v->arg && (v->opt->kind == CLI_FILE || v->opt->kind == CLI_DIR))
        append_path(st->replay_args, sizeof st->replay_args, v->arg);
    else if (v->arg)
        append_word(st->replay_args, sizeof st->replay_args, v->arg);
}

static int add_plugin(reduce_cli_t *st, kr_plugin_t *plugin)
{
    if (st->n_plugins == REDUCE_MAX_PLUGINS)
        return cli_option_error(st->cmd, "plugin", "at most %d plugins", REDUCE_MAX_PLUGINS);
    st->plugins[st->n_plugins++] = plugin;
    for (int i = 0; i < plugin_kernel_count(plugin); i++)
        st->extra[st->n_extra++] = plugin_kernel_at(plugin, i);
    return CLI_GO_ON;
}

static int apply_numerics(reduce_cli_t *st, const cli_value_t *v)
{
    replay_options_t *r = &st->ro.replay;
    switch (v->id) {
    case OPT_ACT:
        r->kernel.act_source = !strcmp(v->arg, "recorded")   ? ACT_SOURCE_RECORDED
                               : !strcmp(v->arg, "quantize") ? ACT_SOURCE_QUANTIZE
                                                             : ACT_SOURCE_AUTO;
        break;
    case OPT_E8M0:
        r->weight_e8m0_mode = E8M0_ZERO_IS_ZERO;
        break;
    case OPT_SPLITS:
        r->kernel.decode_splits = (int)v->i;
        break;
    case OPT_TIMEOUT:
        r->timeout_s = v->d;
        break;
    case OPT_ISOLATE:
        r->isolate_all = 1;
        break;
    case OPT_POLICY:
        st->policy_path = v->arg;
        break;
    case CLI_ID_INJECT: {
        const int rc = cli_parse_inject(st->cmd, v->arg, st->inject_buf, sizeof st->inject_buf, &r->fault,
                                        &r->fault_kernels);
        if (rc != 0)
            return rc > 0 ? 0 : EXIT_USAGE;
        break;
    }
    default:
        if (!cli_apply_kernel_option(v, &r->kernel))
            return CLI_GO_ON;
        if (v->id == CLI_ID_THREADS)
            return CLI_GO_ON;   /* threads change no bit: not repeated */
    }
    remember(st, v);
    return CLI_GO_ON;
}

static int apply_option(void *args, const cli_value_t *v)
{
    reduce_cli_t *st = args;
    kr_error_t err = {{0}};
    kr_plugin_t *plugin;
    switch (v->id) {
    case OPT_REF:
        st->ref = !strcmp(v->arg, "exact") ? "R_exact" : !strcmp(v->arg, "source") ? "R_source" : v->arg;
        if (strcmp(st->ref, "R_exact") && strcmp(st->ref, "R_source") && strcmp(st->ref, ROW_REF_SANITIZED) &&
            strcmp(st->ref, ROW_REF_RERUN))
            return cli_option_error(st->cmd, "ref", "'%s' is not R_exact, R_source, R_sanitized or out_rerun",
                                    v->arg);
        return CLI_GO_ON;
    case OPT_PLUGIN:
        if (plugin_load(v->arg, &plugin, &err))
            return cli_option_error(st->cmd, "plugin", "%s", err.msg);
        return add_plugin(st, plugin);
    case OPT_PY:
        if (st->n_py == PY_KERNELS_MAX)
            return cli_option_error(st->cmd, "py", "at most %d Python kernels", PY_KERNELS_MAX);
        st->py_specs[st->n_py++] = v->arg;
        return CLI_GO_ON;
    case OPT_MAX_RUNS:
        st->ro.max_runs = v->i;
        return CLI_GO_ON;
    case OPT_RERUNS:
        st->ro.replay.gpu_reruns = st->ro.replay.model_reruns = (int)v->i;
        st->reruns_given = 1;
        return CLI_GO_ON;
    default:
        return apply_numerics(st, v);
    }
}

/* A non-negative integer option's value, or -1 after saying what was expected. */
static long long nonneg_arg(const reduce_cli_t *st, const char *option, const char *arg)
{
    char *end;
    errno = 0;
    const long long v = arg ? strtoll(arg, &end, 10) : -1;
    if (!arg || errno || end == arg || *end || v < 0) {
        cli_option_error(st->cmd, option, "'%s' is not an integer >= 0", arg ? arg : "");
        return -1;
    }
    return v;
}


static const char *suite_band(const void *suite, int64_t M)
{
    return suite_band_of((const suite_t *)suite, M);
}

/* The row named by --row in a results file: its kernel, reference and case;
 * the run's policy unless one is given; reruns for a NONDETERMINISTIC row. */
static int take_results_row(reduce_cli_t *st, const char *results, char *case_path, size_t cap)
{
    const long long index = nonneg_arg(st, "row", st->row_arg);
    if (index < 0)
        return EXIT_USAGE;
    result_t row;
    results_meta_t meta;
    kr_error_t err = {{0}};
    if (reduce_input_row(results, index, &row, &meta, &err))
        return cli_error(&err);
    if (st->kernel && strcmp(st->kernel, row.kernel) != 0)
        return cli_option_error(st->cmd, "kernels", "row %lld of %s is kernel %s, not %s", index, results,
                                row.kernel, st->kernel);
    st->kernel = kr_strlcpy(st->row_kernel, row.kernel, sizeof st->row_kernel) < sizeof st->row_kernel
                     ? st->row_kernel : NULL;
    kr_strlcpy(st->row_ref, row.reference, sizeof st->row_ref);
    st->ref = st->row_ref;
    kr_strlcpy(case_path, row.case_path, cap);
    if (row.verdict == VERDICT_NONDETERMINISTIC && !st->reruns_given)
        st->ro.replay.gpu_reruns = st->ro.replay.model_reruns = 3;
    if (!st->policy_path && !st->suite_path && meta.policy[0] && access(meta.policy, R_OK) == 0) {
        st->policy_path = st->row_policy;
        kr_strlcpy(st->row_policy, meta.policy, sizeof st->row_policy);
        append_word(st->replay_args, sizeof st->replay_args, "--policy");
        append_path(st->replay_args, sizeof st->replay_args, meta.policy);
    }
    printf("row %lld of %s: %s / %s on %s: %s%s%s\n", index, results, row.kernel, row.reference, row.case_path,
           verdict_name(row.verdict), row.diagnosis_family[0] ? " " : "", row.diagnosis_family);
    return 0;
}

/* The suite of a gate's row: its Python kernels, policy and bands. */
static int take_suite(reduce_cli_t *st)
{
    kr_error_t err = {{0}};
    if (suite_load(st->suite_path, &st->suite, &err))
        return cli_error(&err);
    st->have_suite = 1;
    for (int i = 0; i < st->suite.n_python; i++) {
        if (st->n_py == PY_KERNELS_MAX)
            return cli_option_error(st->cmd, "suite", "more than %d Python kernels", PY_KERNELS_MAX);
        st->py_specs[st->n_py++] = st->suite.python[i];
    }
    if (!st->policy_path && st->suite.policy_path) {
        st->policy_path = st->suite.policy_path;
        append_word(st->replay_args, sizeof st->replay_args, "--policy");
        append_path(st->replay_args, sizeof st->replay_args, st->policy_path);
    }
    st->ro.replay.band_of = suite_band;
    st->ro.replay.band_ctx = &st->suite;
    return 0;
}

/* The kernels, the row's kernel checked, and the policy. */
static int prepare_kernels(reduce_cli_t *st)
{
    kr_error_t err = {{0}};
    st->n_lib_plugins = st->n_plugins;
    if (st->n_py) {
        kr_plugin_t *py;
        if (py_kernels_load(st->py_specs, st->n_py, &py, &err))
            return cli_option_error(st->cmd, "py", "%s", err.msg);
        if (add_plugin(st, py) != CLI_GO_ON)
            return EXIT_USAGE;
    }
    st->ro.replay.extra_kernels = st->extra;
    st->ro.replay.n_extra_kernels = st->n_extra;
    if (!st->kernel) {
        fprintf(stderr, "kreplay reduce: which row? give --kernels KERNEL (or a results file and --row N)\n");
        return EXIT_USAGE;
    }
    if (!reduce_row_is_recorded(st->kernel)) {
        if (strpbrk(st->kernel, "*?[,"))
            return cli_option_error(st->cmd, "kernels", "'%s': one kernel's name, not a pattern", st->kernel);
        if (cli_check_kernel_patterns(st->cmd, st->kernel, st->extra, st->n_extra))
            return EXIT_USAGE;
    }
    const kernel_desc_t *k = kernel_find(st->kernel);
    for (int i = 0; i < st->n_extra && !k; i++)
        k = strcmp(st->extra[i]->name, st->kernel) == 0 ? st->extra[i] : NULL;
    /* The kernel's first reference, unless the row names one: a bf16 kernel has no R_exact. */
    if (!st->ref)
        st->ref = k && !(k->refs & REF_EXACT) ? "R_source" : "R_exact";
    if (k && !strcmp(st->ref, "R_exact") && !(k->refs & REF_EXACT))
        return cli_option_error(st->cmd, "ref", "%s is compared with R_source only", st->kernel);
    if (st->policy_path ? policy_load(st->policy_path, &st->policy, &err) : judge_default_policy(&st->policy, &err))
        return cli_error(&err);
    st->have_policy = 1;
    st->ro.replay.policy = &st->policy;
    st->ro.kernel = st->kernel;
    st->ro.reference = st->ref;
    return 0;
}

/* mkdir DIR (its parent must exist); 0 when it exists afterwards. */
static int ensure_dir(const char *dir)
{
    struct stat sb;
    return mkdir(dir, 0755) == 0 || (stat(dir, &sb) == 0 && S_ISDIR(sb.st_mode)) ? 0 : -1;
}

static int prepare_output(reduce_cli_t *st, const char *case_path, char *out, size_t cap)
{
    if (st->out_path) {
        kr_strlcpy(out, st->out_path, cap);
    } else {
        char name[256];
        case_short_name(case_path, name, sizeof name);
        snprintf(out, cap, "%s.reduced.h5", name);
    }
    char dir[PATH_MAX];
    kr_strlcpy(dir, out, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = '\0';
        if (ensure_dir(dir)) {
            fprintf(stderr, "kreplay reduce: -o %s: cannot create directory %s: %s\n", out, dir,
                    strerror(errno));
            return EXIT_USAGE;
        }
    }
    if (st->ro.steps_dir && ensure_dir(st->ro.steps_dir)) {
        fprintf(stderr, "kreplay reduce: --steps %s: cannot create it: %s\n", st->ro.steps_dir,
                strerror(errno));
        return EXIT_USAGE;
    }
    return 0;
}

static void print_outcome(const char *label, const reduce_outcome_t *o)
{
    printf("  %s %s [%s] %s\n", label, verdict_name(o->verdict), o->family,
           o->diagnosis[0] ? o->diagnosis : o->note);
}

/* The command that replays the small case and shows its failure. */
static void print_replay_command(const reduce_cli_t *st, const char *out)
{
    char cmd[8192] = "", exe[PATH_MAX];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    char *deleted = strstr(exe, " (deleted)");   /* rebuilt while it ran: the path holds the new one */
    if (deleted && deleted[10] == '\0')
        *deleted = '\0';
    append_word(cmd, sizeof cmd, n > 0 ? exe : "kreplay");
    append_word(cmd, sizeof cmd, "replay");
    append_path(cmd, sizeof cmd, out);
    for (int i = 0; i < st->n_lib_plugins; i++) {
        append_word(cmd, sizeof cmd, "--plugin");
        append_path(cmd, sizeof cmd, plugin_path(st->plugins[i]));
    }
    for (int i = 0; i < st->n_py; i++) {
        append_word(cmd, sizeof cmd, "--py");
        append_word(cmd, sizeof cmd, st->py_specs[i]);
    }
    if (!reduce_row_is_recorded(st->kernel)) {
        append_word(cmd, sizeof cmd, "--kernels");
        append_word(cmd, sizeof cmd, st->kernel);
        append_word(cmd, sizeof cmd, "--no-recorded");
    }
    const int source = !strcmp(st->ref, "R_source") || !strcmp(st->ref, ROW_REF_SANITIZED);
    append_word(cmd, sizeof cmd, "--refs");
    append_word(cmd, sizeof cmd, source ? "source" : "exact");
    char reruns[32];
    snprintf(reruns, sizeof reruns, "%d", st->ro.replay.gpu_reruns);
    append_word(cmd, sizeof cmd, "--reruns");
    append_word(cmd, sizeof cmd, reruns);
    printf("replay the reduced case:\n%s%s\n", cmd + 1, st->replay_args);
}

/* Writes the small case, reads it back and replays it: it must fail the
 * way the original did.  Returns the exit code. */
static int write_and_check(reduce_cli_t *st, const case_t *small, const reduce_report_t *rep, const char *out)
{
    kr_error_t err = {{0}};
    if (case_write(out, small, &err))
        return cli_error(&err);
    case_t back;
    reduce_outcome_t after;
    if (reduce_input_load(out, NULL, &back, &err))
        return cli_error(&err);
    /* A race may not show in every replay; the search saw it in a row of them. */
    const int tries = rep->before.verdict == VERDICT_NONDETERMINISTIC ? REDUCE_CONFIRM_NONDET : 1;
    int replayed = 1;
    for (int i = 0; i < tries && replayed; i++)
        if (!(replayed = reduce_replay_row(&back, &st->ro, &after, &err) == 0) ||
            reduce_same_way(&rep->before, &after))
            break;
    case_free(&back);
    if (!replayed)
        return cli_error(&err);
    printf("reduced: %lld x %lld x %lld -> %lld x %lld x %lld in %lld kernel runs, %.1f s%s%s%s\n",
           (long long)rep->M0, (long long)rep->N0, (long long)rep->K0, (long long)small->M, (long long)small->N,
           (long long)small->K, (long long)rep->runs, rep->seconds,
           rep->cut_short ? " (cut short by " : "", rep->cut_short ? rep->stopped_by : "",
           rep->cut_short ? ": the smallest failing case found so far)" : "");
    print_outcome("before:", &rep->before);
    print_outcome("after: ", &after);
    printf("wrote %s\n", out);
    if (!reduce_same_way(&rep->before, &after)) {
        fprintf(stderr, "kreplay reduce: %s, read back, gives %s [%s], not %s [%s]\n", out,
                verdict_name(after.verdict), after.family, verdict_name(rep->before.verdict), rep->before.family);
        return EXIT_VERDICT_FAILED;
    }
    print_replay_command(st, out);
    return 0;
}

static int reduce_input(reduce_cli_t *st, const char *input)
{
    char case_path[4096], out[PATH_MAX];
    kr_strlcpy(case_path, input, sizeof case_path);
    kr_error_t err = {{0}};
    int rc;
    if (st->seed_arg) {
        const long long seed = nonneg_arg(st, "seed", st->seed_arg);
        if (seed < 0)
            return EXIT_USAGE;
        st->ro.seed = (uint64_t)seed;
    }
    if ((st->suite_path && (rc = take_suite(st))) ||
        (st->row_arg && (rc = take_results_row(st, input, case_path, sizeof case_path))) ||
        (rc = prepare_kernels(st)) || (rc = prepare_output(st, case_path, out, sizeof out)))
        return rc;
    case_t c;
    if (reduce_input_load(case_path, st->have_suite ? &st->suite : NULL, &c, &err))
        return cli_error(&err);
    printf("kreplay reduce %s: %s / %s\n", case_path, st->kernel, st->ref);
    fflush(stdout);
    case_t small;
    reduce_report_t rep;
    rc = reduce_case(&c, &st->ro, &small, &rep, &err);
    case_free(&c);
    if (rc == REDUCE_NOTHING_FAILS) {
        fprintf(stderr, "kreplay reduce: nothing fails: %s / %s on %s is %s (%s); there is no failure to keep\n",
                st->kernel, st->ref, case_path, verdict_name(rep.before.verdict), rep.before.note);
        return EXIT_USAGE;
    }
    if (rc)
        return cli_error(&err);
    rc = write_and_check(st, &small, &rep, out);
    case_free(&small);
    return rc;
}

static int cli_reduce(int argc, char **argv)
{
    reduce_cli_t *st = calloc(1, sizeof *st);
    if (!st)
        return EXIT_USAGE;
    st->cmd = &cli_reduce_command;
    replay_options_default(&st->ro.replay);
    st->ro.replay.gpu_reruns = st->ro.replay.model_reruns = 1;
    st->ro.log = stdout;
    int rc = cli_parse(st->cmd, argc, argv, st, apply_option);
    if (rc == CLI_GO_ON && argc - optind != 1) {
        fprintf(stderr, "kreplay reduce: expected one CASE (or a results file with --row N)\n"
                        "Run 'kreplay help reduce' for its options.\n");
        rc = EXIT_USAGE;
    }
    if (rc == CLI_GO_ON)
        rc = reduce_input(st, argv[optind]);
    if (st->have_policy)
        policy_free(&st->policy);
    if (st->have_suite)
        suite_free(&st->suite);
    for (int i = 0; i < st->n_plugins; i++)
        plugin_unload(st->plugins[i]);
    free(st);
    return rc;
}
