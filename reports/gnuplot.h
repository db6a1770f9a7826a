/* gnuplot through a pipe: a script (data inline, in `$name << EOD` blocks)
 * is written to gnuplot's stdin, and the image gnuplot writes on its stdout
 * comes back in memory.  gnuplot is started with posix_spawn and an argument
 * vector, never through a shell, and no path ever appears in a script
 * ("set output" with no name is stdout): text from rows reaches a script
 * only through plots.c's gp_text, which leaves no quote, backslash,
 * backquote, '@' or control character.  gnuplot's stdout and stderr go to
 * anonymous files (tmpfile(): unlinked from the start), so no script, data
 * or image file is ever left on disk; the caller decides where images go.
 *
 * gnuplot is looked up on PATH as execvp would (an unset PATH means
 * "/usr/local/bin:/usr/bin:/bin"); a PATH without it makes
 * gnuplot_available() 0, and the reports are written without plots. */
#ifndef KR_GNUPLOT_H
#define KR_GNUPLOT_H

#include <stddef.h>

#include "kr_error.h"

typedef enum {
    GNUPLOT_SVG = 0,   /* "svg": text, inlined in the HTML page */
    GNUPLOT_PNG,       /* "pngcairo": for the Markdown report */
} gnuplot_term_t;

/* The first executable "gnuplot" on PATH, copied into buf.  Returns 1 when
 * found, 0 otherwise (buf then ""). */
int gnuplot_find(char *buf, size_t cap);
/* 1 when gnuplot is on PATH. */
int gnuplot_available(void);

/* Runs gnuplot once: "set terminal <term> size W,H noenhanced ...",
 * "set output" (stdout), then script.  On success *out holds the image
 * (malloc'd, NUL-terminated after *out_len bytes; the caller frees it).
 * Returns -1 with err set when gnuplot is not on PATH, cannot be started,
 * exits non-zero (err then carries its first error lines) or writes no
 * image.  SIGPIPE is ignored while the script is written. */
int gnuplot_render(const char *script, gnuplot_term_t term, int width, int height, char **out,
                   size_t *out_len, kr_error_t *err);

/* One render of gnuplot_render_all: the inputs, then its outcome (rc 0 and
 * out/out_len as gnuplot_render's, or rc -1 and err). */
typedef struct {
    const char *script;
    gnuplot_term_t term;
    int width, height;
    char *out;
    size_t out_len;
    int rc;
    kr_error_t err;
} gnuplot_job_t;

/* gnuplot_render of every job, up to `parallel` gnuplot processes at once
 * (each is one thread of work; a report's plots otherwise left every core
 * but one idle while each gnuplot started in turn). */
void gnuplot_render_all(gnuplot_job_t *jobs, int n, int parallel);

/* gnuplot's version line ("gnuplot 5.4 patchlevel 4"), or "" when absent. */
void gnuplot_version(char *buf, size_t cap);

#endif
