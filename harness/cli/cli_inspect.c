#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "case_io.h"
#include "case_load.h"
#include "cli.h"
#include "cli_commands.h"
#include "input_health.h"
#include "term_layout.h"

static int64_t nonfinite_total_of(const input_health_t *h)
{
    return h->x_nf.nan + h->x_nf.pos_inf + h->x_nf.neg_inf;
}

static const char *or_dash(const char *s)
{
    return s ? s : "-";
}

static int cli_inspect(int argc, char **argv);

const cli_command_t cli_inspect_command = {
    .name = "inspect",
    .synopsis = "CASE...",
    .summary = "what a case holds, and the health of its inputs",
    .description = "Prints each case's shape, datasets, provenance and environment flags, and where its\n"
                   "non-finite activations are (row and column blocks) and how each quantizer\n"
                   "propagates them.",
    .operands = "file",
    .options = NULL,
    .n_options = 0,
    .run = cli_inspect,
};

static int cli_inspect(int argc, char **argv)
{
    int rc = cli_parse(&cli_inspect_command, argc, argv, NULL, NULL);
    if (rc != CLI_GO_ON)
        return rc;
    if (optind >= argc) {
        fprintf(stderr, "kreplay inspect: no case given\nusage: kreplay inspect CASE...\n");
        return EXIT_USAGE;
    }
    int status = 0;
    for (int i = optind; i < argc; i++) {
        case_t c;
        kr_error_t err = {{0}};
        if (case_load_safe(argv[i], &c, NULL, 0, &err)) {
            status = cli_error(&err);
            continue;
        }
        input_health_t h;
        input_health_compute(&c, &h);
        char health[512];
        input_health_describe(&h, health, sizeof health);
        /* Written whole, then fitted to the width (values wrapped under themselves). */
        char *buf = NULL;
        size_t len = 0;
        FILE *out = open_memstream(&buf, &len);
        if (!out) {
            case_free(&c);
            return EXIT_USAGE;
        }
        fprintf(out, "%s\n", argv[i]);
        fprintf(out, "  shape:        M=%lld N=%lld K=%lld\n", (long long)c.M, (long long)c.N, (long long)c.K);
        fprintf(out, "  x:            %s\n", c.x ? (c.x_storage == X_STORED_BF16 ? "bf16" : "fp32") : "absent");
        fprintf(out, "  x_fp8:        %s\n", c.x_fp8 ? (c.x_fp8_format == FP8_E4M3FN ? "e4m3fn + x_scale" : "e4m3fnuz + x_scale") : "absent");
        if (c.weight)
            fprintf(out, "  weight:       mxfp4, %s order, scales [%s]\n",
                   c.weight_order == WEIGHT_ORDER_FRAGMENT ? "fragment (WPERM)" : "checkpoint",
                   scale_layout_name(c.scale_layout));
        else
            fprintf(out, "  weight:       no MXFP4 weight\n");
        fprintf(out, "  weight_bf16:  %s\n", c.weight_bf16 ? "bf16 [N, K]" : "absent");
        fprintf(out, "  weight_ref:   %s\n", !c.weight_ref ? "absent"
                                       : c.weight_ref_len == c.N ? "per-row (folded path)"
                                       : c.weight_ref_len == 2 ? "2 elements (per-block path)"
                                                               : "1 element (aiter route)");
        fprintf(out, "  recorded:     out %s, out_rerun %s, aiter %s\n", c.out ? "yes" : "no",
               c.out_rerun ? "yes" : "no", c.aiter ? "yes" : "no");
        fprintf(out, "  provenance:   kernel_path=%s layer=%s model=%s captured=%s\n", or_dash(c.kernel_path),
               or_dash(c.layer), or_dash(c.model), or_dash(c.capture_time));
        fprintf(out, "  capture:      route=%s tp_rank=%s gpu_arch=%s time=%s extension=%s\n",
               or_dash(c.route), or_dash(c.tp_rank), or_dash(c.gpu_arch),
               or_dash(c.capture_time_source), or_dash(c.extension_path));
        fprintf(out, "  env flags:   ");
        if (!c.env_flags || !*c.env_flags)
            fprintf(out, " -\n");
        for (const char *p = c.env_flags; p && *p;) {
            const char *nl = strchr(p, '\n');
            int len = nl ? (int)(nl - p) : (int)strlen(p);
            fprintf(out, " %.*s\n%s", len, p, nl && nl[1] ? "               " : "");
            p = nl ? nl + 1 : p + len;
        }
        fprintf(out, "  input health: %s\n", health);
        if (c.x && nonfinite_total_of(&h) > 0) {
            input_map_t map;
            kr_error_t merr = {{0}};
            if (input_map_compute(c.x, c.M, c.K, &map, &merr) == 0) {
                char lines[4096];
                input_map_describe(&map, lines, sizeof lines);
                for (char *save = NULL, *l = strtok_r(lines, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
                    fprintf(out, "    %s\n", l);
                input_map_free(&map);
            }
        }
        fclose(out);
        term_wrap_lines_hang(stdout, buf ? buf : "", term_width(stdout), 16);
        free(buf);
        case_free(&c);
    }
    return status;
}
