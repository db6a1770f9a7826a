/* The reduction's driver: the phases of reduce.h over reduce_search's two
 * searches, each candidate cut by reduce_slice / reduce_values and judged
 * by reduce_replay_row; the log; the budget. */
#include "reduce.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "case_io.h"
#include "kr_string.h"
#include "reduce_search.h"
#include "reduce_slice.h"
#include "reduce_values.h"

/* Columns per unit when the kernel declares no N multiple: the smallest
 * output tile the diagnosis names, and WPERM's fragment. */
#define REDUCE_DEFAULT_N_UNIT 16
/* Rounds of rows, columns and K while one of them still shrinks. */
#define REDUCE_MAX_ROUNDS 3

typedef enum { PHASE_ROWS, PHASE_COLUMNS, PHASE_K, PHASE_VALUES } phase_t;

typedef struct {
    const reduce_options_t *o;
    reduce_report_t *rep;
    kr_error_t *err;
    double t0;
    int keep_recorded;
    int64_t runs_at_step;       /* rep->runs when the last step was taken */
    int stopped;                /* the budget is spent */
    /* The case the reduction has reached: the original until a step is taken. */
    const case_t *cur;
    case_t owned;
    int has_owned;
    /* The phase: what its items are, and the smallest failing candidate. */
    phase_t phase;
    int64_t unit;               /* columns or K-blocks per item */
    simplify_kind_t kind;
    int64_t kind_units;         /* units of the kind in the phase's case, for the log */
    int64_t *expanded;          /* scratch: items as columns or K-blocks */
    case_t best;
    int have_best;
} reducer_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int budget_spent(reducer_t *x)
{
    const reduce_options_t *o = x->o;
    if (o->budget_s > 0 && now_s() - x->t0 >= o->budget_s)
        snprintf(x->rep->stopped_by, sizeof x->rep->stopped_by, "--budget %g s", o->budget_s);
    else if (o->max_runs > 0 && x->rep->runs >= o->max_runs)
        snprintf(x->rep->stopped_by, sizeof x->rep->stopped_by, "--max-runs %lld",
                 (long long)o->max_runs);
    else
        return 0;
    x->rep->cut_short = x->stopped = 1;
    return 1;
}

static const char *phase_name(phase_t p)
{
    return p == PHASE_ROWS ? "rows" : p == PHASE_COLUMNS ? "columns" : p == PHASE_K ? "K" : "values";
}

/* items[0..n) of the phase as columns / K-blocks (unit each, the last unit
 * cut at `limit`). */
static int64_t expand_units(const reducer_t *x, const int64_t *items, int64_t n, int64_t limit)
{
    int64_t m = 0;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = items[i] * x->unit; j < (items[i] + 1) * x->unit && j < limit; j++)
            x->expanded[m++] = j;
    return m;
}

static int build_candidate(reducer_t *x, const int64_t *set, int64_t n, case_t *cand)
{
    const case_t *base = x->cur;
    reduce_keep_t keep = {0};
    switch (x->phase) {
    case PHASE_ROWS:
        keep.rows = set;
        keep.n_rows = n;
        break;
    case PHASE_COLUMNS:
        keep.cols = x->expanded;
        keep.n_cols = expand_units(x, set, n, base->N);
        break;
    case PHASE_K:
        keep.kblocks = x->expanded;
        keep.n_kblocks = expand_units(x, set, n, base->K / 32);
        break;
    case PHASE_VALUES:
        if (reduce_copy(base, x->keep_recorded, cand, x->err))
            return -1;
        if (simplify_apply(cand, x->kind, set, n, x->err)) {
            case_free(cand);
            return -1;
        }
        return 0;
    }
    return reduce_slice(base, &keep, x->keep_recorded, cand, x->err);
}

/* The accepted candidate in the log (and in --steps DIR). */
static int log_step(reducer_t *x, int64_t n)
{
    reduce_report_t *rep = x->rep;
    const case_t *b = &x->best;
    rep->steps++;
    if (x->o->log) {
        fprintf(x->o->log, "  step %lld: ", (long long)rep->steps);
        if (x->phase == PHASE_VALUES)
            fprintf(x->o->log, "%s: %lld of %lld", simplify_kind_name(x->kind), (long long)n,
                    (long long)x->kind_units);
        else
            fprintf(x->o->log, "%-7s %lld x %lld x %lld -> %lld x %lld x %lld", phase_name(x->phase),
                    (long long)rep->M, (long long)rep->N, (long long)rep->K, (long long)b->M,
                    (long long)b->N, (long long)b->K);
        fprintf(x->o->log, "  (%lld run%s, %.1f s)\n", (long long)(rep->runs - x->runs_at_step),
                rep->runs - x->runs_at_step == 1 ? "" : "s", now_s() - x->t0);
        fflush(x->o->log);
    }
    x->runs_at_step = rep->runs;
    rep->M = b->M;
    rep->N = b->N;
    rep->K = b->K;
    if (!x->o->steps_dir)
        return 0;
    char path[4200];
    snprintf(path, sizeof path, "%s/step-%03lld.h5", x->o->steps_dir, (long long)rep->steps);
    return case_write(path, b, x->err);
}

/* search_test_fn: does the candidate fail the same way?  It becomes the
 * phase's best when it does. */
static int try_candidate(void *ctx, const int64_t *set, int64_t n)
{
    reducer_t *x = ctx;
    if (budget_spent(x))
        return SEARCH_STOP;
    case_t cand;
    if (build_candidate(x, set, n, &cand))
        return SEARCH_ERROR;
    const int confirm = x->rep->before.verdict == VERDICT_NONDETERMINISTIC ? REDUCE_CONFIRM_NONDET : 1;
    for (int i = 0; i < confirm; i++) {
        reduce_outcome_t got;
        kr_error_t rerr = {{0}};
        x->rep->runs++;
        /* A candidate the replay refuses does not fail the same way. */
        if (reduce_replay_row(&cand, x->o, &got, &rerr) != 0 || !reduce_same_way(&x->rep->before, &got)) {
            case_free(&cand);
            return 0;
        }
    }
    if (x->have_best)
        case_free(&x->best);
    x->best = cand;
    x->have_best = 1;
    return log_step(x, n) ? SEARCH_ERROR : 1;
}

/* The phase's best becomes the case reached.  Returns 1 when it changed. */
static int take_best(reducer_t *x)
{
    if (!x->have_best)
        return 0;
    if (x->has_owned)
        case_free(&x->owned);
    x->owned = x->best;
    x->has_owned = 1;
    x->cur = &x->owned;
    x->have_best = 0;
    return 1;
}

static int search_result(reducer_t *x, int rc)
{
    if (rc == SEARCH_ERROR) {
        if (!x->err->msg[0])
            kr_fail(x->err, "out of memory in the reduction");
        return -1;
    }
    return 0;
}

/* The kernel's descriptor: the registry's or an extra kernel's; NULL for a
 * recorded output's row. */
static const kernel_desc_t *row_kernel(const reduce_options_t *o)
{
    if (reduce_row_is_recorded(o->kernel))
        return NULL;
    for (int i = 0; i < o->replay.n_extra_kernels; i++)
        if (strcmp(o->replay.extra_kernels[i]->name, o->kernel) == 0)
            return o->replay.extra_kernels[i];
    return kernel_find(o->kernel);
}

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        const int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Before delta debugging, a few small prefixes: most failures show on a
 * row, a tile of columns and a K-block or two, and a small candidate costs
 * little, while each halving step of a large case costs half of it.  The
 * first prefix that fails becomes the set (ddmin goes on from it). */
static int probe_prefixes(reducer_t *x, phase_t phase, int64_t *items, int64_t *n, int64_t min_keep)
{
    /* rows: one (or the band's least), then one 16-row tile; columns: one
     * unit, then four (64 columns at the default unit); K: one unit, then two. */
    const int64_t second = phase == PHASE_ROWS ? 16 : phase == PHASE_COLUMNS ? 4 : 2;
    const int64_t sizes[2] = {min_keep, second > min_keep ? second : min_keep};
    for (int i = 0; i < 2; i++) {
        const int64_t size = sizes[i];
        if (size >= *n || (i == 1 && size == sizes[0]))
            continue;
        const int r = try_candidate(x, items, size);
        if (r < 0)
            return r;
        if (r == 1) {
            *n = size;
            return 0;
        }
    }
    return 0;
}

/* One phase of delta debugging over rows, column units or K units.
 * *changed is set when it shrank the case. */
static int dim_phase(reducer_t *x, const kernel_desc_t *k, phase_t phase, int *changed)
{
    const case_t *c = x->cur;
    int64_t n_items = 0, min_keep = 1, limit = 0;
    x->phase = phase;
    if (phase == PHASE_ROWS) {
        n_items = c->M;
        min_keep = k && k->m_min > 1 ? k->m_min : 1;
    } else if (phase == PHASE_COLUMNS) {
        x->unit = k && k->n_multiple > 0 ? k->n_multiple : REDUCE_DEFAULT_N_UNIT;
        if (c->weight && c->weight_order == WEIGHT_ORDER_FRAGMENT)
            x->unit = x->unit / gcd64(x->unit, 16) * 16;
        limit = c->N;
    } else {
        x->unit = k && k->k_multiple > 32 ? k->k_multiple / 32 : 1;
        limit = c->K / 32;
    }
    if (phase != PHASE_ROWS)
        n_items = (limit + x->unit - 1) / x->unit;
    if (n_items < 2 || n_items <= min_keep)
        return 0;
    int64_t *items = malloc((size_t)n_items * sizeof *items);
    x->expanded = malloc((size_t)(limit > 0 ? limit : 1) * sizeof *x->expanded);
    if (!items || !x->expanded) {
        free(items);
        free(x->expanded);
        return kr_fail(x->err, "out of memory in the reduction");
    }
    for (int64_t i = 0; i < n_items; i++)
        items[i] = i;
    int64_t n = n_items;
    int rc = probe_prefixes(x, phase, items, &n, min_keep);
    if (rc == 0)
        rc = search_ddmin(items, &n, min_keep, x->o->seed, try_candidate, x);
    free(items);
    free(x->expanded);
    x->expanded = NULL;
    *changed |= take_best(x);
    return search_result(x, rc);
}

static int values_phase(reducer_t *x, int *changed)
{
    x->phase = PHASE_VALUES;
    for (int kind = 0; kind < SIMPLIFY_COUNT && !x->stopped; kind++) {
        x->kind = (simplify_kind_t)kind;
        x->kind_units = simplify_unit_count(x->cur, x->kind);
        if (x->kind_units == 0)
            continue;
        int64_t *units = malloc((size_t)x->kind_units * sizeof *units), taken = 0;
        if (!units)
            return kr_fail(x->err, "out of memory in the reduction");
        const int64_t n = simplify_pending_units(x->cur, x->kind, units);
        const int rc = search_simplify(units, n, x->o->seed, try_candidate, x, &taken);
        free(units);
        *changed |= take_best(x);
        if (search_result(x, rc))
            return -1;
    }
    return 0;
}

static int dims_round(reducer_t *x, const kernel_desc_t *k, int allow_k, int *changed)
{
    /* K before the columns: a fit along K (k_blocks) needs more outputs
     * than K-blocks, so columns shrink further once K has. */
    static const phase_t phases[] = {PHASE_ROWS, PHASE_K, PHASE_COLUMNS};
    for (size_t i = 0; i < sizeof phases / sizeof phases[0] && !x->stopped; i++)
        if ((phases[i] != PHASE_K || allow_k) && dim_phase(x, k, phases[i], changed))
            return -1;
    return 0;
}

static int run_phases(reducer_t *x, const kernel_desc_t *k)
{
    const int full = !reduce_row_is_recorded(x->o->kernel);
    int changed = 1;
    for (int round = 0; changed && round < REDUCE_MAX_ROUNDS && !x->stopped; round++) {
        changed = 0;
        if (dims_round(x, k, full, &changed))
            return -1;
    }
    if (!full || x->stopped)
        return 0;
    changed = 0;
    if (values_phase(x, &changed))
        return -1;
    int again = 0;
    return changed && !x->stopped ? dims_round(x, k, full, &again) : 0;
}

int reduce_case(const case_t *c, const reduce_options_t *o, case_t *small, reduce_report_t *rep,
                kr_error_t *err)
{
    memset(small, 0, sizeof *small);
    memset(rep, 0, sizeof *rep);
    reducer_t x = {.o = o, .rep = rep, .err = err, .t0 = now_s(), .cur = c,
                   .keep_recorded = reduce_row_is_recorded(o->kernel)};
    const kernel_desc_t *k = row_kernel(o);
    if (!k && !x.keep_recorded)
        return kr_fail(err, "no kernel named %s (the registry's, --plugin's and --py's)", o->kernel);
    rep->M0 = rep->M = c->M;
    rep->N0 = rep->N = c->N;
    rep->K0 = rep->K = c->K;
    rep->runs = 1;
    if (reduce_replay_row(c, o, &rep->before, err))
        return -1;
    if (rep->before.verdict == VERDICT_COUNT)
        return kr_fail(err, "%s: the replay has no row %s / %s", c->path, o->kernel, o->reference);
    rep->seconds = now_s() - x.t0;
    if (!verdict_is_failure(rep->before.verdict))
        return REDUCE_NOTHING_FAILS;
    if (o->log)
        fprintf(o->log, "original: %lld x %lld x %lld: %s [%s] (1 run, %.1f s)\n", (long long)c->M,
                (long long)c->N, (long long)c->K, verdict_name(rep->before.verdict),
                rep->before.family, rep->seconds);
    x.runs_at_step = rep->runs;
    int rc = run_phases(&x, k);
    if (x.have_best)
        case_free(&x.best);
    if (rc == 0 && x.has_owned) {
        *small = x.owned;       /* handed over */
        x.has_owned = 0;
    } else if (rc == 0) {
        rc = reduce_copy(c, x.keep_recorded, small, err);
    }
    if (x.has_owned)
        case_free(&x.owned);
    rep->seconds = now_s() - x.t0;
    return rc;
}
