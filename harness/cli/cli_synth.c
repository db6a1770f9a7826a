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

enum { OPT_SEED = 256, OPT_OUTLIERS, OPT_GAIN, OPT_TSPREAD, OPT_WSPREAD, OPT_NAN, OPT_ZERO,
       OPT_LAYOUT, OPT_FRAG, OPT_LAYER, OPT_MODEL, OPT_NAME, OPT_WFORMAT };

static const cli_option_t synth_options[] = {
    {'s', "shape", 's', "SHAPES", CLI_STRING, NULL,
     "comma-separated NxK pairs or names from the catalogue\n('kreplay list shapes'), or 'production'"},
    {'m', "m", 'm', "M[,M...]", CLI_STRING, NULL, "the M values"},
    {'o', "out", 'o', "DIR", CLI_DIR, NULL, "the directory to write the cases into"},
    {OPT_SEED, "seed", 0, "S", CLI_STRING, NULL, "random seed (default 1)"},
    {OPT_OUTLIERS, "outliers", 0, "N", CLI_STRING, NULL, "outlier channels (default 4)"},
    {OPT_GAIN, "outlier-gain", 0, "G", CLI_NONNEG_NUMBER, NULL, "outlier gain (default 100)"},
    {OPT_TSPREAD, "token-spread", 0, "S", CLI_NONNEG_NUMBER, NULL, "sigma of log2 per-token scale (default 1.5)"},
    {OPT_WSPREAD, "weight-spread", 0, "B", CLI_NONNEG_NUMBER, NULL,
     "mean binades a weight block sits below its row max (default 3)"},
    {OPT_NAN, "nan-block", 0, "RxC[@C0]", CLI_STRING, NULL, "a block of R rows x C columns of NaN in x, from column C0"},
    {OPT_ZERO, "zero-rows", 0, "N", CLI_STRING, NULL, "the last N rows of x are zero"},
    {OPT_LAYOUT, "scale-layout", 0, "LAYOUT", CLI_CHOICE, "nk|kn|N,K/32|K/32,N", "nk (N,K/32, default) or kn (K/32,N)"},
    {OPT_FRAG, "fragment-order", 0, NULL, CLI_FLAG, NULL, "store the weight in WPERM fragment order"},
    {OPT_WFORMAT, "weight-format", 0, "FORMAT", CLI_CHOICE, "mxfp4|bf16|both",
     "mxfp4 (default), bf16 (weight_bf16 only: the same Gaussian\n"
     "weights rounded to bf16, no x_fp8) or both"},
    {OPT_LAYER, "layer", 0, "NAME", CLI_STRING, NULL, "provenance: the layer"},
    {OPT_MODEL, "model", 0, "NAME", CLI_STRING, NULL, "provenance: the model"},
    {OPT_NAME, "name", 0, "NAME", CLI_STRING, NULL, "file name (single shape and M only)"},
};

const cli_command_t cli_synth_command = {
    .name = "synth",
    .synopsis = "--shape SHAPES --m M[,M...] --out DIR [options]",
    .summary = "write synthetic schema-v1 cases",
    .description = "Writes one schema-v1 case per shape and M: DIR/synth_N<N>_K<K>_M<M>_s<seed>.h5\n"
                   "(or DIR/<name>.h5 with --name and a single shape and M).  bf16 layers get a bf16\n"
                   "weight as well.",
    .operands = NULL,
    .options = synth_options,
    .n_options = (int)(sizeof synth_options / sizeof synth_options[0]),
    .run = cli_synth,
};

int cli_synth(int argc, char **argv)
{
    synth_params_t p;
    synth_params_default(&p);
    shape_t shapes[64];
    long long ms[64];
    int weight_format_given = 0;
    int n_shapes = 0, n_m = 0;
    const char *out_dir = NULL, *name = NULL;
    cli_parser_t parser;
    cli_value_t v;
    int c;
    cli_parser_init(&parser, &cli_synth_command, argc, argv);
    while ((c = cli_parser_next(&parser, &v)) > 0) {
        const char *optarg = v.arg;
        switch (c) {
        case 's': {
            shape_catalog_t cat;
            kr_error_t serr = {{0}};
            if (shape_catalog_load(shape_catalog_default_path(), &cat, &serr)) {
                fprintf(stderr, "kreplay: error: %s\n", serr.msg);
                return EXIT_USAGE;
            }
            n_shapes = shape_catalog_resolve(&cat, optarg, shapes, 64, &serr);
            shape_catalog_free(&cat);
            if (n_shapes < 0) {
                fprintf(stderr, "kreplay synth: --shape: %s (expected NxK, a name from 'kreplay list shapes', "
                                "or 'production')\n", serr.msg);
                return EXIT_USAGE;
            }
            break;
        }
        case 'm':
            n_m = cli_parse_int_list(optarg, ms, 64);
            if (n_m < 0) {
                fprintf(stderr, "kreplay synth: --m: expected M[,M...], got '%s'\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'o': out_dir = optarg; break;
        case OPT_SEED: p.seed = strtoull(optarg, NULL, 10); break;
        case OPT_OUTLIERS: p.outlier_channels = atoi(optarg); break;
        case OPT_GAIN: p.outlier_gain = atof(optarg); break;
        case OPT_TSPREAD: p.token_spread = atof(optarg); break;
        case OPT_WSPREAD: p.weight_exp_spread = atof(optarg); break;
        case OPT_NAN: {
            long long r, cc, c0 = 0;
            int got = sscanf(optarg, "%lldx%lld@%lld", &r, &cc, &c0);
            if (got < 2 || r <= 0 || cc <= 0 || c0 < 0) {
                fprintf(stderr, "kreplay synth: --nan-block: expected RxC[@C0], got '%s'\n", optarg);
                return EXIT_USAGE;
            }
            p.nan_rows = r;
            p.nan_cols = cc;
            p.nan_col0 = c0;
            break;
        }
        case OPT_ZERO: p.zero_rows = atoll(optarg); break;
        case OPT_LAYOUT:
            if (!strcmp(optarg, "nk") || !strcmp(optarg, "N,K/32"))
                p.scale_layout = SCALE_LAYOUT_NK;
            else if (!strcmp(optarg, "kn") || !strcmp(optarg, "K/32,N"))
                p.scale_layout = SCALE_LAYOUT_KN;
            else {
                fprintf(stderr, "kreplay synth: --scale-layout: '%s' is not nk or kn\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case OPT_FRAG: p.weight_order = WEIGHT_ORDER_FRAGMENT; break;
        case OPT_WFORMAT:
            weight_format_given = 1;
            if (synth_weight_format_from_name(optarg, &p.weight_format) != 0) {
                fprintf(stderr, "kreplay synth: --weight-format: '%s' is not mxfp4, bf16 or both\n",
                        optarg);
                return EXIT_USAGE;
            }
            break;
        case OPT_LAYER: p.layer = optarg; break;
        case OPT_MODEL: p.model = optarg; break;
        case OPT_NAME: name = optarg; break;
        default: break;
        }
    }
    if (c < 0)
        return cli_parse_exit(c);
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
        fprintf(stderr, "kreplay: error: %s\n", err.msg);
        return EXIT_USAGE;
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
                fprintf(stderr, "kreplay: error: %s\n", err.msg);
                return EXIT_USAGE;
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
                fprintf(stderr, "kreplay: error: %s\n", err.msg);
                return EXIT_USAGE;
            }
            printf("%s\n", path);
        }
    }
    return 0;
}
