#include "baseline.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "kr_error.h"
#include "kr_string.h"
#include "results_store.h"
#include "result_order.h"
#include "results_validate.h"

void baseline_tol_default(baseline_tol_t *t)
{
    t->rel = BASELINE_TOL_REL_DEFAULT;
    t->abs = BASELINE_TOL_ABS_DEFAULT;
    t->ulp = 0;
}

const char *baseline_class_name(baseline_class_t c)
{
    static const char *const names[BASELINE_CLASS_COUNT] = {
        [BASELINE_UNCHANGED] = "UNCHANGED", [BASELINE_REGRESSED] = "REGRESSED",
        [BASELINE_IMPROVED] = "IMPROVED",   [BASELINE_NEW] = "NEW",
        [BASELINE_MISSING] = "MISSING",
    };
    return (c >= 0 && c < BASELINE_CLASS_COUNT) ? names[c] : "?";
}

/* Bounded appending of "; "-separated clauses. */
typedef struct {
    char *buf;
    size_t cap, len;
} clauses_t;

/* The regression a reader sees in its own columns: the first finding with
 * numbers (the metric, the baseline's value, the run's), else the first
 * finding at all (a verdict or a digest: NaN values). */
typedef struct {
    char metric[24];
    double base, run;
    int numeric;
} finding_t;

static void finding(finding_t *f, const char *metric, double base, double run)
{
    const int numeric = !isnan(base) || !isnan(run);
    if (f->metric[0] && (f->numeric || !numeric))
        return;
    kr_strlcpy(f->metric, metric, sizeof f->metric);
    f->base = base;
    f->run = run;
    f->numeric = numeric;
}

__attribute__((format(printf, 2, 3)))
static void add(clauses_t *c, const char *fmt, ...)
{
    if (c->len)
        kr_appendf(c->buf, c->cap, &c->len, "; ");
    va_list ap;
    va_start(ap, fmt);
    kr_vappendf(c->buf, c->cap, &c->len, fmt, ap);
    va_end(ap);
}

/* Is error-like (lower is better) value nw worse than b beyond tolerance?
 * NaN is worse than any number. */
static int worse(double nw, double b, const baseline_tol_t *t)
{
    if (isnan(nw))
        return !isnan(b);
    if (isnan(b))
        return 0;
    return nw > b * (1.0 + t->rel) + t->abs;
}

static double allowed(double b, const baseline_tol_t *t)
{
    return b * (1.0 + t->rel) + t->abs;
}

static int64_t nf_total(const nonfinite_t *nf)
{
    return nf->nan + nf->pos_inf + nf->neg_inf;
}

/* One error-like metric: a regression clause, or an improvement clause. */
static void check_err(clauses_t *reg, clauses_t *imp, finding_t *f, const char *name, double nw, double b,
                      const baseline_tol_t *t)
{
    if (worse(nw, b, t)) {
        finding(f, name, b, nw);
        add(reg, "%s worse: %.6g vs baseline %.6g (allowed %.6g = base x %.6g + %.3g)", name, nw,
            b, allowed(b, t), 1.0 + t->rel, t->abs);
    } else if (worse(b, nw, t))
        add(imp, "%s better: %.6g vs baseline %.6g (beyond tol rel %.3g, abs %.3g)", name, nw, b,
            t->rel, t->abs);
}

static baseline_class_t classify(const result_t *r, const result_t *b, const baseline_tol_t *t,
                                 char *note, size_t cap, finding_t *f)
{
    char rbuf[768] = "", ibuf[768] = "";
    clauses_t reg = {rbuf, sizeof rbuf, 0}, imp = {ibuf, sizeof ibuf, 0};

    int b_fail = verdict_is_failure(b->verdict), r_fail = verdict_is_failure(r->verdict);
    if (!b_fail && r_fail) {
        finding(f, "verdict", NAN, NAN);
        add(&reg, "verdict %s -> %s", verdict_name(b->verdict), verdict_name(r->verdict));
    } else if (b_fail && !r_fail)
        add(&imp, "verdict %s -> %s", verdict_name(b->verdict), verdict_name(r->verdict));

    int b_measured = b->ulp.count > 0 || b->metrics.count > 0;
    int r_measured = r->ulp.count > 0 || r->metrics.count > 0;
    if (b_measured && !r_measured) {
        finding(f, "measured", NAN, NAN);
        add(&reg, "no longer measured: baseline compared %lld elements, this run none (verdict %s)",
            (long long)(b->ulp.count > 0 ? b->ulp.count : b->metrics.count),
            verdict_name(r->verdict));
    } else if (!b_measured && r_measured)
        add(&imp, "now measured: %lld elements compared (baseline none, verdict %s)",
            (long long)(r->ulp.count > 0 ? r->ulp.count : r->metrics.count),
            verdict_name(b->verdict));

    if (r_measured && b_measured) {
        check_err(&reg, &imp, f, "rel_fro", r->metrics.rel_fro, b->metrics.rel_fro, t);
        check_err(&reg, &imp, f, "worst_row_rel", r->metrics.worst_row_rel,
                  b->metrics.worst_row_rel, t);

        int b_ident = b->ulp.count > 0 && b->ulp.identical == b->ulp.count;
        int r_ident = r->ulp.count > 0 && r->ulp.identical == r->ulp.count;
        if (b_ident && !r_ident && r->ulp.count > 0) {
            finding(f, "identical_frac", 1.0, (double)r->ulp.identical / (double)r->ulp.count);
            add(&reg, "was bit-identical, now %lld elements differ (identical %lld of %lld; "
                      "any difference regresses)",
                (long long)(r->ulp.count - r->ulp.identical), (long long)r->ulp.identical,
                (long long)r->ulp.count);
        } else if (r->ulp.count > 0 && b->ulp.count > 0) {
            /* The differing fraction is error-like (0 is best), so the same rule applies. */
            double fr = (double)r->ulp.identical / (double)r->ulp.count;
            double fb = (double)b->ulp.identical / (double)b->ulp.count;
            if (worse(1.0 - fr, 1.0 - fb, t)) {
                finding(f, "identical_frac", fb, fr);
                add(&reg, "identical_frac dropped: %.9g vs baseline %.9g (differing fraction "
                          "allowed %.6g = base x %.6g + %.3g)",
                    fr, fb, allowed(1.0 - fb, t), 1.0 + t->rel, t->abs);
            } else if (worse(1.0 - fb, 1.0 - fr, t))
                add(&imp, "identical_frac rose: %.9g vs baseline %.9g (beyond tol rel %.3g, "
                          "abs %.3g)", fr, fb, t->rel, t->abs);
            if (r_ident && !b_ident)
                add(&imp, "now bit-identical (%lld elements)", (long long)r->ulp.count);
        }

        /* Bit-faithful outputs are reproducible: a digest that moves means
         * the kernel's bits changed, however little the metrics moved. */
        if (r->out_digest[0] && b->out_digest[0] && strcmp(r->out_digest, b->out_digest) != 0) {
            finding(f, "out_digest", NAN, NAN);
            add(&reg, "output bits changed since the baseline (digest %s -> %s)", b->out_digest,
                r->out_digest);
        }

        if (r->ulp.max_ulp > b->ulp.max_ulp + t->ulp) {
            finding(f, "max_ulp", (double)b->ulp.max_ulp, (double)r->ulp.max_ulp);
            add(&reg, "max_ulp up: %llu vs baseline %llu (allowed +%llu)",
                (unsigned long long)r->ulp.max_ulp, (unsigned long long)b->ulp.max_ulp,
                (unsigned long long)t->ulp);
        } else if (r->ulp.max_ulp + t->ulp < b->ulp.max_ulp)
            add(&imp, "max_ulp down: %llu vs baseline %llu", (unsigned long long)r->ulp.max_ulp,
                (unsigned long long)b->ulp.max_ulp);

        int64_t nr = nf_total(&r->metrics.out_nf), nb = nf_total(&b->metrics.out_nf);
        if (nr > nb) {
            finding(f, "out_nonfinite", (double)nb, (double)nr);
            add(&reg, "non-finite outputs up: %lld vs baseline %lld (allowed +0)", (long long)nr,
                (long long)nb);
        } else if (nr < nb)
            add(&imp, "non-finite outputs down: %lld vs baseline %lld", (long long)nr,
                (long long)nb);
    }

    if (reg.len) {
        if (imp.len)
            snprintf(note, cap, "%s (also improved: %s)", rbuf, ibuf);
        else
            kr_strlcpy(note, rbuf, cap);
        return BASELINE_REGRESSED;
    }
    if (imp.len) {
        kr_strlcpy(note, ibuf, cap);
        return BASELINE_IMPROVED;
    }
    snprintf(note, cap, "within tolerance (rel %.3g, abs %.3g, ulp +%llu)", t->rel, t->abs,
             (unsigned long long)t->ulp);
    return BASELINE_UNCHANGED;
}

/* A row's identity across runs: the case's name and content digest, the
 * kernel and the reference -- never the path, which depends on the working
 * directory the run was started from. */
static int identity_cmp(const result_t *a, const result_t *b)
{
    static const result_text_key_t keys[] = {
        RESULT_TEXT_KEY(case_name), RESULT_TEXT_KEY(case_id), RESULT_TEXT_KEY(kernel),
        RESULT_TEXT_KEY(reference),
    };
    return result_text_keys_cmp(a, b, keys, (int)(sizeof keys / sizeof keys[0]));
}

int baseline_check_identity(const result_list_t *base, const char *path, kr_error_t *err)
{
    for (int64_t i = 0; i < base->count; i++)
        if (!base->rows[i].case_id[0])
            return kr_fail(err,
                           "%s: a baseline written before rows carried their case's content digest "
                           "(column case_id; row %lld, case %s, has none): its rows cannot be matched "
                           "safely; re-create it with 'kreplay gate SUITE -o RUNDIR' and "
                           "'kreplay baseline update RUNDIR --baseline %s'",
                           path, (long long)i, base->rows[i].case_name, path);
    return 0;
}

int baseline_check_usable(const result_list_t *base, const results_meta_t *base_meta,
                          const char *path, const char *suite_name, int allow_other_suite,
                          kr_error_t *err)
{
    if (base->count == 0)
        return kr_fail(err, "%s: baseline: 0 rows; expected the rows of a run to compare with (every "
                            "row would be NEW, and NEW rows never fail a gate): re-create it with "
                            "'kreplay baseline update RUNDIR --baseline %s'", path, path);
    if (results_check_unique(base, path, err))
        return -1;
    if (!allow_other_suite && base_meta && suite_name && base_meta->suite_name[0] && suite_name[0] &&
        strcmp(base_meta->suite_name, suite_name) != 0)
        return kr_fail(err, "%s: baseline: of suite '%s', this run is of suite '%s'; expected a "
                            "baseline of the same suite (every row would be MISSING or NEW; "
                            "--baseline-other-suite compares them anyway)",
                       path, base_meta->suite_name, suite_name);
    return 0;
}

/* dst = a + b + c, cut at cap (the note is a display string). */
static void join3(char *dst, size_t cap, const char *a, const char *b, const char *c)
{
    size_t l = kr_strlcpy(dst, a, cap);
    if (l < cap)
        l += kr_strlcpy(dst + l, b, cap - l);
    if (l < cap)
        kr_strlcpy(dst + l, c, cap - l);
}

static void mark_run_row(result_t *r, const char *findings, const finding_t *f)
{
    kr_strlcpy(r->regressed_metric, f->metric, sizeof r->regressed_metric);
    r->regressed_base = f->base;
    r->regressed_run = f->run;
    char old[sizeof r->note], head[sizeof r->note];
    kr_strlcpy(old, r->note, sizeof old);
    if (!verdict_is_failure(r->verdict)) {
        /* The findings first, so a truncated note still says why. */
        r->verdict = VERDICT_REGRESSED;
        join3(head, sizeof head, "baseline: ", findings, old[0] ? " | " : "");
        join3(r->note, sizeof r->note, head, old, "");
    } else {
        join3(r->note, sizeof r->note, old, " | baseline: ", findings);
    }
}

int baseline_compare(result_list_t *run, const result_list_t *base, const baseline_tol_t *tol,
                     baseline_report_t *rep)
{
    memset(rep, 0, sizeof *rep);
    baseline_tol_t t;
    if (tol)
        t = *tol;
    else
        baseline_tol_default(&t);

    int64_t nr = run ? run->count : 0, nb = base ? base->count : 0;
    int64_t *ro = result_order(nr ? run->rows : NULL, nr, identity_cmp),
            *bo = result_order(nb ? base->rows : NULL, nb, identity_cmp);
    int64_t *match = malloc((size_t)(nr ? nr : 1) * sizeof *match);
    char *bmatched = calloc((size_t)(nb ? nb : 1), 1);
    rep->entries = calloc((size_t)(nr + nb ? nr + nb : 1), sizeof *rep->entries);
    if (!ro || !bo || !match || !bmatched || !rep->entries) {
        free(ro);
        free(bo);
        free(match);
        free(bmatched);
        free(rep->entries);
        memset(rep, 0, sizeof *rep);
        return -1;
    }
    for (int64_t i = 0; i < nr; i++)
        match[i] = -1;
    for (int64_t i = 0, j = 0; i < nr && j < nb;) {
        int c = identity_cmp(&run->rows[ro[i]], &base->rows[bo[j]]);
        if (c < 0) {
            i++;
        } else if (c > 0) {
            j++;
        } else {
            match[ro[i]] = bo[j];
            bmatched[bo[j]] = 1;
            i++;
            j++;
        }
    }
    for (int64_t i = 0; i < nr; i++) {
        baseline_entry_t *e = &rep->entries[rep->count++];
        e->run_index = i;
        e->base_index = match[i];
        result_t *r = &run->rows[i];
        if (match[i] < 0) {
            e->cls = BASELINE_NEW;
            snprintf(e->note, sizeof e->note, "no baseline row (verdict %s, rel_fro %.6g)",
                     verdict_name(r->verdict), r->metrics.rel_fro);
        } else {
            finding_t f = {"", NAN, NAN, 0};
            e->cls = classify(r, &base->rows[match[i]], &t, e->note, sizeof e->note, &f);
            if (e->cls == BASELINE_REGRESSED)
                mark_run_row(r, e->note, &f);
        }
        rep->n[e->cls]++;
    }
    for (int64_t j = 0; j < nb; j++) {
        if (bmatched[j])
            continue;
        const result_t *b = &base->rows[j];
        baseline_entry_t *e = &rep->entries[rep->count++];
        e->cls = BASELINE_MISSING;
        e->run_index = -1;
        e->base_index = j;
        snprintf(e->note, sizeof e->note, "in the baseline (verdict %s, rel_fro %.6g), absent "
                                          "from this run", verdict_name(b->verdict),
                 b->metrics.rel_fro);
        rep->n[BASELINE_MISSING]++;
    }
    free(ro);
    free(bo);
    free(match);
    free(bmatched);
    return 0;
}

void baseline_report_free(baseline_report_t *rep)
{
    free(rep->entries);
    memset(rep, 0, sizeof *rep);
}

int baseline_report_failed(const baseline_report_t *rep)
{
    return rep->n[BASELINE_REGRESSED] > 0;
}

int baseline_gate_failed(const baseline_report_t *rep, int allow_missing)
{
    return rep->n[BASELINE_REGRESSED] > 0 || (!allow_missing && rep->n[BASELINE_MISSING] > 0);
}

void baseline_report_print(FILE *fp, const baseline_report_t *rep, const result_list_t *run,
                           const result_list_t *base)
{
    fprintf(fp, "baseline: %lld regressed, %lld improved, %lld unchanged, %lld new, %lld missing\n",
            (long long)rep->n[BASELINE_REGRESSED], (long long)rep->n[BASELINE_IMPROVED],
            (long long)rep->n[BASELINE_UNCHANGED], (long long)rep->n[BASELINE_NEW],
            (long long)rep->n[BASELINE_MISSING]);
    static const baseline_class_t order[] = {BASELINE_REGRESSED, BASELINE_IMPROVED, BASELINE_NEW,
                                             BASELINE_MISSING};
    for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
        for (int64_t i = 0; i < rep->count; i++) {
            const baseline_entry_t *e = &rep->entries[i];
            if (e->cls != order[k])
                continue;
            const result_t *r = e->run_index >= 0 ? &run->rows[e->run_index]
                                                  : &base->rows[e->base_index];
            /* Names from a file: never raw on a terminal. */
            char name[128], kernel[64], ref[32], note[sizeof e->note];
            kr_str_printable(r->case_name, name, sizeof name);
            kr_str_printable(r->kernel, kernel, sizeof kernel);
            kr_str_printable(r->reference, ref, sizeof ref);
            kr_str_printable(e->note, note, sizeof note);
            fprintf(fp, "%-9s  %s:%s/%s  %s\n", baseline_class_name(e->cls), name, kernel, ref,
                    note);
        }
}
