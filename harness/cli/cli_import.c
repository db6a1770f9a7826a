/* kreplay import X.pt -o X.h5: a torch.save bad-case dump of the MXFP4
 * dispatch -> a schema-v1 HDF5 case (pt_import.h says how each key maps). */
#include <stdio.h>
#include <string.h>

#include "case_io.h"
#include "case_load.h"
#include "cli.h"
#include "cli_commands.h"

int cli_import(int argc, char **argv);

enum { OPT_ORDER = 256, OPT_LAYOUT };

static const cli_option_t import_options[] = {
    {'o', "output", 'o', "CASE.h5", CLI_FILE, NULL, "the case to write (atomically)"},
    {OPT_ORDER, "weight-order", 0, "ORDER", CLI_CHOICE, "checkpoint|fragment",
     "checkpoint (default) or fragment: the dump does not say\n"
     "whether RADIANCE_MXFP4_WPERM=1 had put the weight in WMMA\nfragment order"},
    {OPT_LAYOUT, "scale-layout", 0, "LAYOUT", CLI_CHOICE, "nk|kn|N,K/32|K/32,N",
     "nk ([N, K/32]) or kn ([K/32, N], what the dispatch holds);\n"
     "needed only when N == K/32, where the shape cannot tell"},
};

const cli_command_t cli_import_command = {
    .name = "import",
    .synopsis = "DUMP.pt -o CASE.h5 [--weight-order fragment|checkpoint] [--scale-layout nk|kn]",
    .summary = "convert a torch.save bad-case dump into a schema-v1 case",
    .description =
        "Converts a torch.save bad-case dump of the MXFP4 dispatch (_debug_compare: x_fp8,\n"
        "x_scale, weight, weight_scale, weight_ref, out, out_rerun, aiter, x, M, N, K) into a\n"
        "schema-v1 case (cases/SCHEMA.md).  The dump's \"aiter\" is the fp32 reference the serve\n"
        "computed (_exact_ref) and becomes ref_recorded.  `kreplay replay DUMP.pt` reads the\n"
        "dump directly.",
    .operands = "file",
    .options = import_options,
    .n_options = (int)(sizeof import_options / sizeof import_options[0]),
    .run = cli_import,
};

static int parse_layout(const char *s, scale_layout_t *out)
{
    if (!strcmp(s, "nk") || !strcmp(s, "N,K/32")) {
        *out = SCALE_LAYOUT_NK;
        return 0;
    }
    if (!strcmp(s, "kn") || !strcmp(s, "K/32,N")) {
        *out = SCALE_LAYOUT_KN;
        return 0;
    }
    return -1;
}

int cli_import(int argc, char **argv)
{
    case_load_options_t lo;
    memset(&lo, 0, sizeof lo);
    const char *out = NULL;
    cli_parser_t parser;
    cli_value_t v;
    int c;
    cli_parser_init(&parser, &cli_import_command, argc, argv);
    while ((c = cli_parser_next(&parser, &v)) > 0) {
        const char *optarg = v.arg;
        switch (c) {
        case 'o':
            out = optarg;
            break;
        case OPT_ORDER:
            if (case_weight_order_from_attr(optarg, &lo.weight_order) != 0) {
                fprintf(stderr, "kreplay import: --weight-order '%s': expected checkpoint or "
                                "fragment\n", optarg);
                return EXIT_USAGE;
            }
            lo.weight_order_set = 1;
            break;
        case OPT_LAYOUT:
            if (parse_layout(optarg, &lo.scale_layout) != 0) {
                fprintf(stderr, "kreplay import: --scale-layout '%s': expected nk (N,K/32) or kn "
                                "(K/32,N)\n", optarg);
                return EXIT_USAGE;
            }
            lo.scale_layout_set = 1;
            break;
        default:
            break;
        }
    }
    if (c < 0)
        return cli_parse_exit(c);
    if (optind != argc - 1 || !out) {
        fprintf(stderr, "kreplay import: %s\n",
                optind >= argc ? "no dump given" : optind < argc - 1 ? "one dump at a time"
                                                                     : "no output (-o CASE.h5)");
        return EXIT_USAGE;
    }
    const char *in = argv[optind];
    kr_error_t err = {{0}};
    case_t cs;
    if (case_load(in, &cs, &lo, &err) || case_write(out, &cs, &err)) {
        fprintf(stderr, "kreplay: error: %s\n", err.msg);
        case_free(&cs);
        return EXIT_USAGE;
    }
    printf("%s -> %s: M=%lld N=%lld K=%lld, x_fp8 %s, x %s, weight %s order, scales %s, "
           "recorded: out %s, out_rerun %s, ref_recorded %s\n",
           in, out, (long long)cs.M, (long long)cs.N, (long long)cs.K, cs.x_fp8 ? "e4m3fn" : "absent",
           cs.x ? (cs.x_storage == X_STORED_BF16 ? "bf16" : "fp32") : "absent",
           case_weight_order_attr(cs.weight_order),
           cs.weight ? scale_layout_name(cs.scale_layout) : "-", cs.out ? "yes" : "no",
           cs.out_rerun ? "yes" : "no", cs.ref_recorded ? "yes" : "no");
    case_free(&cs);
    return 0;
}
