#include "plot_util.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"
#include "kr_string.h"
#include "row_kernel.h"
#include "verdict.h"

const char *const COLORS[N_COLORS] = {"#4e79a7", "#f28e2b", "#e15759", "#59a14f", "#b07aa1", "#76b7b2",
                                     "#edc948", "#9c755f", "#ff9da7", "#1f77b4", "#8c564b", "#7f7f7f"};
const int POINT_TYPES[N_POINTS] = {7, 5, 9, 11, 13, 4, 6, 8, 10, 12, 1, 2, 3};

int strset_find(const strset_t *s, const char *x)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], x))
            return i;
    return -1;
}

int strset_add(strset_t *s, const char *x)
{
    if (strset_find(s, x) >= 0)
        return 0;
    char *d = array_append_strdup(&s->v, &s->n, &s->cap, 16, x);
    if (!d)
        return -1;
    /* Into its place from the end: the set stays sorted. */
    int i = s->n - 1;
    while (i > 0 && strcmp(s->v[i - 1], x) > 0) {
        s->v[i] = s->v[i - 1];
        i--;
    }
    s->v[i] = d;
    return 0;
}

void strset_free(strset_t *s)
{
    for (int i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Text safe inside a double-quoted gnuplot string (noenhanced terminals):
 * quotes, backslashes and anything not printable ASCII become '_'. */
void gp_text(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; s && *s && n + 1 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        out[n++] = (c < 32 || c > 126 || c == '"' || c == '\\' || c == '@' || c == '`') ? '_' : (char)c;
    }
    if (cap)
        out[n] = '\0';
}

/* A file-name stem: [A-Za-z0-9._-], others '_'. */
void stem_text(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; s && *s && n + 1 < cap; s++) {
        char c = *s;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                 c == '-' || c == '_';
        out[n++] = ok ? c : '_';
    }
    if (cap)
        out[n] = '\0';
}

int is_gemm_row(const result_t *r)
{
    return !row_kernel_is_quantizer(r->kernel);
}

int plots_is_error_row(const result_t *r, const char *reference)
{
    if (strncmp(r->reference, "R_", 2) != 0)
        return 0;
    if (reference && strcmp(r->reference, reference) != 0)
        return 0;
    /* A poisoned input's rel_fro is over the finite part only: no error of the kernel's. */
    if (r->verdict == VERDICT_UNSUPPORTED || r->verdict == VERDICT_ERROR || r->verdict == VERDICT_POISONED_INPUT)
        return 0;
    if (!is_gemm_row(r))
        return 0;
    double v = r->metrics.rel_fro;
    return isfinite(v) && v > 0;
}

/* Smallest M of each band name over all rows: bands sort by it. */
int64_t band_order(const result_list_t *rows, const char *band)
{
    int64_t best = INT64_MAX;
    for (int64_t i = 0; i < rows->count; i++)
        if (!strcmp(rows->rows[i].band, band) && rows->rows[i].M < best)
            best = rows->rows[i].M;
    return best;
}

/* The production bands' M ranges; custom band names get theirs from the rows. */
int band_range(const result_list_t *rows, const char *band, double *lo, double *hi)
{
    static const struct { const char *name; double lo, hi; } std[] = {
        {"decode", 0.5, 64.5}, {"mid", 64.5, 255.5}, {"prefill", 255.5, 2047.5}, {"tiled", 2047.5, 1e12}};
    for (size_t i = 0; i < sizeof std / sizeof std[0]; i++)
        if (!strcmp(band, std[i].name)) {
            *lo = std[i].lo;
            *hi = std[i].hi;
            return 0;
        }
    double mn = INFINITY, mx = 0;
    for (int64_t i = 0; i < rows->count; i++)
        if (!strcmp(rows->rows[i].band, band)) {
            mn = fmin(mn, (double)rows->rows[i].M);
            mx = fmax(mx, (double)rows->rows[i].M);
        }
    if (!(mx > 0))
        return -1;
    *lo = mn / 1.15;
    *hi = mx * 1.15;
    return 0;
}

const char *const BAND_FILL[N_BAND_FILL] = {"#4e79a7", "#59a14f", "#f28e2b", "#b07aa1", "#e15759", "#76b7b2"};

plot_t *plot_add(plot_list_t *pl, const char *kind, const char *name, int w, int h)
{
    plot_t *v = array_reserve_one(pl->items, pl->count, &pl->cap, sizeof *v, 16);
    if (!v)
        return NULL;
    pl->items = v;
    plot_t *p = &pl->items[pl->count];
    memset(p, 0, sizeof *p);
    kr_strlcpy(p->kind, kind, sizeof p->kind);
    char stem[96];
    stem_text(name, stem, sizeof stem);
    /* Unique stems: a second plot of the same name gets a suffix. */
    kr_strlcpy(p->name, stem, sizeof p->name);
    for (int k = 2;; k++) {
        int clash = 0;
        for (int i = 0; i < pl->count; i++)
            clash |= !strcmp(pl->items[i].name, p->name);
        if (!clash)
            break;
        snprintf(p->name, sizeof p->name, "%.80s-%d", stem, k);
    }
    p->width = w;
    p->height = h;
    return p; /* not counted until its script is set */
}

int script_open(script_t *s)
{
    s->buf = NULL;
    s->len = 0;
    s->fp = open_memstream(&s->buf, &s->len);
    return s->fp ? 0 : -1;
}

/* Closes the stream into p->script and counts the plot. */
FILE *plot_begin(plot_list_t *pl, plot_t **p, script_t *s, const char *kind, const char *name, int w, int h,
                 const char *title, ...)
{
    *p = plot_add(pl, kind, name, w, h);
    if (!*p || script_open(s))
        return NULL;
    va_list ap;
    va_start(ap, title);
    vsnprintf((*p)->title, sizeof (*p)->title, title, ap);
    va_end(ap);
    gp_common(s->fp);
    return s->fp;
}

int script_finish(plot_list_t *pl, plot_t *p, script_t *s)
{
    if (fclose(s->fp) != 0 || !s->buf) {
        free(s->buf);
        return -1;
    }
    p->script = s->buf;
    pl->count++;
    return 0;
}

void gp_common(FILE *fp)
{
    fputs("set grid lc rgb \"#dddddd\"\n"
          "set border lc rgb \"#444444\"\n"
          "set key font \",9\" noautotitle\n",
          fp);
}

void gp_num(FILE *fp, double v)
{
    if (isfinite(v))
        fprintf(fp, "%.9g", v);
    else
        fputs("NaN", fp);
}

/* Colour / point of a kernel, stable over all plots of a report. */
void kernel_style(const strset_t *kernels, const char *k, char *out, size_t cap)
{
    int i = strset_find(kernels, k);
    if (i < 0)
        i = 0;
    snprintf(out, cap, "lc rgb \"%s\" pt %d", COLORS[i % N_COLORS], POINT_TYPES[(i / N_COLORS + i) % N_POINTS]);
}

int plot_sets_collect(const result_list_t *rows, strset_t *kernels, strset_t *refs, strset_t *bands)
{
    for (int64_t i = 0; i < rows->count; i++) {
        const result_t *r = &rows->rows[i];
        if (!is_gemm_row(r) || !strcmp(r->reference, "-") || !strcmp(r->reference, "x"))
            continue;
        if (strset_add(kernels, r->kernel) || strset_add(refs, r->reference))
            return -1;
        if (bands && r->band[0] && strset_add(bands, r->band))
            return -1;
    }
    if (bands) /* bands in M order */
        for (int i = 1; i < bands->n; i++)
            for (int j = i; j > 0 && band_order(rows, bands->v[j - 1]) > band_order(rows, bands->v[j]); j--) {
                char *t = bands->v[j];
                bands->v[j] = bands->v[j - 1];
                bands->v[j - 1] = t;
            }
    return 0;
}
