/* Localisation: where the output is wrong.  Error maps over rows, columns
 * and the kernel's 16- and 64-wide tiles, each line or tile judged by its own
 * relative error (so one element that happens to land near the right value
 * does not clear a wrong row, and one wrong element does not condemn a good
 * one), then named by pattern: one run (a partial M or N tile, a whole
 * tile), parity, a stride (the first or last line of every tile), several
 * runs, a set of tiles, or every tile transposed.  A pattern is reported
 * only when everything outside it matches the reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diag_ctx.h"
#include "input_health.h"

/* Per-line badness: a non-finite mismatch, or rel over 4x the threshold.
 * by_column: lines are columns.  Poisoned rows count for nothing. */
static int line_badness(const dctx_t *x, int by_column, unsigned char *bad)
{
    const int64_t M = x->M, N = x->N, L = by_column ? N : M;
    double *num = calloc((size_t)L, sizeof(double)), *den = calloc((size_t)L, sizeof(double));
    if (!num || !den) {
        free(num);
        free(den);
        return kr_fail(x->err, "out of memory in diagnose");
    }
    memset(bad, 0, (size_t)L);
    for (int64_t m = 0; m < M; m++) {
        if (x->poisoned_rows && x->poisoned_rows[m])
            continue;
        for (int64_t n = 0; n < N; n++) {
            const int64_t l = by_column ? n : m;
            const float o = x->d->out[m * N + n], r = x->d->ref[m * N + n];
            if (isfinite(o) != isfinite(r)) {
                bad[l] = 1;
            } else if (isfinite(o)) {
                num[l] += ((double)o - r) * ((double)o - r);
                den[l] += (double)r * r;
            }
        }
    }
    const double t = 4 * x->thr;
    for (int64_t l = 0; l < L; l++) {
        if (bad[l])
            continue;
        /* A line whose reference and output are both all zero (padding rows)
         * says nothing either way: 2 = undetermined. */
        if (den[l] == 0 && num[l] == 0)
            bad[l] = 2;
        else
            bad[l] = den[l] > 0 ? num[l] > t * t * den[l] : num[l] > 0;
    }
    free(num);
    free(den);
    return 0;
}

/* Names the set of bad lines (L lines; `judged` lines may be NULL = all).
 * Returns 1 and fills what, or 0 when the set is empty or everything. */
static int name_pattern(const unsigned char *bad, const unsigned char *skip, int64_t L,
                        int64_t offset, const char *noun, const char *dim, char *what, int cap)
{
    int64_t judged = 0, count = 0, first = -1, last = -1;
    for (int64_t l = 0; l < L; l++) {
        if (skip && skip[l])
            continue;
        judged++;
        if (bad[l]) {
            count++;
            if (first < 0)
                first = l;
            last = l;
        }
    }
    if (count == 0 || count == judged)
        return 0;
    /* A stride s (2 = parity): exactly the judged lines l = first (mod s). */
    for (int64_t s = 2; s <= 64 && s <= L / 2; s++) {
        int fits = 1;
        for (int64_t l = 0; l < L && fits; l++)
            if (!(skip && skip[l]))
                fits = (bad[l] != 0) == (l % s == first % s);
        if (!fits || count < 2)
            continue;
        if (s == 2) {
            snprintf(what, (size_t)cap, "the %s %ss", first % 2 ? "odd" : "even", noun);
        } else {
            char tile[64] = "";
            if ((s == 16 || s == 32 || s == 64) && first % s == s - 1)
                snprintf(tile, sizeof tile, ": the last %s of every %lld-%s tile", noun,
                         (long long)s, noun);
            else if ((s == 16 || s == 32 || s == 64) && first % s == 0)
                snprintf(tile, sizeof tile, ": the first %s of every %lld-%s tile", noun,
                         (long long)s, noun);
            snprintf(what, (size_t)cap, "every %lld-th %s from %lld (stride %lld%s)",
                     (long long)s, noun, (long long)(first + offset), (long long)s, tile);
        }
        return 1;
    }
    if (last - first + 1 == count) {
        char kind[96] = "";
        for (int64_t t = 16; t <= 64; t *= 4) {
            if (last == L - 1 && L % t != 0 && first >= L / t * t && first % 16 == 0) {
                snprintf(kind, sizeof kind, " (the partial %s tile: %s=%lld is not a multiple of %lld)",
                         dim, dim, (long long)L, (long long)t);
                break;
            }
        }
        if (!kind[0] && last == L - 1 && first % 16 == 0 && L % 16 == 0 &&
            (first + 64 >= L || first % 64 == 0))
            snprintf(kind, sizeof kind, " (the last %s tile)", dim);
        else if (!kind[0] && first % 16 == 0 && (last + 1) % 16 == 0)
            snprintf(kind, sizeof kind, " (a %lld-%s block)", (long long)count, noun);
        if (first == last)
            snprintf(what, (size_t)cap, "%s %lld%s", noun, (long long)(first + offset), kind);
        else
            snprintf(what, (size_t)cap, "%ss %lld-%lld%s", noun, (long long)(first + offset),
                     (long long)(last + offset), kind);
        return 1;
    }
    char ranges[160];
    index_ranges_format_from(bad, L, offset, 6, ranges, sizeof ranges);
    snprintf(what, (size_t)cap, "%ss %s", noun, ranges);
    return 1;
}

/* What the output holds on the bad lines: beside diag_region_content's
 * words, "the previous line's result" (an off-by-one index). */
static void lines_content(const dctx_t *x, int by_column, const unsigned char *bad, char *buf,
                          int cap)
{
    const int64_t M = x->M, N = x->N, L = by_column ? N : M;
    int64_t lo = -1, hi = -1;
    double num = 0, den = 0;
    int64_t nan = 0, zero = 0, total = 0, poison = 0;
    double neg = 0, prev_num = 0, prev_den = 0;
    for (int64_t l = 0; l < L; l++) {
        if (!bad[l])
            continue;
        if (lo < 0)
            lo = l;
        hi = l;
        const int64_t count = by_column ? M : N;
        for (int64_t i = 0; i < count; i++) {
            const int64_t m = by_column ? i : l, n = by_column ? l : i;
            if (x->poisoned_rows && x->poisoned_rows[m])
                continue;
            const float o = x->d->out[m * N + n], r = x->d->ref[m * N + n];
            total++;
            nan += isnan(o);
            poison += diag_is_poison(o);
            zero += o == 0.0f;
            if (isfinite(o) && isfinite(r)) {
                num += ((double)o - r) * ((double)o - r);
                neg += ((double)o + r) * ((double)o + r);
                den += (double)r * r;
            }
            if (l > 0) {
                const int64_t pm = by_column ? m : m - 1, pn = by_column ? n - 1 : n;
                const float p = x->d->ref[pm * N + pn];
                if (isfinite(o) && isfinite(p)) {
                    prev_num += ((double)o - p) * ((double)o - p);
                    prev_den += (double)p * p;
                }
            }
        }
    }
    const double t2 = x->thr * x->thr;
    const char *noun = by_column ? "column" : "row";
    if (total && nan == total)
        snprintf(buf, (size_t)cap, "%s", poison == total ? "all NaN: the harness's poison 0x7FC1, never written"
                                                          : "all NaN");
    else if (total && zero == total)
        snprintf(buf, (size_t)cap, "all zero: never written, or masked to zero");
    else if (den > 0 && neg <= t2 * den)
        snprintf(buf, (size_t)cap, "negated: out = -%s there (rel %.3g)", diag_ref_name(x),
                 sqrt(neg / den));
    else if (prev_den > 0 && lo > 0 && prev_num <= t2 * prev_den)
        snprintf(buf, (size_t)cap, "each holds the previous %s's result (rel %.3g): an off-by-one "
                 "%s index", noun, sqrt(prev_num / prev_den), noun);
    else
        snprintf(buf, (size_t)cap, "rel %.3g there%s", den > 0 ? sqrt(num / den) : INFINITY,
                 nan ? ", some NaN" : "");
    (void)hi;
}

static int try_lines(dctx_t *x, int by_column)
{
    const int64_t L = by_column ? x->N : x->M;
    unsigned char *bad = malloc((size_t)L);
    if (!bad)
        return kr_fail(x->err, "out of memory in diagnose");
    const diag_hypothesis_t h = by_column ? DIAG_COLUMNS : DIAG_ROWS;
    diag_tried(x, diag_hypothesis_name(h));
    unsigned char *skip = malloc((size_t)L);
    if (!skip) {
        free(bad);
        return kr_fail(x->err, "out of memory in diagnose");
    }
    int result = line_badness(x, by_column, bad);
    for (int64_t l = 0; l < L; l++) {
        skip[l] = bad[l] == 2 || (!by_column && x->poisoned_rows && x->poisoned_rows[l]);
        bad[l] = bad[l] == 1;
    }
    char what[224];
    if (result == 0 &&
        name_pattern(bad, skip, L,
                     by_column ? 0 : x->d->row_offset, by_column ? "column" : "row",
                     by_column ? "N" : "M", what, sizeof what)) {
        cmp_t rest = by_column ? diag_compare(x->d->out, x->d->ref, x->M, x->N, 1.0f,
                                              x->poisoned_rows, bad)
                               : diag_compare(x->d->out, x->d->ref, x->M, x->N, 1.0f, bad, NULL);
        if (!by_column && x->poisoned_rows) {
            unsigned char *leave = malloc((size_t)L);
            if (!leave) {
                free(bad);
                free(skip);
                return kr_fail(x->err, "out of memory in diagnose");
            }
            for (int64_t m = 0; m < L; m++)
                leave[m] = bad[m] || x->poisoned_rows[m];
            rest = diag_compare(x->d->out, x->d->ref, x->M, x->N, 1.0f, leave, NULL);
            free(leave);
        }
        char content[160];
        lines_content(x, by_column, bad, content, sizeof content);
        const int telling = strncmp(content, "rel ", 4) != 0 || strstr(what, "stride") ||
                            strstr(what, "odd") || strstr(what, "even");
        if (diag_good(x, rest) && (telling || x->any_place)) {
            /* A place says where; only a content that reproduces the output
             * there (NaN, zero, negated, the previous line) says more. */
            result = diag_matched(x, h, rest.rel, "%s are wrong (%s); the other %ss match %s (rel %.3g)",
                                  what, content, by_column ? "column" : "row", diag_ref_name(x), rest.rel);
            x->r->checked = strncmp(content, "rel ", 4) != 0;
        }
    }
    free(bad);
    free(skip);
    return result;
}

/* alt = ref with every full T x T tile transposed in place. */
static void transpose_tiles(const dctx_t *x, int64_t T, float *alt)
{
    const int64_t M = x->M, N = x->N;
    memcpy(alt, x->d->ref, (size_t)(M * N) * sizeof(float));
    for (int64_t m0 = 0; m0 + T <= M; m0 += T)
        for (int64_t n0 = 0; n0 + T <= N; n0 += T)
            for (int64_t i = 0; i < T; i++)
                for (int64_t j = 0; j < T; j++)
                    alt[(m0 + i) * N + n0 + j] = x->d->ref[(m0 + j) * N + n0 + i];
}

/* How the output matches beside the places found wrong.  Unlike
 * cmp_acc_result, a reference that is zero everywhere there gives rel 0,
 * whatever the output holds. */
static cmp_t rest_of(const cmp_acc_t *acc)
{
    const cmp_t rest = {acc->den > 0 ? sqrt(acc->num / acc->den) : 0, acc->c.nf_mismatch, acc->c.finite};
    return rest;
}

/* A set of 16x16 tiles (or every tile transposed). */
static int try_tiles(dctx_t *x)
{
    const int64_t M = x->M, N = x->N, T = 16;
    diag_tried(x, diag_hypothesis_name(DIAG_TILES));
    for (int64_t t = 16; t <= 64; t *= 4) {
        if (M < t || N < t)
            continue;
        transpose_tiles(x, t, x->alt);
        cmp_t c = diag_compare_judged(x, x->alt, 1.0f);
        if (diag_explains(x, c))
            return diag_matched(x, DIAG_TILES, c.rel,
                                "every full %lldx%lld output tile is transposed: out[i][j] = "
                                "%s[j][i] within the tile (rel %.3g): the tile written with its "
                                "row and column strides swapped",
                                (long long)t, (long long)t, diag_ref_name(x), c.rel);
    }
    const int64_t TM = (M + T - 1) / T, TN = (N + T - 1) / T;
    double *num = calloc((size_t)(TM * TN), sizeof(double)),
           *den = calloc((size_t)(TM * TN), sizeof(double));
    unsigned char *bad = calloc((size_t)(TM * TN), 1);
    if (!num || !den || !bad) {
        free(num);
        free(den);
        free(bad);
        return kr_fail(x->err, "out of memory in diagnose");
    }
    for (int64_t m = 0; m < M; m++) {
        if (x->poisoned_rows && x->poisoned_rows[m])
            continue;
        for (int64_t n = 0; n < N; n++) {
            const int64_t t = (m / T) * TN + n / T;
            const float o = x->d->out[m * N + n], r = x->d->ref[m * N + n];
            if (isfinite(o) != isfinite(r))
                bad[t] = 1;
            else if (isfinite(o)) {
                num[t] += ((double)o - r) * ((double)o - r);
                den[t] += (double)r * r;
            }
        }
    }
    int64_t count = 0;
    const double t4 = 4 * x->thr;
    for (int64_t t = 0; t < TM * TN; t++) {
        if (!bad[t])
            bad[t] = den[t] > 0 ? num[t] > t4 * t4 * den[t] : num[t] > 0;
        count += bad[t];
    }
    int result = 0;
    if (count > 0 && count < TM * TN) {
        /* Everything outside the bad tiles must match. */
        cmp_acc_t acc = {{0, 0, 0}, 0, 0};
        for (int64_t m = 0; m < M; m++) {
            if (x->poisoned_rows && x->poisoned_rows[m])
                continue;
            for (int64_t n = 0; n < N; n++)
                if (!bad[(m / T) * TN + n / T])
                    cmp_acc_add(&acc, x->d->out[m * N + n], x->d->ref[m * N + n]);
        }
        const cmp_t rest = rest_of(&acc);
        if (diag_good(x, rest) && x->any_place) {
            char list[200] = "";
            int64_t shown = 0, r0 = -1, c0 = -1;
            for (int64_t t = 0; t < TM * TN; t++) {
                if (!bad[t])
                    continue;
                if (r0 < 0) {
                    r0 = t / TN;
                    c0 = t % TN;
                }
                if (shown++ < 4) {
                    const size_t len = strlen(list);
                    snprintf(list + len, sizeof list - len, "%srows %lld-%lld x columns %lld-%lld",
                             len ? ", " : "", (long long)((t / TN) * T + x->d->row_offset),
                             (long long)((t / TN) * T + T - 1 < M ? (t / TN) * T + T - 1 : M - 1) +
                                 (long long)x->d->row_offset,
                             (long long)((t % TN) * T),
                             (long long)((t % TN) * T + T - 1 < N ? (t % TN) * T + T - 1 : N - 1));
                }
            }
            char content[160];
            const int64_t rr1 = r0 * T + T - 1 < M ? r0 * T + T - 1 : M - 1;
            const int64_t cc1 = c0 * T + T - 1 < N ? c0 * T + T - 1 : N - 1;
            diag_region_content(x, r0 * T, rr1, c0 * T, cc1, content, sizeof content);
            result = diag_matched(x, DIAG_TILES, rest.rel,
                                  "%lld of %lld 16x16 output tiles are wrong (%s%s; the first: %s); "
                                  "the other tiles match %s (rel %.3g)",
                                  (long long)count, (long long)(TM * TN), list,
                                  shown > 4 ? ", ..." : "", content, diag_ref_name(x), rest.rel);
            x->r->checked = strncmp(content, "rel ", 4) != 0;
        }
    }
    free(num);
    free(den);
    free(bad);
    return result;
}

/* A few isolated elements wrong, everything else right: a lost update, a
 * torn store.  An element is wrong when it is non-finite on one side only
 * or off by more than 8x the threshold times the reference's RMS. */
static int try_elements(dctx_t *x)
{
    const int64_t M = x->M, N = x->N;
    const float *out = x->d->out, *ref = x->d->ref;
    double *row_rms = calloc((size_t)M, sizeof(double));
    if (!row_rms)
        return kr_fail(x->err, "out of memory in diagnose");
    for (int64_t m = 0; m < M; m++) {
        double ss = 0;
        int64_t fin = 0;
        for (int64_t n = 0; n < N; n++)
            if (isfinite(ref[m * N + n])) {
                ss += (double)ref[m * N + n] * ref[m * N + n];
                fin++;
            }
        row_rms[m] = fin ? sqrt(ss / (double)fin) : 0;
    }
    const int64_t cap = (M * N) / 200 > 8 ? (M * N) / 200 : 8;
    int64_t count = 0, shown = 0;
    char list[160] = "";
    cmp_acc_t acc = {{0, 0, 0}, 0, 0};
    for (int64_t m = 0; m < M; m++) {
        if (x->poisoned_rows && x->poisoned_rows[m])
            continue;
        for (int64_t n = 0; n < N; n++) {
            const float o = out[m * N + n], r = ref[m * N + n];
            /* off by 8x the threshold, relative to the element or its row's RMS,
             * whichever is larger (an outlier channel's rounding is not a fault) */
            const double scale = fabs((double)r) > row_rms[m] ? fabs((double)r) : row_rms[m];
            const int bad = isfinite(o) != isfinite(r) ||
                            (isfinite(o) && fabs((double)o - r) > 8 * x->thr * scale);
            if (bad) {
                if (++count > cap) {
                    free(row_rms);
                    return 0;
                }
                if (shown < 4) {
                    const size_t len = strlen(list);
                    if (snprintf(list + len, sizeof list - len, "%s(%lld, %lld)", len ? ", " : "",
                                 (long long)(m + x->d->row_offset), (long long)n) > 0)
                        shown++;
                }
                continue;
            }
            cmp_acc_add(&acc, o, r);
        }
    }
    free(row_rms);
    const cmp_t rest = rest_of(&acc);
    if (count == 0 || !diag_good(x, rest))
        return 0;
    diag_matched(x, DIAG_ROWS, rest.rel,
                 "%lld isolated elements are wrong (%s%s); every other element matches %s (rel %.3g)",
                 (long long)count, list, count > shown ? ", ..." : "", diag_ref_name(x), rest.rel);
    x->r->checked = 0;      /* a place: which elements, not why */
    return 1;
}

int diag_try_localise_any(dctx_t *x)
{
    x->any_place = 1;
    return diag_try_localise(x);
}

int diag_try_localise(dctx_t *x)
{
    diag_tried(x, "elements");
    int r = x->any_place ? try_elements(x) : 0;
    if (r == 0)
        r = try_lines(x, 0);
    if (r == 0)
        r = try_lines(x, 1);
    if (r == 0)
        r = try_tiles(x);
    return r;
}
