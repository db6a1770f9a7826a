/* term_layout: text that fits a terminal -- its width, names cut in the
 * middle, long lines wrapped -- for the tables and headlines on stdout.
 *
 * The width: COLUMNS when it is a positive number (what shells export and
 * what a user sets for one command), else the terminal's own width when the
 * stream is a terminal, else TERM_WIDTH_DEFAULT: a log (a pipe, a file, CI)
 * gets every column of a typical table and its notes wrapped into lines a log
 * viewer shows whole. */
#ifndef KR_TERM_LAYOUT_H
#define KR_TERM_LAYOUT_H

#include <stddef.h>
#include <stdio.h>

#define TERM_WIDTH_DEFAULT 160
/* Narrower than this, nothing is cut further: names keep this much. */
#define TERM_WIDTH_MIN 40

/* The width lines written to fp should keep to (see above). */
int term_width(FILE *fp);

/* s cut in the middle to at most width characters ("gdn_out...M17_nanhead"),
 * into out (cap > 0); s itself when it fits. */
void term_middle(const char *s, int width, char *out, size_t cap);

/* Writes first then text, wrapped at spaces so that no line is longer than
 * width (a word longer than a line is cut), the lines after the first
 * indented by indent spaces; ends with a newline.  width <= 0: one line. */
void term_wrap(FILE *fp, const char *first, const char *text, int indent, int width);

/* A shell command wrapped the same way, at spaces outside single quotes,
 * each line but the last ending in " \\" so that it pastes as one command. */
void term_wrap_shell(FILE *fp, const char *first, const char *cmd, int indent, int width);

/* Every line of text wrapped at width, the continuation lines indented four
 * more than the line's own leading spaces; a line whose text starts with
 * "rerun: " or "reduce: " is a shell command (term_wrap_shell). */
void term_wrap_lines(FILE *fp, const char *text, int width);
/* The same with the continuation lines indented hang spaces (a table's last
 * column, a "key: value" list's values); hang < 0: as term_wrap_lines. */
void term_wrap_lines_hang(FILE *fp, const char *text, int width, int hang);

#endif
