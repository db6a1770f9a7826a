#include "progress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kr_string.h"

static double mono_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void progress_start_on(progress_t *p, FILE *fp, int enabled, const char *label, int64_t total)
{
    memset(p, 0, sizeof *p);
    p->fp = fp;
    p->enabled = enabled && fp != NULL;
    kr_strlcpy(p->label, label ? label : "", sizeof p->label);
    p->total = total > 0 ? total : 0;
    p->t0 = mono_seconds();
    p->last_draw = -1;
}

void progress_start_log(progress_t *p, FILE *fp, double seconds, const char *label, int64_t total)
{
    progress_start_on(p, fp, 0, label, total);
    p->log_every = fp && seconds > 0 && isfinite(seconds) ? seconds : 0;
    /* The first line is due one interval after the start, not at once. */
    p->last_draw = p->t0;
}

double progress_log_seconds(void)
{
    const char *env = getenv("KREPLAY_PROGRESS_SECONDS");
    if (!env || !*env)
        return 10.0;
    char *end;
    double s = strtod(env, &end);
    return *end || !isfinite(s) || s < 0 ? 10.0 : s;
}

void progress_start(progress_t *p, const char *label, int64_t total)
{
    if (isatty(STDERR_FILENO))
        progress_start_on(p, stderr, 1, label, total);
    else
        progress_start_log(p, stderr, progress_log_seconds(), label, total);
}

void progress_format_seconds(double s, char *buf, int cap)
{
    if (!isfinite(s) || s < 0)
        s = 0;
    long long t = (long long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, (size_t)cap, "%lld h %02lld min", t / 3600, (t / 60) % 60);
    else if (t >= 60)
        snprintf(buf, (size_t)cap, "%lld min %02lld s", t / 60, t % 60);
    else
        snprintf(buf, (size_t)cap, "%lld s", t);
}

void progress_log(const char *what)
{
    const char *path = getenv("KREPLAY_PROGRESS_LOG");
    FILE *fp = path && *path ? fopen(path, "a") : NULL;
    if (!fp)
        return;
    fprintf(fp, "%s %.6f\n", what, mono_seconds());
    fclose(fp);
}

/* "[label] 3/10 (30%), 8 s elapsed, ETA 19 s: detail" into line; its length. */
static int format_line(const progress_t *p, int64_t done, int last, double elapsed, char *line, int cap)
{
    char el[32], eta[32];
    progress_format_seconds(elapsed, el, sizeof el);
    int n;
    if (p->total > 0) {
        double pct = 100.0 * (double)done / (double)p->total;
        if (done > 0 && !last) {
            progress_format_seconds(elapsed / (double)done * (double)(p->total - done), eta, sizeof eta);
            n = snprintf(line, (size_t)cap, "[%s] %lld/%lld (%.0f%%), %s elapsed, ETA %s", p->label,
                         (long long)done, (long long)p->total, pct, el, eta);
        } else {
            n = snprintf(line, (size_t)cap, "[%s] %lld/%lld (%.0f%%), %s elapsed%s", p->label, (long long)done,
                         (long long)p->total, pct, el, last ? "" : ", ETA unknown");
        }
    } else {
        n = snprintf(line, (size_t)cap, "[%s] %lld done, %s elapsed", p->label, (long long)done, el);
    }
    if (n >= cap)
        n = cap - 1;
    if (p->detail[0] && !last && n < cap - 1) {
        int m = snprintf(line + n, (size_t)cap - (size_t)n, ": %s", p->detail);
        n = m > 0 && n + m < cap ? n + m : cap - 1;
    }
    return n;
}

/* Not a terminal: a whole line when the interval has passed, and the last
 * one only after an earlier line (a short run writes nothing). */
static void log_update(progress_t *p, int64_t done, int last, double now)
{
    if (last ? !p->drawn : now - p->last_draw < p->log_every)
        return;
    p->last_draw = now;
    char line[256];
    format_line(p, done, last, now - p->t0, line, (int)sizeof line);
    fprintf(p->fp, "%s\n", line);
    fflush(p->fp);
    /* drawn: a line was written, so the end gets one too */
    p->drawn = !last;
}

void progress_update(progress_t *p, int64_t done)
{
    char step[128];
    snprintf(step, sizeof step, "%s %lld/%lld", p->label, (long long)done, (long long)p->total);
    progress_log(step);
    if (!p->enabled && p->log_every <= 0)
        return;
    p->done = done;
    double now = mono_seconds();
    int last = p->total > 0 && done >= p->total;
    if (!p->enabled) {
        log_update(p, done, last, now);
        return;
    }
    if (!last && p->last_draw >= 0 && now - p->last_draw < 0.2)
        return;
    p->last_draw = now;
    char line[256];
    int n = format_line(p, done, last, now - p->t0, line, (int)sizeof line);
    fprintf(p->fp, "\r%s", line);
    for (int i = n; i < p->last_len; i++)
        fputc(' ', p->fp);
    p->last_len = n;
    p->drawn = 1;
    fflush(p->fp);
}

void progress_step(progress_t *p, const char *detail)
{
    if (!p->enabled && p->log_every <= 0)
        return;
    kr_strlcpy(p->detail, detail ? detail : "", sizeof p->detail);
    progress_update(p, p->done);
}

void progress_finish(progress_t *p)
{
    if (!p->enabled && p->log_every > 0 && p->drawn) {
        /* a run that stopped short of its total still ends its log */
        log_update(p, p->done, 1, mono_seconds());
        return;
    }
    if (!p->enabled || !p->drawn)
        return;
    fputc('\n', p->fp);
    fflush(p->fp);
    p->drawn = 0;
    p->last_len = 0;
}
