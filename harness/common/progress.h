/* A progress line on stderr for long runs: "[label] 12/40 (30%), 8 s elapsed,
 * ETA 19 s".  On a terminal it is redrawn in place (carriage return), at
 * most five times a second and always for the last item.  Redirected to a
 * file or a pipe (ctest, a CI log) it is one whole line every
 * KREPLAY_PROGRESS_SECONDS seconds (default 10; 0: none), and a last line
 * at the end only when an earlier one was written: a run shorter than the
 * interval leaves the log as it was, a long one shows it is alive.
 *
 *   progress_t p;
 *   progress_start(&p, "kreplay gate", n_cases);
 *   for (...) { ...; progress_update(&p, ++done); }
 *   progress_finish(&p);     // ends the line (only if one was drawn)
 *
 * With KREPLAY_PROGRESS_LOG=FILE every update (drawn or not) also appends
 * "LABEL DONE/TOTAL SECONDS" to FILE, SECONDS on the monotonic clock: a
 * benchmark reads each item's time from it (scripts/gpu_check.sh). */
#ifndef KR_PROGRESS_H
#define KR_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

typedef struct {
    FILE *fp;               /* stderr */
    int enabled;            /* stderr is a terminal (or progress_start_on forced it) */
    double log_every;       /* not a terminal: seconds between whole lines (0: silent) */
    char label[64];
    int64_t total, done;
    double t0;              /* monotonic seconds at start */
    double last_draw;       /* when the line was last drawn, -1 never */
    int drawn;              /* a line is on screen and not yet ended */
    int last_len;           /* its length, to blank a longer previous line */
    char detail[80];        /* what is running now (progress_step), shown after the counts */
} progress_t;

/* Starts a progress over total items, enabled when stderr is a terminal. */
void progress_start(progress_t *p, const char *label, int64_t total);
/* The same on any stream, enabled as told (tests, or a caller's own rule). */
void progress_start_on(progress_t *p, FILE *fp, int enabled, const char *label, int64_t total);
/* Not a terminal: a whole line every `seconds` on fp (0: silent). */
void progress_start_log(progress_t *p, FILE *fp, double seconds, const char *label, int64_t total);
/* KREPLAY_PROGRESS_SECONDS, else 10: the log mode's interval. */
double progress_log_seconds(void);
/* done items of total are finished; redraws when due (always at done == total). */
void progress_update(progress_t *p, int64_t done);
/* Names the step now running inside the current item (a kernel of a long
 * case) and redraws when due, so a single long item still shows life. */
void progress_step(progress_t *p, const char *detail);
/* Ends the line with a newline if one was drawn. */
void progress_finish(progress_t *p);

/* Appends "WHAT SECONDS" (the monotonic clock) to $KREPLAY_PROGRESS_LOG, if set. */
void progress_log(const char *what);

/* "1 h 02 min", "3 min 05 s", "42 s" into buf. */
void progress_format_seconds(double s, char *buf, int cap);

#endif
