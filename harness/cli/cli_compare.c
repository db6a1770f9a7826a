#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "case_io.h"
#include "case_load.h"
#include "cli.h"
#include "cli_commands.h"
#include "term_layout.h"
#include "compare.h"
#include "kr_string.h"
#include "progress.h"
#include "report_bundle.h"
#include "results_store.h"
#include "shape_catalog.h"
#include "synth.h"

static int cli_compare(int argc, char **argv);

enum { OPT_SYNTH = 256, OPT_M, OPT_SEEDS };

/* What compare's command line asks: the numerics, the synthetic cases and
 * where the tables go. */
typedef struct {
    kernel_options_t kopt;
    synth_params_t sp;
    const char *synth_spec, *out_dir;
    long long ms[64];
    int n_m, seeds, json;
} compare_args_t;

static const cli_option_t compare_options[] = {
    {OPT_SYNTH, "synth", 0, "SHAPES", CLI_STRING, NULL,
     "synthesize the cases in memory: catalogue names, NxK, or\n'production' (cases/shapes.csv)",
     CLI_SET_STRING(compare_args_t, synth_spec), CLI_ROWS_CHANGED},
    {OPT_M, "m", 0, "LIST", CLI_STRING, NULL, "M values for --synth (default 1,64,512)", CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_SEEDS, "seeds", 0, "N", CLI_POS_INT, NULL, "seeds per shape and M (default 1)",
     CLI_SET_INT(compare_args_t, seeds), CLI_ROWS_CHANGED},
    CLI_OPT_OUTLIERS("outlier channels of the synthetic x (see 'kreplay synth --help')"),
    CLI_OPT_OUTLIER_GAIN("their gain"),
    CLI_OPT_TOKEN_SPREAD("sigma of log2 per-token scale"),
    CLI_OPT_WEIGHT_SPREAD("mean binades a weight block sits below its row max"),
    CLI_OPT_FP8_QUANT,
    CLI_OPT_MXFP4_QUANT,
    CLI_OPT_JSON(CLI_SET_TRUE(compare_args_t, json)),
    {'o', "out", 'o', "DIR", CLI_DIR, NULL, "write DIR/compare.json, compare.csv, compare.md",
     CLI_SET_STRING(compare_args_t, out_dir), CLI_ROWS_SAME},
    CLI_OPT_THREADS,
};

const cli_command_t cli_compare_command = {
    .name = "compare",
    .synopsis = "[A B] [options] CASE|DIR...\n[A B] --synth SHAPES [--m LIST] [--seeds N] [options]",
    .summary = "W4A8 against W4A4 (or any two kernels), per shape and M band",
    .description =
        "Feeds two kernels (default: w4a8.folded or w4a8.perblock, and w4a4.aiter) from the\n"
        "same source activations x, each quantizing it its own way, and reports per shape\n"
        "and M band: each against R_source, the ratio of their errors, A against B, and\n"
        "each against its own R_exact.  Errors are pooled over the group's cases.",
    .operands = "file",
    CLI_ROWS(compare_options),
    .run = cli_compare,
};

static int apply_compare_option(void *args, const cli_value_t *v)
{
    compare_args_t *a = args;
    if (cli_apply_kernel_option(v, &a->kopt) || cli_apply_synth_option(v, &a->sp))
        return CLI_GO_ON;
    if (v->id == OPT_M) {
        a->n_m = cli_option_int_list(&cli_compare_command, v, a->ms, 64);
        return a->n_m < 0 ? EXIT_USAGE : CLI_GO_ON;
    }
    return CLI_GO_ON;
}

static json_t *num(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

/* The text table's width with every column; narrower terminals get the
 * columns that compare (term_layout.h). */
#define COMPARE_WIDE 122

static void print_table(FILE *fp, const compare_t *cmp, int markdown)
{
    const char *a = cmp->a->name, *b = cmp->b->name;
    const int width = markdown ? 0 : term_width(fp), narrow = width > 0 && width < COMPARE_WIDE;
    if (markdown) {
        fprintf(fp, "# kreplay compare: %s (A) vs %s (B)\n\n", a, b);
        fprintf(fp, "Both from the same source activations; errors pooled over each group's cases.\n\n");
        fprintf(fp, "| shape | N | K | band | cases | A vs R_source | B vs R_source | B/A | A vs B | A vs own R_exact | B vs own R_exact |\n");
        fprintf(fp, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
    } else {
        fprintf(fp, "A = %s, B = %s%s(both from the same x; errors relative to ||R_source||, pooled)\n", a, b,
                narrow ? "\n" : " ");
        if (narrow)
            fprintf(fp, "%-15s %-7s %9s %9s %6s %9s %9s %9s\n", "shape", "band", "A/R_src", "B/R_src", "B/A",
                    "A vs B", "A/R_exact", "B/R_exact");
        else
            fprintf(fp, "%-20s %6s %6s %-8s %5s %13s %13s %7s %10s %12s %12s\n", "shape", "N", "K", "band",
                    "cases", "A vs R_src", "B vs R_src", "B/A", "A vs B", "A vs R_exact", "B vs R_exact");
    }
    for (int i = 0; i < cmp->count; i++) {
        const compare_group_t *g = &cmp->groups[i];
        double ra = compare_rel(g->a_err2, g->ref2), rb = compare_rel(g->b_err2, g->ref2);
        double rab = compare_rel(g->ab_err2, g->ref2);
        double ea = compare_rel(g->a_exact_err2, g->a_exact_ref2);
        double eb = compare_rel(g->b_exact_err2, g->b_exact_ref2);
        if (markdown)
            fprintf(fp, "| %s | %lld | %lld | %s | %d | %.4g | %.4g | %.2f | %.4g | %.3g | %.3g |\n", g->shape,
                    (long long)g->N, (long long)g->K, g->band, g->cases, ra, rb, rb / ra, rab, ea, eb);
        else if (narrow) {
            char shape[16];
            term_middle(g->shape, 15, shape, sizeof shape);
            fprintf(fp, "%-15s %-7.7s %9.4g %9.4g %6.2f %9.4g %9.3g %9.3g\n", shape, g->band, ra, rb, rb / ra, rab,
                    ea, eb);
        } else
            fprintf(fp, "%-20.20s %6lld %6lld %-8s %5d %13.4g %13.4g %7.2f %10.4g %12.3g %12.3g\n", g->shape,
                    (long long)g->N, (long long)g->K, g->band, g->cases, ra, rb, rb / ra, rab, ea, eb);
    }
    if (narrow)
        fprintf(fp, "(N, K and cases not shown at width %d: COLUMNS=%d shows them)\n", width, COMPARE_WIDE);
}

static json_t *to_json(const compare_t *cmp, const char *cmdline)
{
    json_t *root = json_object();
    json_object_set_new(root, "command", json_string(cmdline));
    json_object_set_new(root, "a", json_string(cmp->a->name));
    json_object_set_new(root, "b", json_string(cmp->b->name));
    json_t *arr = json_array();
    for (int i = 0; i < cmp->count; i++) {
        const compare_group_t *g = &cmp->groups[i];
        double ra = compare_rel(g->a_err2, g->ref2), rb = compare_rel(g->b_err2, g->ref2);
        json_t *o = json_object();
        json_object_set_new(o, "shape", json_string(g->shape));
        json_object_set_new(o, "N", json_integer(g->N));
        json_object_set_new(o, "K", json_integer(g->K));
        json_object_set_new(o, "band", json_string(g->band));
        json_object_set_new(o, "cases", json_integer(g->cases));
        json_object_set_new(o, "a_vs_source", num(ra));
        json_object_set_new(o, "b_vs_source", num(rb));
        json_object_set_new(o, "ratio_b_over_a", num(rb / ra));
        json_object_set_new(o, "a_vs_b", num(compare_rel(g->ab_err2, g->ref2)));
        json_object_set_new(o, "a_vs_own_exact", num(compare_rel(g->a_exact_err2, g->a_exact_ref2)));
        json_object_set_new(o, "b_vs_own_exact", num(compare_rel(g->b_exact_err2, g->b_exact_ref2)));
        json_array_append_new(arr, o);
    }
    json_object_set_new(root, "groups", arr);
    return root;
}

static void write_csv(FILE *fp, const compare_t *cmp)
{
    fprintf(fp, "shape,N,K,band,cases,a,b,a_vs_source,b_vs_source,ratio_b_over_a,a_vs_b,a_vs_own_exact,b_vs_own_exact\n");
    for (int i = 0; i < cmp->count; i++) {
        const compare_group_t *g = &cmp->groups[i];
        double ra = compare_rel(g->a_err2, g->ref2), rb = compare_rel(g->b_err2, g->ref2);
        fprintf(fp, "%s,%lld,%lld,%s,%d,%s,%s,%.9g,%.9g,%.9g,%.9g,%.9g,%.9g\n", g->shape, (long long)g->N,
                (long long)g->K, g->band, g->cases, cmp->a->name, cmp->b->name, ra, rb, rb / ra,
                compare_rel(g->ab_err2, g->ref2), compare_rel(g->a_exact_err2, g->a_exact_ref2),
                compare_rel(g->b_exact_err2, g->b_exact_ref2));
    }
}

/* What one of compare's files holds. */
typedef void (*compare_file_fn)(FILE *fp, const compare_t *cmp, const char *cmdline);

static void json_file(FILE *fp, const compare_t *cmp, const char *cmdline)
{
    json_t *root = to_json(cmp, cmdline);
    json_dumpf(root, fp, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(root);
}

static void csv_file(FILE *fp, const compare_t *cmp, const char *cmdline)
{
    (void)cmdline;
    write_csv(fp, cmp);
}

static void markdown_file(FILE *fp, const compare_t *cmp, const char *cmdline)
{
    print_table(fp, cmp, 1);
    fprintf(fp, "\ncommand: `%s`\n", cmdline);
}

static int write_outputs(const char *dir, const compare_t *cmp, const char *cmdline, kr_error_t *err)
{
    static const struct {
        const char *name;
        compare_file_fn write;
    } files[] = {{"compare.json", json_file}, {"compare.csv", csv_file}, {"compare.md", markdown_file}};
    if (make_dirs(dir, err))
        return -1;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[4096];
        atomic_file_t f;
        snprintf(path, sizeof path, "%s/%s", dir, files[i].name);
        if (atomic_file_open(&f, path, err))
            return -1;
        files[i].write(f.fp, cmp, cmdline);
        if (atomic_file_commit(&f, err))
            return -1;
    }
    /* The report page and plots (error vs M, W4A8 vs W4A4, heatmap) from
     * the per-case rows. */
    results_meta_t meta;
    results_meta_init(&meta);
    kr_strlcpy(meta.command, cmdline, sizeof meta.command);
    kr_strlcpy(meta.version, cli_version(), sizeof meta.version);
    kr_strlcpy(meta.git_commit, cli_git_commit(), sizeof meta.git_commit);
    report_options_t ro;
    report_options_init(&ro);
    ro.meta = &meta;
    ro.write_tables = 1;
    ro.title = "kreplay compare";
    return report_generate(dir, &cmp->rows, NULL, 0, &ro, err);
}

static int cli_compare(int argc, char **argv)
{
    compare_args_t a = {.ms = {1, 64, 512}, .n_m = 3, .seeds = 1};
    kernel_options_default(&a.kopt);
    synth_params_default(&a.sp);
    int rc = cli_parse(&cli_compare_command, argc, argv, &a, apply_compare_option);
    if (rc != CLI_GO_ON)
        return rc;
    const kernel_options_t kopt = a.kopt;
    synth_params_t sp = a.sp;
    const char *synth_spec = a.synth_spec, *out_dir = a.out_dir;
    const long long *ms = a.ms;
    const int n_m = a.n_m, seeds = a.seeds, json = a.json;
    compare_t cmp = {0};
    cmp.a = kernel_for_role(COMPARE_ROLE_W4A8_PRODUCTION) ? kernel_for_role(COMPARE_ROLE_W4A8_PRODUCTION)
                                                           : kernel_for_role(COMPARE_ROLE_W4A8_MODEL);
    cmp.b = kernel_for_role(COMPARE_ROLE_W4A4_EMULATION);
    /* Two leading kernel names pick the pair. */
    if (argc - optind >= 2 && kernel_find(argv[optind]) && kernel_find(argv[optind + 1])) {
        cmp.a = kernel_find(argv[optind]);
        cmp.b = kernel_find(argv[optind + 1]);
        optind += 2;
    }
    if (cmp.a->op != KERNEL_OP_GEMM || cmp.b->op != KERNEL_OP_GEMM || !cmp.a->run_cpu ||
        !cmp.b->run_cpu || !(cmp.a->refs & REF_EXACT) || !(cmp.b->refs & REF_EXACT)) {
        fprintf(stderr, "kreplay compare: %s and %s must both be MXFP4-weight GEMM kernels\n",
                cmp.a->name, cmp.b->name);
        return EXIT_USAGE;
    }
    if (!synth_spec && optind >= argc) {
        fprintf(stderr, "kreplay compare: give cases, or --synth SHAPES\n");
        fprintf(stderr, "Run 'kreplay help compare' for its options.\n");
        return EXIT_USAGE;
    }
    kr_error_t err = {{0}};
    int input_errors = 0;
    if (synth_spec) {
        shape_catalog_t cat;
        shape_t shapes[64];
        if (shape_catalog_load(shape_catalog_default_path(), &cat, &err)) {
            return cli_error(&err);
        }
        int n_shapes = shape_catalog_resolve(&cat, synth_spec, shapes, 64, &err);
        shape_catalog_free(&cat);
        if (n_shapes < 0) {
            return cli_error(&err);
        }
        progress_t sprog;
        int64_t done = 0;
        progress_start(&sprog, "kreplay compare", (int64_t)n_shapes * n_m * seeds);
        for (int s = 0; s < n_shapes; s++)
            for (int j = 0; j < n_m; j++)
                for (int seed = 1; seed <= seeds; seed++) {
                    progress_update(&sprog, done++);
                    sp.N = shapes[s].N;
                    sp.K = shapes[s].K;
                    sp.M = ms[j];
                    sp.seed = (uint64_t)seed;
                    case_t cs;
                    if (synth_case(&sp, &cs, &err) || compare_add_case(&cmp, &cs, shapes[s].name, &kopt, &err)) {
                        cli_error(&err);
                        input_errors++;
                    }
                    case_free(&cs);
                }
        progress_update(&sprog, done);
        progress_finish(&sprog);
    }
    int n_cases = 0;
    char **cases = cli_expand_cases(argc - optind, argv + optind, &n_cases);
    progress_t prog;
    progress_start(&prog, "kreplay compare", n_cases);
    for (int i = 0; i < n_cases; i++) {
        progress_update(&prog, i);
        case_t cs;
        if (case_load_safe(cases[i], &cs, NULL, 0, &err) || compare_add_case(&cmp, &cs, NULL, &kopt, &err)) {
            cli_error(&err);
            input_errors++;
        }
        case_free(&cs);
    }
    progress_update(&prog, n_cases);
    progress_finish(&prog);
    cli_free_strings(cases);
    char *cmdline = cli_command_line(argc, argv);
    if (json) {
        json_file(stdout, &cmp, cmdline);
        fputc('\n', stdout);
    } else if (cmp.count) {
        print_table(stdout, &cmp, 0);
    }
    int status = input_errors ? EXIT_USAGE : 0;
    if (out_dir && write_outputs(out_dir, &cmp, cmdline, &err)) {
        status = cli_error(&err);
    }
    free(cmdline);
    compare_free(&cmp);
    return status;
}
