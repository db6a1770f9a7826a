/* What the Markdown writers (report.md, report_full.md) both write: the
 * cells that begin and end a row of every row table, and the build line;
 * each name escaped by esc_markdown. */
#ifndef KR_MARKDOWN_PARTS_H
#define KR_MARKDOWN_PARTS_H

#include <stdio.h>

#include "result.h"

/* "| CASE | M | N | K | BAND | KERNEL | REFERENCE |" */
void md_row_identity(FILE *fp, const result_t *r);

/* "NOTE |\n", with " **Diagnosis:** DIAGNOSIS" after the note when the row
 * has one. */
void md_row_note_end(FILE *fp, const result_t *r);

/* "## Who is at fault" and a bullet per case with a party at fault (its
 * headline, case_headline.h), then how many others have none; nothing when
 * no case has one. */
void md_headlines(FILE *fp, const result_list_t *rows);

/* "kreplay VERSION (commit COMMIT) on HOST at TIME_UTC" */
void md_build_line(FILE *fp, const char *version, const char *commit, const char *host,
                   const char *time_utc);

#endif
