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

typedef struct {
    case_load_options_t lo;
    const char *out;
} import_args_t;

static const cli_option_t import_options[] = {
    {'o', "output", 'o', "CASE.h5", CLI_FILE, NULL, "the case to write (atomically)",
     CLI_SET_STRING(import_args_t, out), CLI_ROWS_SAME},
    {OPT_ORDER, "weight-order", 0, "ORDER", CLI_CHOICE, "checkpoint|fragment",
     "checkpoint (default) or fragment: the dump does not say\n"
     "whether RADIANCE_MXFP4_WPERM=1 had put the weight in WMMA\nfragment order", CLI_BY_CODE, CLI_ROWS_CHANGED},
    {OPT_LAYOUT, "scale-layout", 0, "LAYOUT", CLI_CHOICE, "nk|kn|N,K/32|K/32,N",
     "nk ([N, K/32]) or kn ([K/32, N], what the dispatch holds);\n"
     "needed only when N == K/32, where the shape cannot tell", CLI_BY_CODE, CLI_ROWS_CHANGED},
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
    CLI_ROWS(import_options),
    .run = cli_import,
};

/* Not reached while the rows' choices are the words the parsers take; it
 * keeps a parser stricter than its row saying what it expected. */
static int bad_word(const char *option, const char *arg, const char *expected)
{
    fprintf(stderr, "kreplay import: --%s '%s': expected %s\n", option, arg, expected);
    return EXIT_USAGE;
}

static int apply_import_option(void *args, const cli_value_t *v)
{
    case_load_options_t *lo = &((import_args_t *)args)->lo;
    if (v->id == OPT_ORDER) {
        if (case_weight_order_from_attr(v->arg, &lo->weight_order) != 0)
            return bad_word("weight-order", v->arg, "checkpoint or fragment");
        lo->weight_order_set = 1;
    } else if (v->id == OPT_LAYOUT) {
        if (cli_scale_layout_from_word(v->arg, &lo->scale_layout) != 0)
            return bad_word("scale-layout", v->arg, "nk (N,K/32) or kn (K/32,N)");
        lo->scale_layout_set = 1;
    }
    return CLI_GO_ON;
}

int cli_import(int argc, char **argv)
{
    import_args_t a;
    memset(&a, 0, sizeof a);
    int rc = cli_parse(&cli_import_command, argc, argv, &a, apply_import_option);
    if (rc != CLI_GO_ON)
        return rc;
    const char *out = a.out;
    const case_load_options_t lo = a.lo;
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
        cli_error(&err);
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
