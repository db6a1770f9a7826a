/* The cells that begin and end a row of every Markdown row table
 * (report.md, report_full.md), each name escaped by esc_markdown. */
#ifndef KR_MARKDOWN_ROW_H
#define KR_MARKDOWN_ROW_H

#include <stdio.h>

#include "result.h"

/* "| CASE | M | N | K | BAND | KERNEL | REFERENCE |" */
void md_row_identity(FILE *fp, const result_t *r);

/* "NOTE |\n", with " **Diagnosis:** DIAGNOSIS" after the note when the row
 * has one. */
void md_row_note_end(FILE *fp, const result_t *r);

#endif
