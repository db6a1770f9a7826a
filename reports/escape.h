/* escape: text from rows (case names and paths, kernel names from plugins,
 * notes, diagnoses, host names) made inert for each output format, so that
 * no name can forge a table row, a column, a tag, an attribute or a formula.
 *
 *   Markdown  esc_markdown: a table cell or inline text.  '|' '\' '`' '*'
 *             '[' ']' '~' are backslash-escaped, '<' '>' '&' become entities,
 *             newlines, tabs and other control characters a space; bytes
 *             that are not UTF-8 become U+FFFD.
 *             esc_markdown_code: a whole code span (delimiters included),
 *             fenced with one more backtick than the longest run inside.
 *   HTML      esc_html: text or a double- or single-quoted attribute value:
 *             & < > " ' as references; control characters other than
 *             newline and tab, and bytes that are not UTF-8, as U+FFFD.
 *   CSV       esc_csv: one RFC 4180 field.  Quoted when asked to, or when it
 *             holds ',' '"' CR or LF, with '"' doubled; a field that a
 *             spreadsheet would run as a formula (two or more characters,
 *             a leading '=' '+' '-' '@', tab or CR, and not a plain number)
 *             gets a leading '\''.
 *   XML 1.0   esc_xml: an attribute value (attr = 1) or element text: & < >
 *             " ' as references, newline, tab and CR as character references
 *             in attributes (which attribute normalisation would otherwise
 *             turn into spaces); the characters XML 1.0 forbids (C0 controls
 *             other than those three, U+FFFE, U+FFFF, surrogates) and bytes
 *             that are not UTF-8 become '?'.
 *   terminal  esc_terminal: control characters (escape sequences included,
 *             C1 controls too) and bytes that are not UTF-8 become '?', into
 *             a buffer, so fixed-width columns still work (kr_string.h's
 *             kr_str_printable, which every error message also goes through).
 * A NULL string writes nothing (an empty field). */
#ifndef KR_ESCAPE_H
#define KR_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

void esc_markdown(FILE *fp, const char *s);
void esc_markdown_code(FILE *fp, const char *s);
void esc_html(FILE *fp, const char *s);
void esc_csv(FILE *fp, const char *s, int always_quote);
void esc_xml(FILE *fp, const char *s, int attr);
/* One of the escapers above that writes to a stream. */
typedef void (*esc_fn_t)(FILE *fp, const char *s);

/* pre, s through esc, post: a name between the fixed words of a page or a
 * Markdown file (report_html.c, report_bundle.c).  esc_put_nonempty writes
 * nothing at all when s is empty: the optional pieces (a diagnosis, a suite
 * name, a shard). */
void esc_put(FILE *fp, esc_fn_t esc, const char *pre, const char *s, const char *post);
void esc_put_nonempty(FILE *fp, esc_fn_t esc, const char *pre, const char *s, const char *post);

/* NUL-terminated in out (cap > 0); truncated at a character boundary. */
void esc_terminal(const char *s, char *out, size_t cap);

/* Length (1-4) of the valid UTF-8 sequence at p, or 0 when there is none
 * (overlong forms, surrogates and code points past U+10FFFF are not valid). */
int esc_utf8_len(const unsigned char *p);

#endif
