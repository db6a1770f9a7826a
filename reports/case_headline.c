#include "case_headline.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "escape.h"
#include "kr_string.h"
#include "term_layout.h"

/* ------------------------------------------------------------ row roles */

static int is_note_row(const result_t *r)
{
    return !strcmp(r->reference, "-");
}

static int is_reference_output(const result_t *r)
{
    return !strncmp(r->kernel, "recorded.ref", 12) && !is_note_row(r);
}

static int is_rerun_check(const result_t *r)
{
    return !strcmp(r->reference, "out_rerun");
}

static int is_kernel_output(const result_t *r)
{
    return !is_note_row(r) && !is_reference_output(r) && !is_rerun_check(r);
}

static int is_recorded(const result_t *r)
{
    return !strncmp(r->kernel, "recorded.", 9);
}

static int fails(const result_t *r)
{
    return verdict_is_failure(r->verdict);
}

static int passes_exact(const result_t *r)
{
    /* POISONED_INPUT: the rows with finite inputs pass. */
    return !strcmp(r->reference, "R_exact") && (r->verdict == VERDICT_PASS || r->verdict == VERDICT_POISONED_INPUT);
}

/* ------------------------------------------------------ which row to cite */

/* The reference a row was judged against, by how much it says about the
 * kernel: its own operands first, total error last. */
static int reference_rank(const char *ref)
{
    if (!strcmp(ref, "R_exact"))
        return 0;
    if (!strncmp(ref, "model:", 6))
        return 1;
    if (!strcmp(ref, "R_source"))
        return 2;
    if (!strcmp(ref, "R_sanitized"))
        return 3;
    return 4;
}

static double ratio(const result_t *r)
{
    const double t = r->threshold, v = r->metrics.rel_fro;
    return isfinite(t) && t > 0 && isfinite(v) ? v / t : 0.0;
}

/* Is a better than b to cite?  A recorded (production) output, then a
 * diagnosed row, then the more telling reference, then the larger error. */
static int better_cite(const result_t *a, const result_t *b)
{
    if (is_recorded(a) != is_recorded(b))
        return is_recorded(a);
    if (!a->diagnosis[0] != !b->diagnosis[0])
        return a->diagnosis[0] != '\0';
    const int ra = reference_rank(a->reference), rb = reference_rank(b->reference);
    if (ra != rb)
        return ra < rb;
    return ratio(a) > ratio(b);
}

typedef int (*row_test_t)(const result_t *r);

/* The best row to cite among those of the case that pass test; -1 none. */
static int64_t pick(const result_list_t *rows, const int64_t *idx, int64_t n, row_test_t test)
{
    int64_t best = -1;
    for (int64_t j = 0; j < n; j++) {
        const result_t *r = &rows->rows[idx[j]];
        if (test(r) && (best < 0 || better_cite(r, &rows->rows[best])))
            best = idx[j];
    }
    return best;
}

/* ------------------------------------------------------------ row tests */

static int failing_reference_output(const result_t *r)
{
    return is_reference_output(r) && fails(r);
}

static int kernel_passing_exact(const result_t *r)
{
    return is_kernel_output(r) && passes_exact(r);
}

static int reference_passing_exact(const result_t *r)
{
    return is_reference_output(r) && passes_exact(r);
}

static int failing_kernel(const result_t *r)
{
    return is_kernel_output(r) && fails(r);
}

static int failing_kernel_blaming_input(const result_t *r)
{
    return failing_kernel(r) && party_from_name(r->diag_party) == PARTY_INPUT;
}

static int failing_recorded_blaming_input(const result_t *r)
{
    return failing_kernel_blaming_input(r) && is_recorded(r);
}

static int failing_kernel_blaming_reference(const result_t *r)
{
    return failing_kernel(r) && party_from_name(r->diag_party) == PARTY_REFERENCE;
}

static int failing_rerun(const result_t *r)
{
    return is_rerun_check(r) && fails(r);
}

static int error_row(const result_t *r)
{
    return r->verdict == VERDICT_ERROR;
}

static int poisoned_row(const result_t *r)
{
    return r->verdict == VERDICT_POISONED_INPUT;
}

static int measured_row(const result_t *r)
{
    return !is_note_row(r);
}

static int any_row(const result_t *r)
{
    (void)r;
    return 1;
}

/* ------------------------------------------------------------ the line */

typedef struct {
    char *buf;
    size_t cap, len;
} text_t;

__attribute__((format(printf, 2, 3)))
static void put(text_t *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    kr_vappendf(t->buf, t->cap, &t->len, fmt, ap);
    va_end(ap);
}

/* Why the row failed, in numbers: the regression, the error over its
 * threshold, the reruns that differ, or the judgement's own leading clause
 * ("worst_row_rel 0.3543 > 0.09313"). */
static void put_reason(text_t *t, const result_t *r)
{
    if (r->regressed_metric[0]) {
        if (!isnan(r->regressed_base) || !isnan(r->regressed_run))
            put(t, "%s %.4g -> %.4g since the baseline", r->regressed_metric, r->regressed_base, r->regressed_run);
        else
            put(t, "%s changed since the baseline", r->regressed_metric);
        return;
    }
    if (is_rerun_check(r) && r->ulp.count > 0) {
        put(t, "%lld of %lld elements differ between runs", (long long)(r->ulp.count - r->ulp.identical),
            (long long)r->ulp.count);
        return;
    }
    if (isfinite(r->metrics.rel_fro) && isfinite(r->threshold) && r->metrics.rel_fro > r->threshold) {
        put(t, "rel_fro %.4g > %.4g", r->metrics.rel_fro, r->threshold);
        return;
    }
    size_t n = strcspn(r->note, "(;");
    while (n > 0 && r->note[n - 1] == ' ')
        n--;
    if (n > 0 && n < 120 && (memchr(r->note, '>', n) || memchr(r->note, '<', n)))
        put(t, "%.*s", (int)n, r->note);
    else if (isfinite(r->metrics.rel_fro) && isfinite(r->threshold))
        put(t, "rel_fro %.4g <= %.4g", r->metrics.rel_fro, r->threshold);
}

/* "recorded.out WRONG against R_exact (rel_fro 1.453 > 0.003922)" */
static void put_row(text_t *t, const result_t *r)
{
    put(t, "%s %s against %s", r->kernel, verdict_name(r->verdict), r->reference);
    const size_t mark = t->len;
    put(t, " (");
    const size_t inner = t->len;
    put_reason(t, r);
    if (t->len == inner)
        t->len = mark, t->buf[mark] = '\0';
    else
        put(t, ")");
}

/* "recorded.out matches R_exact, rel_fro 0.001646 <= 0.003922" */
static void put_passing(text_t *t, const result_t *r)
{
    put(t, "%s matches %s, rel_fro %.4g <= %.4g", r->kernel, r->reference, r->metrics.rel_fro, r->threshold);
}

static void put_diagnosis(text_t *t, const char *lead, const result_t *r)
{
    if (r->diagnosis[0])
        put(t, "%s%s", lead, r->diagnosis);
}

const char *case_party_word(party_t p)
{
    return p == PARTY_NONE ? "none" : party_name(p);
}

/* ------------------------------------------------------------ the rules */

typedef struct {
    const result_list_t *rows;
    const int64_t *idx;
    int64_t n;
    case_headline_t *h;
    text_t t;
} judge_ctx_t;

static const result_t *row_at(const judge_ctx_t *c, int64_t i)
{
    return i >= 0 ? &c->rows->rows[i] : NULL;
}

static void cite(judge_ctx_t *c, const char *rule, party_t party, int64_t row, int64_t evidence)
{
    c->h->rule = rule;
    c->h->party = party;
    c->h->row = row;
    c->h->evidence = evidence;
    if (row >= 0)
        c->h->verdict = c->rows->rows[row].verdict;
    put(&c->t, party == PARTY_NONE ? "no party at fault" : "%s at fault", party_name(party));
    if (row >= 0)
        put(&c->t, ": ");
}

/* A rule of the decision table: it holds when a row passes `cited` (and,
 * when needs_evidence, another passes `evidence`); the line is then the
 * cited row, why, the evidence row between evidence_pre and evidence_post,
 * and the cited row's diagnosis after diag_lead (the evidence after the
 * diagnosis when evidence_last).  `special` writes rules of other shapes. */
typedef struct rule {
    const char *name;
    party_t party;
    row_test_t cited, evidence;
    int needs_evidence, evidence_last;
    const char *why, *evidence_pre, *evidence_post, *diag_lead;
    int (*special)(judge_ctx_t *c, const struct rule *r);
} rule_t;

static int64_t pick_in(const judge_ctx_t *c, row_test_t test)
{
    return test ? pick(c->rows, c->idx, c->n, test) : -1;
}

static void put_evidence(judge_ctx_t *c, const rule_t *r, int64_t e)
{
    put(&c->t, "%s", r->evidence_pre);
    put_passing(&c->t, row_at(c, e));
    put(&c->t, "%s", r->evidence_post);
}

static int apply_rule(judge_ctx_t *c, const rule_t *r)
{
    if (r->special)
        return r->special(c, r);
    const int64_t k = pick_in(c, r->cited), e = pick_in(c, r->evidence);
    if (k < 0 || (r->needs_evidence && e < 0))
        return 0;
    cite(c, r->name, r->party, k, e);
    put_row(&c->t, row_at(c, k));
    put(&c->t, "%s", r->why);
    if (e >= 0 && !r->evidence_last)
        put_evidence(c, r, e);
    put_diagnosis(&c->t, r->diag_lead, row_at(c, k));
    if (e >= 0 && r->evidence_last)
        put_evidence(c, r, e);
    return 1;
}

static int rule_harness_error(judge_ctx_t *c, const rule_t *r)
{
    const int64_t e = pick_in(c, r->cited);
    if (e < 0)
        return 0;
    cite(c, r->name, r->party, e, -1);
    put(&c->t, "%s ERROR: kreplay could not compute the row: %s", row_at(c, e)->kernel, row_at(c, e)->note);
    return 1;
}

/* The rerun check first (it says what the kernel is), then the failing
 * output it explains. */
static int rule_kernel_rerun(judge_ctx_t *c, const rule_t *r)
{
    const int64_t k = pick_in(c, r->cited), e = pick_in(c, r->evidence);
    if (k < 0)
        return 0;
    cite(c, r->name, r->party, k, e);
    put(&c->t, "%s %s (", row_at(c, k)->kernel, verdict_name(row_at(c, k)->verdict));
    put_reason(&c->t, row_at(c, k));
    put(&c->t, "): the kernel is not deterministic");
    if (e >= 0) {
        put(&c->t, "; ");
        put_row(&c->t, row_at(c, e));
        put_diagnosis(&c->t, "; diagnosis: ", row_at(c, e));
    }
    return 1;
}

static int rule_input_poisoned(judge_ctx_t *c, const rule_t *r)
{
    const int64_t p = pick_in(c, r->evidence);
    if (p < 0)
        return 0;
    cite(c, r->name, r->party, -1, p);
    c->h->verdict = VERDICT_POISONED_INPUT;
    put(&c->t, " (POISONED_INPUT): x holds non-finite values; the rows they reach are judged apart and every "
               "row with finite inputs passes");
    return 1;
}

static int rule_unsupported(judge_ctx_t *c, const rule_t *r)
{
    if (pick_in(c, measured_row) >= 0)
        return 0;
    const int64_t u = pick_in(c, any_row);
    cite(c, r->name, r->party, -1, u);
    c->h->verdict = u >= 0 ? row_at(c, u)->verdict : VERDICT_UNSUPPORTED;
    put(&c->t, " (%s): no kernel could compare an output", verdict_name(c->h->verdict));
    if (u >= 0)
        put(&c->t, ": %s", row_at(c, u)->note);
    return 1;
}

static int rule_pass(judge_ctx_t *c, const rule_t *r)
{
    cite(c, r->name, r->party, -1, -1);
    c->h->verdict = VERDICT_PASS;
    int64_t measured = 0;
    for (int64_t j = 0; j < c->n; j++)
        measured += measured_row(&c->rows->rows[c->idx[j]]);
    put(&c->t, " (PASS): all %lld compared rows pass", (long long)measured);
    return 1;
}

/* The decision table (case_headline.h), first rule that holds wins. */
static const rule_t RULES[] = {
    {.name = "harness-error", .party = PARTY_NONE, .cited = error_row, .special = rule_harness_error},
    {.name = "reference-wrong", .party = PARTY_REFERENCE, .cited = failing_reference_output,
     .evidence = kernel_passing_exact, .needs_evidence = 1,
     .why = " because the case's recorded reference is wrong, not the kernel", .evidence_pre = " (",
     .evidence_post = ")", .diag_lead = "; the reference's diagnosis: "},
    {.name = "reference-shared", .party = PARTY_REFERENCE, .cited = failing_recorded_blaming_input,
     .evidence = reference_passing_exact, .needs_evidence = 1,
     .why = " because the case's reference is wrong: the serve's reference read the operands as the case labels "
            "them",
     .evidence_pre = " (", .evidence_post = "), the kernel did not", .diag_lead = "; the kernel's diagnosis: "},
    {.name = "input-labels", .party = PARTY_INPUT, .cited = failing_kernel_blaming_input,
     .why = " because of the case's input, not the kernel", .diag_lead = "; diagnosis: "},
    {.name = "reference-diag", .party = PARTY_REFERENCE, .cited = failing_kernel_blaming_reference,
     .why = " because the reference was built from other operands than the kernel's output",
     .diag_lead = "; diagnosis: "},
    {.name = "kernel-rerun", .party = PARTY_KERNEL, .cited = failing_rerun, .evidence = failing_kernel,
     .special = rule_kernel_rerun},
    {.name = "kernel", .party = PARTY_KERNEL, .cited = failing_kernel, .evidence = reference_passing_exact,
     .evidence_last = 1, .why = "", .evidence_pre = "; the serve's reference agrees with kreplay's (",
     .evidence_post = ")", .diag_lead = "; diagnosis: "},
    {.name = "reference-alone", .party = PARTY_REFERENCE, .cited = failing_reference_output,
     .why = ": the case's recorded reference disagrees with R_exact", .diag_lead = "; "},
    {.name = "input-poisoned", .party = PARTY_INPUT, .evidence = poisoned_row, .special = rule_input_poisoned},
    {.name = "unsupported", .party = PARTY_NONE, .special = rule_unsupported},
    {.name = "pass", .party = PARTY_NONE, .special = rule_pass},
};

/* The first failing row whose own diagnosis blames another party than the
 * headline: named, with what the headline rests on instead (its evidence
 * row), so the reader knows which to trust and why. */
static void put_contradiction(judge_ctx_t *c)
{
    case_headline_t *h = c->h;
    for (int64_t j = 0; j < c->n; j++) {
        const result_t *r = &c->rows->rows[c->idx[j]];
        const party_t p = party_from_name(r->diag_party);
        if (!fails(r) || p == PARTY_NONE || p == h->party)
            continue;
        /* reference-shared rests on the input's misreading: evidence, not a contradiction. */
        if (!strcmp(h->rule, "reference-shared") && p == PARTY_INPUT)
            continue;
        h->contradicted = 1;
        put(&c->t, " [%s against %s: its diagnosis blames the %s; not trusted", r->kernel, r->reference,
            party_name(p));
        const result_t *e = row_at(c, h->evidence);
        if (e && p == PARTY_INPUT && is_kernel_output(e) && passes_exact(e))
            put(&c->t, ": the kernel's output matches R_exact built from the case as labelled, so the labels "
                       "are right (%s)", e->kernel);
        else if (e) {
            put(&c->t, ": the verdicts say otherwise (");
            put_passing(&c->t, e);
            put(&c->t, ")");
        }
        put(&c->t, "]");
        return;
    }
}

void case_headline_of(const result_list_t *rows, const int64_t *idx, int64_t n, case_headline_t *h)
{
    memset(h, 0, sizeof *h);
    h->row = h->evidence = h->first = -1;
    h->verdict = VERDICT_PASS;
    judge_ctx_t c = {.rows = rows, .idx = idx, .n = n, .h = h, .t = {h->line, sizeof h->line, 0}};
    if (n <= 0) {
        h->rule = "pass";
        return;
    }
    h->first = idx[0];
    for (int64_t j = 0; j < n; j++)
        h->failing += fails(&rows->rows[idx[j]]);
    put(&c.t, "%s: ", rows->rows[idx[0]].case_name);
    for (size_t k = 0; k < sizeof RULES / sizeof RULES[0]; k++)
        if (apply_rule(&c, &RULES[k]))
            break;
    put_contradiction(&c);
    const char *where = "";
    for (int64_t j = 0; j < n && !where[0]; j++)
        where = rows->rows[idx[j]].poison_where;
    if (where[0])
        put(&c.t, "; poisoned input: %s", where);
    if (h->failing > 1 && h->row >= 0)
        put(&c.t, " (%lld failing rows in all)", (long long)h->failing);
}

/* ------------------------------------------------------------ per case */

typedef struct {
    const result_t *r;
    int64_t i;
} case_ref_t;

static int case_cmp(const result_t *a, const result_t *b)
{
    const int c = strcmp(a->case_path, b->case_path);
    return c ? c : strcmp(a->case_name, b->case_name);
}

static int case_ref_cmp(const void *a, const void *b)
{
    const case_ref_t *x = a, *y = b;
    const int c = case_cmp(x->r, y->r);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

static int first_row_cmp(const void *a, const void *b)
{
    const case_headline_t *x = a, *y = b;
    return (x->first > y->first) - (x->first < y->first);
}

int64_t case_headlines(const result_list_t *rows, case_headline_t **out)
{
    *out = NULL;
    const size_t n = (size_t)(rows->count ? rows->count : 1);
    case_ref_t *refs = malloc(n * sizeof *refs);
    int64_t *idx = malloc(n * sizeof *idx);
    case_headline_t *h = NULL;
    int64_t nh = 0;
    if (refs && idx) {
        for (int64_t i = 0; i < rows->count; i++)
            refs[i] = (case_ref_t){&rows->rows[i], i};
        if (rows->count > 1)
            qsort(refs, (size_t)rows->count, sizeof *refs, case_ref_cmp);
        int64_t cases = 0;
        for (int64_t j = 0; j < rows->count; j++)
            cases += j == 0 || case_cmp(refs[j].r, refs[j - 1].r) != 0;
        h = malloc((size_t)(cases ? cases : 1) * sizeof *h);
        for (int64_t j = 0; h && j < rows->count;) {
            int64_t k = j, m = 0;
            while (k < rows->count && case_cmp(refs[k].r, refs[j].r) == 0)
                idx[m++] = refs[k++].i;
            case_headline_of(rows, idx, m, &h[nh++]);
            j = k;
        }
        if (h && nh > 1)
            qsort(h, (size_t)nh, sizeof *h, first_row_cmp);
    }
    free(refs);
    free(idx);
    if (!h)
        return -1;
    *out = h;
    return nh;
}

json_t *case_headlines_json(const result_list_t *rows)
{
    json_t *arr = json_array();
    case_headline_t *h = NULL;
    const int64_t n = case_headlines(rows, &h);
    for (int64_t i = 0; i < n; i++) {
        const result_t *f = &rows->rows[h[i].first];
        const result_t *cited = h[i].row >= 0 ? &rows->rows[h[i].row] : NULL;
        json_t *o = json_object();
        json_object_set_new(o, "case_name", json_string(f->case_name));
        json_object_set_new(o, "case_path", json_string(f->case_path));
        json_object_set_new(o, "party", json_string(case_party_word(h[i].party)));
        json_object_set_new(o, "verdict", json_string(verdict_name(h[i].verdict)));
        json_object_set_new(o, "rule", json_string(h[i].rule));
        json_object_set_new(o, "headline", json_string(h[i].line));
        json_object_set_new(o, "kernel", cited ? json_string(cited->kernel) : json_null());
        json_object_set_new(o, "reference", cited ? json_string(cited->reference) : json_null());
        json_object_set_new(o, "failing_rows", json_integer(h[i].failing));
        json_object_set_new(o, "contradicted", json_boolean(h[i].contradicted));
        const char *where = "";
        for (int64_t j = 0; j < rows->count && !where[0]; j++)
            if (case_cmp(&rows->rows[j], f) == 0)
                where = rows->rows[j].poison_where;
        json_object_set_new(o, "poison", where[0] ? json_string(where) : json_null());
        json_array_append_new(arr, o);
    }
    free(h);
    return arr;
}

void case_headlines_print(FILE *fp, const result_list_t *rows, int width)
{
    case_headline_t *h = NULL;
    const int64_t n = case_headlines(rows, &h);
    for (int64_t i = 0; i < n; i++) {
        char line[sizeof h[i].line];
        esc_terminal(h[i].line, line, sizeof line);
        term_wrap(fp, "", line, 4, width);
    }
    free(h);
}

char *case_headlines_text(const result_list_t *rows, void (*esc)(FILE *, const char *), const char *pre,
                          const char *post, int64_t max, int64_t *more, int64_t *clean)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    case_headline_t *h = NULL;
    const int64_t n = fp ? case_headlines(rows, &h) : -1;
    int64_t shown = 0;
    *more = *clean = 0;
    for (int64_t i = 0; i < n; i++) {
        if (h[i].party == PARTY_NONE && !verdict_is_failure(h[i].verdict)) {
            (*clean)++;
        } else if (shown < max) {
            fputs(pre, fp);
            esc(fp, h[i].line);
            fputs(post, fp);
            shown++;
        } else {
            (*more)++;
        }
    }
    free(h);
    if (fp)
        fclose(fp);
    if (buf && !len) {
        free(buf);
        buf = NULL;
    }
    return buf;
}
