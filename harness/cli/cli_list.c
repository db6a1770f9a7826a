#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_commands.h"
#include "cli_kernel_patterns.h"
#include "registry.h"
#include "shape_catalog.h"

/* "e4m3fn (3 mantissa bits), per-token scale" from the typed format. */
static void operand_text(const operand_format_t *f, char *buf, size_t cap)
{
    if (f->elem == ELEM_NONE) {
        snprintf(buf, cap, "none");
        return;
    }
    char block[32] = "";
    if (f->block > 0)
        snprintf(block, sizeof block, " per %d", f->block);
    snprintf(buf, cap, "%s (%d mantissa bits), scale %s%s", elem_format_name(f->elem), f->mantissa_bits,
             scale_kind_name(f->scale), block);
}

static void list_kernels(int verbose, const char *patterns)
{
    if (!verbose)
        printf("%-20s %-7s %-10s %s\n", "kernel", "family", "K % / M", "summary");
    for (int i = 0; i < kernel_count(); i++) {
        const kernel_desc_t *k = kernel_at(i);
        if (!kernel_name_matches(k->name, patterns))
            continue;
        char band[64];
        if (k->m_max > 0)
            snprintf(band, sizeof band, "%d / %lld-%lld", k->k_multiple, (long long)k->m_min,
                     (long long)k->m_max);
        else
            snprintf(band, sizeof band, "%d / %lld+", k->k_multiple, (long long)k->m_min);
        if (!verbose) {
            printf("%-20s %-7s %-10s %s\n", k->name, k->family, band, k->summary);
            continue;
        }
        printf("%s\n", k->name);
        printf("  family:        %s\n", k->family);
        printf("  summary:       %s\n", k->summary);
        printf("  activations:   %s\n", k->act_format);
        printf("  weights:       %s\n", k->weight_format);
        char act[96], weight[96];
        operand_text(&k->act, act, sizeof act);
        operand_text(&k->weight, weight, sizeof weight);
        printf("  operands:      activations %s; weight %s\n", act, weight);
        printf("  GPU twin:      %s\n", k->gpu_entry == KERNEL_GPU_NONE ? "none"
                                        : k->gpu_matrix                ? "yes, and on the matrix units"
                                                                       : "yes");
        printf("  accumulation:  %s\n", k->accumulation);
        printf("  constraints:   K %% %d == 0; M in [%lld, %s]\n", k->k_multiple,
               (long long)k->m_min, k->m_max > 0 ? "" : "any");
        printf("  references:   %s%s\n", (k->refs & REF_EXACT) ? " R_exact" : "",
               (k->refs & REF_SOURCE) ? " R_source" : "");
        printf("  thresholds:    rel_fro <= %g vs R_exact, <= %g vs R_source\n\n",
               k->rel_tol_exact, k->rel_tol_source);
    }
}

static int cli_list(int argc, char **argv);

enum { OPT_LIST_KERNELS = 1 };

typedef struct {
    int verbose;
    const char *patterns;
} list_args_t;

static const cli_option_t list_options[] = {
    CLI_OPT_VERBOSE("formats, accumulation order, constraints and thresholds of each kernel",
                    CLI_SET_TRUE(list_args_t, verbose)),
    {OPT_LIST_KERNELS, "kernels", 'k', "PATTERNS", CLI_KERNELS, NULL, "only the kernels matching these globs",
     CLI_SET_STRING(list_args_t, patterns), CLI_ROWS_CHANGED},
};

const cli_command_t cli_list_command = {
    .name = "list",
    .synopsis = "kernels [--verbose] [--kernels PATTERNS]\nshapes",
    .summary = "the kernel registry, or the production shape catalogue",
    .description = "kernels: the registry (--verbose: formats and accumulation order); shapes: the\n"
                   "production shape catalogue (cases/shapes.csv).",
    .operands = "kernels shapes",
    CLI_ROWS(list_options),
    .run = cli_list,
};

static int cli_list(int argc, char **argv)
{
    list_args_t a = {0};
    const char *what = NULL;
    int rc = cli_parse(&cli_list_command, argc, argv, &a, NULL);
    if (rc != CLI_GO_ON)
        return rc;
    if (optind < argc)
        what = argv[optind];
    if (argc - optind > 1) {
        fprintf(stderr, "kreplay list: unexpected argument '%s'\\n", argv[optind + 1]);
        return EXIT_USAGE;
    }
    if (a.patterns && cli_check_kernel_patterns(&cli_list_command, a.patterns, NULL, 0))
        return EXIT_USAGE;
    if (!what || !strcmp(what, "kernels")) {
        list_kernels(a.verbose, a.patterns);
        return 0;
    }
    if (!strcmp(what, "shapes")) {
        shape_catalog_t cat;
        kr_error_t err = {{0}};
        if (shape_catalog_load(shape_catalog_default_path(), &cat, &err)) {
            return cli_error(&err);
        }
        printf("%-22s %6s %6s %-6s %s\n", "shape", "N", "K", "weight", "role");
        for (int i = 0; i < cat.count; i++)
            printf("%-22s %6lld %6lld %-6s %s\n", cat.shapes[i].name, (long long)cat.shapes[i].N,
                   (long long)cat.shapes[i].K, cat.shapes[i].weight, cat.shapes[i].role);
        shape_catalog_free(&cat);
        return 0;
    }
    fprintf(stderr, "kreplay list: unknown list '%s' (kernels, shapes)\n", what);
    return EXIT_USAGE;
}
