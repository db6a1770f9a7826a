#include "markdown_parts.h"

#include <stdlib.h>

#include "case_headline.h"
#include "escape.h"

void md_row_identity(FILE *fp, const result_t *r)
{
    esc_put(fp, esc_markdown, "| ", r->case_name, "");
    fprintf(fp, " | %lld | %lld | %lld | ", (long long)r->M, (long long)r->N, (long long)r->K);
    esc_put(fp, esc_markdown, "", r->band, " | ");
    esc_put(fp, esc_markdown, "", r->kernel, " | ");
    esc_put(fp, esc_markdown, "", r->reference, " |");
}

void md_row_note_end(FILE *fp, const result_t *r)
{
    esc_markdown(fp, r->note);
    esc_put_nonempty(fp, esc_markdown, " **Diagnosis:** ", r->diagnosis, "");
    fputs(" |\n", fp);
}

void md_build_line(FILE *fp, const char *version, const char *commit, const char *host,
                   const char *time_utc)
{
    esc_put(fp, esc_markdown, "kreplay ", version, " (commit ");
    esc_put(fp, esc_markdown, "", commit, ") on ");
    esc_put(fp, esc_markdown, "", host, " at ");
    esc_markdown(fp, time_utc);
}

void md_headlines(FILE *fp, const result_list_t *rows)
{
    int64_t more, clean;
    char *list = case_headlines_text(rows, esc_markdown, "- ", "\n", 50, &more, &clean);
    if (!list)
        return;
    fprintf(fp, "## Who is at fault\n\n%s", list);
    if (more)
        fprintf(fp, "- ... and %lld more cases\n", (long long)more);
    fprintf(fp, "\n%lld other case%s: no party at fault.\n\n", (long long)clean, clean == 1 ? "" : "s");
    free(list);
}
