#include "markdown_parts.h"

#include "escape.h"

void md_row_identity(FILE *fp, const result_t *r)
{
    fputs("| ", fp);
    esc_markdown(fp, r->case_name);
    fprintf(fp, " | %lld | %lld | %lld | ", (long long)r->M, (long long)r->N, (long long)r->K);
    esc_markdown(fp, r->band);
    fputs(" | ", fp);
    esc_markdown(fp, r->kernel);
    fputs(" | ", fp);
    esc_markdown(fp, r->reference);
    fputs(" |", fp);
}

void md_row_note_end(FILE *fp, const result_t *r)
{
    esc_markdown(fp, r->note);
    if (r->diagnosis[0]) {
        fputs(" **Diagnosis:** ", fp);
        esc_markdown(fp, r->diagnosis);
    }
    fputs(" |\n", fp);
}

void md_build_line(FILE *fp, const char *version, const char *commit, const char *host,
                   const char *time_utc)
{
    fputs("kreplay ", fp);
    esc_markdown(fp, version);
    fputs(" (commit ", fp);
    esc_markdown(fp, commit);
    fputs(") on ", fp);
    esc_markdown(fp, host);
    fputs(" at ", fp);
    esc_markdown(fp, time_utc);
}
