/* An index map learned from the output (learned_map.h): when every wrong
 * output column (or row) holds, within rounding, what another column (row)
 * of the reference holds, the map n -> f(n) is read off the data instead of
 * being drawn from the grammar's table, then checked bit for bit by
 * re-evaluating the kernel as specified at (m, f(n)).  A tail that reads the
 * last row, a store one column off, two rows swapped, a batch stride: any
 * map of whole rows or columns, whatever its form. */
#include "learned_map.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LM_ROWS 8               /* rows (columns) of the reference a column's (row's) key is taken over */
#define LM_NEAR 6               /* keys either side looked at */
#define LM_CHECK_MAX 8192       /* outputs re-evaluated to check the map */

typedef struct {
    double key;
    int64_t idx;
} lm_key_t;

static int key_cmp(const void *a, const void *b)
{
    const double x = ((const lm_key_t *)a)->key, y = ((const lm_key_t *)b)->key;
    return (x > y) - (x < y);
}

/* The view of the output as lines along one axis: columns (by_rows 0) or
 * rows (1).  at(line, j) is element j of the line, j over the other axis. */
typedef struct {
    const float *out, *ref;
    int64_t M, N;
    int by_rows;
    int64_t lines, span;        /* how many lines, how long each */
    int64_t probe[LM_ROWS];     /* the positions along a line the keys use */
    int n_probe;
} lm_view_t;

static float at(const lm_view_t *v, const float *a, int64_t line, int64_t j)
{
    return v->by_rows ? a[line * v->N + j] : a[j * v->N + line];
}

static int close_to(float o, float r)
{
    /* a bf16 store of the same value: half a bf16 ulp, and a little more */
    return isfinite(o) && isfinite(r) && fabsf(o - r) <= 0x1p-7f * fabsf(r) + 1e-30f;
}

/* Whether line a of the output holds line b of the reference on the probes. */
static int line_matches(const lm_view_t *v, int64_t a, int64_t b)
{
    for (int i = 0; i < v->n_probe; i++)
        if (!close_to(at(v, v->out, a, v->probe[i]), at(v, v->ref, b, v->probe[i])))
            return 0;
    return 1;
}

static double key_of(const lm_view_t *v, const float *a, int64_t line)
{
    double k = 0;
    for (int i = 0; i < v->n_probe; i++)
        k += (double)at(v, a, line, v->probe[i]) * (1.0 + 0.37 * i);
    return k;
}

/* Probes: positions along a line where the reference is finite and not all
 * zero over the lines (a zero everywhere tells no line from another). */
static int choose_probes(lm_view_t *v, const unsigned char *skip)
{
    v->n_probe = 0;
    const int64_t step = v->span / LM_ROWS > 0 ? v->span / LM_ROWS : 1;
    for (int64_t j0 = 0; j0 < step && v->n_probe < LM_ROWS; j0++)
        for (int64_t j = j0; j < v->span && v->n_probe < LM_ROWS; j += step) {
            if (skip && skip[j])
                continue;
            int finite = 1, nonzero = 0, dup = 0;
            for (int64_t l = 0; l < v->lines && finite; l += 1 + v->lines / 64) {
                const float r = at(v, v->ref, l, j);
                finite = isfinite(r);
                nonzero |= r != 0.0f;
            }
            for (int i = 0; i < v->n_probe; i++)
                dup |= v->probe[i] == j;
            if (finite && nonzero && !dup)
                v->probe[v->n_probe++] = j;
        }
    return v->n_probe >= 2;
}

/* f[line]: the reference line each output line holds (itself when right);
 * returns how many lines are mapped elsewhere, or -1 when a wrong line
 * matches no reference line (no map of lines explains the output). */
static int64_t learn(const lm_view_t *v, int64_t *f, lm_key_t *keys)
{
    for (int64_t l = 0; l < v->lines; l++)
        keys[l] = (lm_key_t){key_of(v, v->ref, l), l};
    qsort(keys, (size_t)v->lines, sizeof *keys, key_cmp);
    int64_t moved = 0;
    for (int64_t l = 0; l < v->lines; l++) {
        f[l] = l;
        if (line_matches(v, l, l))
            continue;
        const double k = key_of(v, v->out, l);
        int64_t lo = 0, hi = v->lines;
        while (lo < hi) {
            const int64_t mid = (lo + hi) / 2;
            if (keys[mid].key < k)
                lo = mid + 1;
            else
                hi = mid;
        }
        int64_t found = -1;
        for (int64_t i = lo - LM_NEAR; i < lo + LM_NEAR && found < 0; i++)
            if (i >= 0 && i < v->lines && keys[i].idx != l && line_matches(v, l, keys[i].idx))
                found = keys[i].idx;
        if (found < 0)
            return -1;
        f[l] = found;
        moved++;
    }
    return moved;
}

/* "32-46" style ranges of the moved lines, and what they read. */
static void describe(const int64_t *f, int64_t lines, const char *word, char *where, int wcap, char *reads, int rcap)
{
    int wl = 0, rl = 0, pieces = 0;
    int64_t konst = -2, shift = INT64_MIN;
    where[0] = reads[0] = '\0';
    for (int64_t l = 0; l < lines; l++) {
        if (f[l] == l)
            continue;
        int64_t e = l;
        while (e + 1 < lines && f[e + 1] != e + 1)
            e++;
        if (pieces++ < 4 && wl < wcap)
            wl += snprintf(where + wl, (size_t)(wcap - wl), e > l ? "%s%lld-%lld" : "%s%lld", wl ? ", " : "",
                           (long long)l, (long long)e);
        l = e;
    }
    for (int64_t l = 0; l < lines; l++)     /* what every moved line reads, not each range's first */
        if (f[l] != l) {
            konst = konst == -2 ? f[l] : konst == f[l] ? konst : -1;
            shift = shift == INT64_MIN ? f[l] - l : shift == f[l] - l ? shift : INT64_MIN + 1;
        }
    if (pieces > 4 && wl < wcap)
        snprintf(where + wl, (size_t)(wcap - wl), ", ... (%d ranges)", pieces);
    if (konst >= 0)
        snprintf(reads, (size_t)rcap, "each holds what %s %lld should (all read index %lld)", word,
                 (long long)konst, (long long)konst);
    else if (shift > INT64_MIN + 1)
        snprintf(reads, (size_t)rcap, "each holds what the %s %lld %s should (index i%+lld read)", word,
                 (long long)(shift < 0 ? -shift : shift), shift < 0 ? "before it" : "after it", (long long)shift);
    else
        for (int64_t l = 0, shown = 0; l < lines && rl < rcap; l++)
            if (f[l] != l && shown++ < 4)
                rl += snprintf(reads + rl, (size_t)(rcap - rl), "%s%lld holds %lld's", rl ? ", " : "", (long long)l,
                               (long long)f[l]);
}

/* The kernel as specified at (m, f(n)) (or (f(m), n)) against the output at
 * (m, n), on the moved lines (and a few others) across the probes and more:
 * how many sampled outputs, how many bit-identical. */
static int check(const lm_view_t *v, const g_ops_t *g, const int64_t *f, int64_t *count, int64_t *same)
{
    int64_t *pm = malloc(LM_CHECK_MAX * sizeof(int64_t)), *pn = malloc(LM_CHECK_MAX * sizeof(int64_t));
    float *alt = malloc(LM_CHECK_MAX * sizeof(float));
    int64_t c = 0;
    const int64_t jstep = v->span > 32 ? v->span / 32 : 1;
    for (int pass = 0; pass < 2 && pm && pn && alt; pass++)
        for (int64_t l = 0; l < v->lines && c < LM_CHECK_MAX - 64; l++) {
            if ((f[l] != l) != (pass == 0) || (pass == 1 && l % (1 + v->lines / 16)))
                continue;
            for (int64_t j = l % jstep; j < v->span && c < LM_CHECK_MAX; j += jstep) {
                pm[c] = v->by_rows ? f[l] : j;
                pn[c] = v->by_rows ? j : f[l];
                c++;
            }
        }
    const g_hyp_t none = {0, {0, 0}};
    int rc = pm && pn && alt ? g_eval(g, &none, pm, pn, c, alt) : -1;
    *count = c, *same = 0;
    /* positions are re-derived in the same order they were made */
    int64_t i = 0;
    for (int pass = 0; pass < 2 && rc == 0; pass++)
        for (int64_t l = 0; l < v->lines && i < c; l++) {
            if ((f[l] != l) != (pass == 0) || (pass == 1 && l % (1 + v->lines / 16)))
                continue;
            for (int64_t j = l % jstep; j < v->span && i < c; j += jstep, i++) {
                const float o = at(v, v->out, l, j);
                *same += o == alt[i] || (isnan(o) && isnan(alt[i]));
            }
        }
    free(pm), free(pn), free(alt);
    return rc;
}

/* Whether every moved line holds a reference line that is zero throughout
 * (what it holds is then zero, whichever zero line is named). */
static int reads_zero_lines(const lm_view_t *v, const int64_t *f)
{
    int moved = 0;
    for (int64_t l = 0; l < v->lines; l++) {
        if (f[l] == l)
            continue;
        moved = 1;
        for (int64_t j = 0; j < v->span; j++)
            if (at(v, v->ref, f[l], j) != 0.0f)
                return 0;
    }
    return moved;
}

static int try_axis(dctx_t *x, const g_ops_t *g, int by_rows)
{
    lm_view_t v = {x->d->out, x->d->ref, x->M, x->N, by_rows, by_rows ? x->M : x->N, by_rows ? x->N : x->M,
                   {0}, 0};
    if (v.lines < 2 || !choose_probes(&v, by_rows ? NULL : x->poisoned_rows))
        return 0;
    int64_t *f = malloc((size_t)v.lines * sizeof(int64_t));
    lm_key_t *keys = malloc((size_t)v.lines * sizeof(lm_key_t));
    if (!f || !keys) {
        free(f), free(keys);
        return -1;
    }
    int result = 0;
    int64_t moved = learn(&v, f, keys), count = 0, same = 0;
    if (by_rows && x->poisoned_rows)
        for (int64_t l = 0; l < v.lines && moved > 0; l++)
            moved = x->poisoned_rows[l] || x->poisoned_rows[f[l]] ? (f[l] != l ? -1 : moved) : moved;
    if (moved > 0 && check(&v, g, f, &count, &same) == 0 && count > 0 && same == count) {
        char where[160], reads[200];
        describe(f, v.lines, by_rows ? "row" : "column", where, sizeof where, reads, sizeof reads);
        if (reads_zero_lines(&v, f)) {   /* a line of zeros read: the output there is zero, say so */
            const size_t len = strlen(reads);
            snprintf(reads + len, sizeof reads - len, ", all zero");
        }
        const char *line = by_rows ? "row" : "column";
        x->r->checked = 1;
        result = diag_matched(x, DIAG_GRAMMAR, 0.0,
                              "output %ss %s hold other %ss' results: %s, as %s "
                              "(a map of %ss learned from the output; checked: bit-identical on all %lld "
                              "sampled outputs against the kernel as specified at the %s it reads)",
                              line, where, line, reads,
                              by_rows ? "if the activation row of that index were read (or its result stored here)"
                                      : "if the weight row of that index were read (or its result stored here)",
                              line, (long long)count, line);
    }
    free(f), free(keys);
    return result;
}

int g_learned_line_map(dctx_t *x, const g_ops_t *g)
{
    int rc = try_axis(x, g, 0);
    if (rc == 0)
        rc = try_axis(x, g, 1);
    return rc;
}
