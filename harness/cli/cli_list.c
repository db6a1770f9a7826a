#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "registry.h"
#include "shape_catalog.h"

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
        printf("  accumulation:  %s\n", k->accumulation);
        printf("  constraints:   K %% %d == 0; M in [%lld, %s]\n", k->k_multiple,
               (long long)k->m_min, k->m_max > 0 ? "" : "any");
        printf("  references:   %s%s\n", (k->refs & REF_EXACT) ? " R_exact" : "",
               (k->refs & REF_SOURCE) ? " R_source" : "");
        printf("  thresholds:    rel_fro <= %g vs R_exact, <= %g vs R_source\n\n",
               k->rel_tol_exact, k->rel_tol_source);
    }
}

int cli_list(int argc, char **argv)
{
    int verbose = 0;
    const char *what = NULL, *patterns = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--verbose") || !strcmp(argv[i], "-v"))
            verbose = 1;
        else if ((!strcmp(argv[i], "--kernels") || !strcmp(argv[i], "-k")) && i + 1 < argc)
            patterns = argv[++i];
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: kreplay list kernels [--verbose] [--kernels PATTERNS]\n       kreplay list shapes\n");
            return 0;
        } else if (!what)
            what = argv[i];
        else {
            fprintf(stderr, "kreplay list: unexpected argument '%s'\n", argv[i]);
            return EXIT_USAGE;
        }
    }
    if (!what || !strcmp(what, "kernels")) {
        list_kernels(verbose, patterns);
        return 0;
    }
    if (!strcmp(what, "shapes")) {
        shape_catalog_t cat;
        kr_error_t err = {{0}};
        if (shape_catalog_load(shape_catalog_default_path(), &cat, &err)) {
            fprintf(stderr, "kreplay: error: %s\n", err.msg);
            return EXIT_USAGE;
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
