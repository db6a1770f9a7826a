#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "atomic_file.h"
#include "case_io.h"
#include "cli.h"
#include "cli_commands.h"
#include "shape_catalog.h"
#include "synth.h"
#include "kr_string.h"

static int cli_synth(int argc, char **argv);

enum { OPT_SEED = 256, OPT_NAN, OPT_ZERO,
       OPT_LAYOUT, OPT_FRAG, OPT_LAYER, OPT_MODEL, OPT_NAME, OPT_WFORMAT };

/* What synth's command line asks: the parameters, and the shapes and Ms
 * they are written for. */
typedef struct {
    synth_params_t p;
    shape_t shapes[64];
    long long ms[64];
    int weight_format_given;
    int n_shapes, n_m;
    const char *out_dir, *name;
} synth_args_t;

static const cli_option_t synth_options[] = {
    {'s', "shape", 's', "SHAPES", CLI_STRING, NULL,
     "comma-separated NxK pairs or names from the catalogue\n('kreplay list shapes'), or 'production'",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {'m', "m", 'm', "M[,M...]", CLI_STRING, NULL, "the M values", CLI_BY_CODE, CLI_ROWS_CHANGED},
    {'o', "out", 'o', "DIR", CLI_DIR, NULL, "the directory to write the cases into",
     CLI_SET_STRING(synth_args_t, out_dir), CLI_ROWS_SAME},
    {OPT_SEED, "seed", 0, "S", CLI_STRING, NULL, "random seed (default 1)", CLI_BY_CODE, CLI_ROWS_CHANGED},
    CLI_OPT_OUTLIERS("outlier channels (default 4)"),
    CLI_OPT_OUTLIER_GAIN("outlier gain (default 100)"),
    CLI_OPT_TOKEN_SPREAD("sigma of log2 per-token scale (default 1.5)"),
    CLI_OPT_WEIGHT_SPREAD("mean binades a weight block sits below its row max (default 3)"),
    {OPT_NAN, "nan-block", 0, "RxC[@C0]", CLI_STRING, NULL, "a block of R rows x C columns of NaN in x, from column C0",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_ZERO, "zero-rows", 0, "N", CLI_STRING, NULL, "the last N rows of x are zero", CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_LAYOUT, "scale-layout", 0, "LAYOUT", CLI_CHOICE, "nk|kn|N,K/32|K/32,N", "nk (N,K/32, default) or kn (K/32,N)",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_FRAG, "fragment-order", 0, NULL, CLI_FLAG, NULL, "store the weight in WPERM fragment order",
     CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_WFORMAT, "weight-format", 0, "FORMAT", CLI_CHOICE, "mxfp4|bf16|both",
     "mxfp4 (default), bf16 (weight_bf16 only: the same Gaussian\n"
     "weights rounded to bf16, no x_fp8) or both", CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_LAYER, "layer", 0, "NAME", CLI_STRING, NULL, "provenance: the layer",
     CLI_SET_STRING(synth_args_t, p.layer), CLI_ROWS_CHANGED},
    {OPT_MODEL, "model", 0, "NAME", CLI_STRING, NULL, "provenance: the model",
     CLI_SET_STRING(synth_args_t, p.model), CLI_ROWS_CHANGED},
    {OPT_NAME, "name", 0, "NAME", CLI_STRING, NULL, "file name (single shape and M only)",
     CLI_SET_STRING(synth_args_t, name), CLI_ROWS_CHANGED},
};

const cli_command_t cli_synth_command = {
    .name = "synth",
    .synopsis = "--shape SHAPES --m M[,M...] --out DIR [options]",
    .summary = "write synthetic schema-v1 cases",
    .description = "Writes one schema-v1 case per shape and M: DIR/synth_N<N>_K<K>_M<M>_s<seed>.h5\n"
                   "(or DIR/<name>.h5 with --name and a single shape and M).  bf16 layers get a bf16\n"
                   "weight as well.",
    .operands = NULL,
    CLI_ROWS(synth_options),
    .run = cli_synth,
};

/* --shape: catalogue names, NxK or 'production'.  Returns CLI_GO_ON or the exit code. */
static int apply_shapes(synth_args_t *a, const char *arg)
{
    shape_catalog_t cat;
    kr_error_t serr = {{0}};
    if (shape_catalog_load(shape_catalog_default_path(), &cat, &serr)) {
        return cli_error(&serr);
    }
    a->n_shapes = shape_catalog_resolve(&cat, arg, a->shapes, 64, &serr);
    shape_catalog_free(&cat);
    if (a->n_shapes < 0) {
        fprintf(stderr, "kreplay synth: --shape: %s (expected NxK, a name from 'kreplay list shapes', "
                        "or 'production')\n", serr.msg);
        return EXIT_USAGE;
    }
    return CLI_GO_ON;
}

/* --nan-block RxC[@C0]. */
static int apply_nan_block(synth_params_t *p, const char *arg)
{
    long long r, cc, c0 = 0;
    int got = sscanf(arg, "%lldx%lld@%lld", &r, &cc, &c0);
    if (got < 2 || r <= 0 || cc <= 0 || c0 < 0)
        return cli_option_error(&cli_synth_command, "nan-block", "expected RxC[@C0], got '%s'", arg);
    p->nan_rows = r;
    p->nan_cols = cc;
    p->nan_col0 = c0;
    return CLI_GO_ON;
}

static int apply_synth_option(void *args, const cli_value_t *v)
{
    synth_args_t *a = args;
    synth_params_t *p = &a->p;
    const char *optarg = v->arg;
    if (cli_apply_synth_option(v, p))
        return CLI_GO_ON;
    switch (v->id) {
    case 's':
        return apply_shapes(a, optarg);
    case 'm':
        a->n_m = cli_option_int_list(&cli_synth_command, v, a->ms, 64);
        return a->n_m < 0 ? EXIT_USAGE : CLI_GO_ON;
    case OPT_SEED: p->seed = strtoull(optarg, NULL, 10); break;
    case OPT_NAN:
        return apply_nan_block(p, optarg);
    case OPT_ZERO: p->zero_rows = atoll(optarg); break;
    case OPT_LAYOUT:
        if (cli_scale_layout_from_word(optarg, &p->scale_layout) != 0)
            return cli_option_error(&cli_synth_command, "scale-layout", "'%s' is not nk or kn", optarg);
        break;
    case OPT_FRAG: p->weight_order = WEIGHT_ORDER_FRAGMENT; break;
    case OPT_WFORMAT:
        a->weight_format_given = 1;
        if (synth_weight_format_from_name(optarg, &p->weight_format) != 0)
            return cli_option_error(&cli_synth_command, "weight-format", "'%s' is not mxfp4, bf16 or both", optarg);
        break;
    default: break;
    }
    return CLI_GO_ON;
}

static int cli_synth(int argc, char **argv)
{
    synth_args_t a;
    memset(&a, 0, sizeof a);
    synth_params_default(&a.p);
    int rc = cli_parse(&cli_synth_command, argc, argv, &a, apply_synth_option);
    if (rc != CLI_GO_ON)
        return rc;
    synth_params_t p = a.p;
    const shape_t *shapes = a.shapes;
    const long long *ms = a.ms;
    const int weight_format_given = a.weight_format_given, n_shapes = a.n_shapes, n_m = a.n_m;
    const char *out_dir = a.out_dir, *name = a.name;
    if (n_shapes <= 0 || n_m <= 0 || !out_dir) {
        fprintf(stderr, "kreplay synth: --shape, --m and --out are required\n");
        fprintf(stderr, "Run 'kreplay help synth' for its options.\n");
        return EXIT_USAGE;
    }
    if (name && (n_shapes != 1 || n_m != 1)) {
        fprintf(stderr, "kreplay synth: --name needs a single shape and a single M\n");
        return EXIT_USAGE;
    }
    kr_error_t err = {{0}};
    if (make_dirs(out_dir, &err)) {
        return cli_error(&err);
    }
    for (int s = 0; s < n_shapes; s++) {
        for (int j = 0; j < n_m; j++) {
            p.N = shapes[s].N;
            p.K = shapes[s].K;
            p.M = ms[j];
            /* A catalogue shape names its layer, and a bf16 layer gets its
             * bf16 weight too (with the MXFP4 one, so every family can run). */
            synth_params_t ps = p;
            if (!p.layer && shapes[s].role[0])
                ps.layer = shapes[s].name;
            if (!weight_format_given && !strcmp(shapes[s].weight, "bf16"))
                ps.weight_format = SYNTH_WEIGHT_BOTH;
            case_t cs;
            if (synth_case(&ps, &cs, &err)) {
                return cli_error(&err);
            }
            char path[4096];
            if (name)
                snprintf(path, sizeof path, "%s/%s.h5", out_dir, name);
            else
                snprintf(path, sizeof path, "%s/synth_N%lld_K%lld_M%lld_s%llu.h5", out_dir,
                         (long long)shapes[s].N, (long long)shapes[s].K, ms[j], (unsigned long long)p.seed);
            int bad = case_write(path, &cs, &err);
            case_free(&cs);
            if (bad) {
                return cli_error(&err);
            }
            printf("%s\n", path);
        }
    }
    return 0;
}
