#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_commands.h"
#include "term_layout.h"
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

static void list_kernels(FILE *out, int verbose, const char *patterns)
{
    if (!verbose)
        fprintf(out, "%-20s %-7s %-10s %s\n", "kernel", "family", "K % / M", "summary");
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
            fprintf(out, "%-20s %-7s %-10s %s\n", k->name, k->family, band, k->summary);
            continue;
        }
        fprintf(out, "%s\n", k->name);
        fprintf(out, "  family:        %s\n", k->family);
        fprintf(out, "  summary:       %s\n", k->summary);
        fprintf(out, "  activations:   %s\n", k->act_format);
        fprintf(out, "  weights:       %s\n", k->weight_format);
        char act[96], weight[96];
        operand_text(&k->act, act, sizeof act);
        operand_text(&k->weight, weight, sizeof weight);
        fprintf(out, "  operands:      activations %s; weight %s\n", act, weight);
        fprintf(out, "  GPU twin:      %s\n", k->gpu_entry == KERNEL_GPU_NONE ? "none"
                                        : k->gpu_matrix                ? "yes, and on the matrix units"
                                                                       : "yes");
        fprintf(out, "  accumulation:  %s\n", k->accumulation);
        char n_rule[48] = "";
        if (k->n_multiple > 0)
            snprintf(n_rule, sizeof n_rule, "; N %% %d == 0", k->n_multiple);
        fprintf(out, "  constraints:   K %% %d == 0%s; M in [%lld, %s]\n", k->k_multiple, n_rule,
               (long long)k->m_min, k->m_max > 0 ? "" : "any");
        fprintf(out, "  references:   %s%s\n", (k->refs & REF_EXACT) ? " R_exact" : "",
               (k->refs & REF_SOURCE) ? " R_source" : "");
        fprintf(out, "  thresholds:    rel_fro <= %g vs R_exact, <= %g vs R_source\n\n",
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
    /* Written whole, then fitted to the width: the last column (or a value)
     * wrapped under itself. */
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    if (!out)
        return EXIT_USAGE;
    int hang = -1;
    if (!what || !strcmp(what, "kernels")) {
        list_kernels(out, a.verbose, a.patterns);
        hang = a.verbose ? 17 : 40;
    } else if (!strcmp(what, "shapes")) {
        shape_catalog_t cat;
        kr_error_t err = {{0}};
        if (shape_catalog_load(shape_catalog_default_path(), &cat, &err)) {
            fclose(out);
            free(buf);
            return cli_error(&err);
        }
        fprintf(out, "%-22s %6s %6s %-6s %s\n", "shape", "N", "K", "weight", "role");
        for (int i = 0; i < cat.count; i++)
            fprintf(out, "%-22s %6lld %6lld %-6s %s\n", cat.shapes[i].name, (long long)cat.shapes[i].N,
                    (long long)cat.shapes[i].K, cat.shapes[i].weight, cat.shapes[i].role);
        shape_catalog_free(&cat);
        hang = 44;
    }
    fclose(out);
    if (hang != -1) {
        term_wrap_lines_hang(stdout, buf ? buf : "", term_width(stdout), hang);
        free(buf);
        return 0;
    }
    free(buf);
    fprintf(stderr, "kreplay list: unknown list '%s' (kernels, shapes)\n", what);
    return EXIT_USAGE;
}
