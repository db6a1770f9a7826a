/* JUnit XML (reports/junit.h): the output is parsed by a small XML checker
 * written here (well-formedness: balanced tags, quoted attributes, only the
 * five predefined entities and character references, no raw < or & in text)
 * and the testcase / failure / skipped elements are counted and their
 * decoded attributes compared with the rows' text, including a note and a
 * case name full of <&>"' and a byte that is not UTF-8.  Where python3 is
 * installed its XML parser must accept the file too. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "junit.h"
#include "test_main.h"
#include "test_support.h"

/* ---------------------------------------------------------------- XML checker */

typedef struct {
    char name[32];
    char attr_name[8][32];
    char attr_val[8][1024];   /* decoded */
    int n_attr;
    char text[4096];          /* decoded text directly inside */
    int depth;
} elem_t;

typedef struct {
    const char *p;
    elem_t el[128];
    int n;
    char err[256];
} xml_t;

static int decode_entity(const char **pp, char *out)
{
    const char *p = *pp;   /* at '&' */
    static const struct { const char *e; char c; } ents[] = {
        {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
    for (size_t i = 0; i < 5; i++)
        if (strncmp(p, ents[i].e, strlen(ents[i].e)) == 0) {
            *out = ents[i].c;
            *pp = p + strlen(ents[i].e);
            return 0;
        }
    if (p[1] == '#') {
        char *end;
        long v = p[2] == 'x' ? strtol(p + 3, &end, 16) : strtol(p + 2, &end, 10);
        if (*end != ';' || v <= 0 || v > 127)
            return -1;
        *out = (char)v;
        *pp = end + 1;
        return 0;
    }
    return -1;
}

/* Appends decoded characters of p up to stop (exclusive) to dst. */
static int decode_run(xml_t *x, const char *p, const char *stop, char *dst, size_t cap)
{
    size_t n = strlen(dst);
    while (p < stop) {
        char c = *p;
        if (c == '<') {
            snprintf(x->err, sizeof x->err, "raw '<' in text or attribute");
            return -1;
        }
        if (c == '&') {
            if (decode_entity(&p, &c) != 0) {
                snprintf(x->err, sizeof x->err, "bad entity near: %.20s", p);
                return -1;
            }
        } else {
            p++;
        }
        if (n + 1 < cap) {
            dst[n++] = c;
            dst[n] = '\0';
        }
    }
    return 0;
}

static int parse_xml(xml_t *x, const char *doc)
{
    memset(x, 0, sizeof *x);
    const char *p = doc;
    int stack[64], sp = 0, roots = 0;
    if (strncmp(p, "<?xml ", 6) == 0) {
        p = strstr(p, "?>");
        if (!p)
            return snprintf(x->err, sizeof x->err, "unterminated prolog"), -1;
        p += 2;
    }
    while (*p) {
        if (*p != '<') {
            const char *lt = strchr(p, '<');
            if (!lt)
                lt = p + strlen(p);
            if (sp == 0) {   /* only whitespace outside the root */
                for (const char *q = p; q < lt; q++)
                    if (*q != '\n' && *q != ' ')
                        return snprintf(x->err, sizeof x->err, "text outside root"), -1;
            } else if (decode_run(x, p, lt, x->el[stack[sp - 1]].text,
                                  sizeof x->el[0].text) != 0) {
                return -1;
            }
            p = lt;
            continue;
        }
        if (p[1] == '/') {   /* end tag */
            const char *gt = strchr(p, '>');
            if (!gt || sp == 0)
                return snprintf(x->err, sizeof x->err, "stray end tag"), -1;
            size_t len = (size_t)(gt - p - 2);
            const char *nm = x->el[stack[sp - 1]].name;
            if (len != strlen(nm) || strncmp(p + 2, nm, len) != 0)
                return snprintf(x->err, sizeof x->err, "end tag </%.*s> closes <%s>", (int)len,
                                p + 2, nm), -1;
            sp--;
            p = gt + 1;
            continue;
        }
        if (x->n == 128 || sp == 64)
            return snprintf(x->err, sizeof x->err, "too many elements"), -1;
        elem_t *e = &x->el[x->n];
        e->depth = sp;
        p++;
        size_t k = 0;
        while (*p && *p != ' ' && *p != '>' && *p != '/' && k < sizeof e->name - 1)
            e->name[k++] = *p++;
        if (k == 0)
            return snprintf(x->err, sizeof x->err, "empty tag name"), -1;
        if (sp == 0 && roots++)
            return snprintf(x->err, sizeof x->err, "two root elements"), -1;
        for (;;) {
            while (*p == ' ')
                p++;
            if (*p == '>' || (p[0] == '/' && p[1] == '>'))
                break;
            if (e->n_attr == 8)
                return snprintf(x->err, sizeof x->err, "too many attributes"), -1;
            const char *eq = strchr(p, '=');
            if (!eq || eq[1] != '"')
                return snprintf(x->err, sizeof x->err, "unquoted attribute in <%s>", e->name), -1;
            snprintf(e->attr_name[e->n_attr], sizeof e->attr_name[0], "%.*s", (int)(eq - p), p);
            for (int a = 0; a < e->n_attr; a++)
                if (strcmp(e->attr_name[a], e->attr_name[e->n_attr]) == 0)
                    return snprintf(x->err, sizeof x->err, "duplicate attribute"), -1;
            const char *end = strchr(eq + 2, '"');
            if (!end)
                return snprintf(x->err, sizeof x->err, "unterminated attribute"), -1;
            e->attr_val[e->n_attr][0] = '\0';
            if (decode_run(x, eq + 2, end, e->attr_val[e->n_attr], sizeof e->attr_val[0]) != 0)
                return -1;
            e->n_attr++;
            p = end + 1;
            if (*p != ' ' && *p != '>' && *p != '/')
                return snprintf(x->err, sizeof x->err, "no space between attributes"), -1;
        }
        int self = *p == '/';
        p += self ? 2 : 1;
        if (!self)
            stack[sp++] = x->n;
        x->n++;
    }
    if (sp != 0)
        return snprintf(x->err, sizeof x->err, "unclosed <%s>", x->el[stack[sp - 1]].name), -1;
    return roots == 1 ? 0 : (snprintf(x->err, sizeof x->err, "no root"), -1);
}

static const char *attr(const elem_t *e, const char *name)
{
    for (int i = 0; i < e->n_attr; i++)
        if (strcmp(e->attr_name[i], name) == 0)
            return e->attr_val[i];
    return NULL;
}

static int count(const xml_t *x, const char *name)
{
    int n = 0;
    for (int i = 0; i < x->n; i++)
        n += strcmp(x->el[i].name, name) == 0;
    return n;
}

/* The testcase element named name, or NULL; *child gets its first child (or -1). */
static const elem_t *testcase(const xml_t *x, const char *name, int *child)
{
    for (int i = 0; i < x->n; i++)
        if (strcmp(x->el[i].name, "testcase") == 0 && strcmp(attr(&x->el[i], "name"), name) == 0) {
            *child = i + 1 < x->n && x->el[i + 1].depth == x->el[i].depth + 1 ? i + 1 : -1;
            return &x->el[i];
        }
    return NULL;
}

/* ---------------------------------------------------------------- rows */

static result_t *row(result_list_t *l, const char *case_name, int64_t N, int64_t K, int64_t M,
                     const char *kernel, const char *ref, verdict_t v, double rel, const char *note)
{
    result_t *r = result_list_add(l);
    assert_non_null(r);
    snprintf(r->case_path, sizeof r->case_path, "/cases/%s.h5", case_name);
    snprintf(r->case_name, sizeof r->case_name, "%s", case_name);
    r->M = M;
    r->N = N;
    r->K = K;
    snprintf(r->band, sizeof r->band, "%s", m_band_name(M));
    snprintf(r->kernel, sizeof r->kernel, "%s", kernel);
    snprintf(r->reference, sizeof r->reference, "%s", ref);
    r->metrics.rel_fro = rel;
    r->metrics.worst_row_rel = 2 * rel;
    r->ulp.max_ulp = 9;
    r->threshold = 0.01;
    r->verdict = v;
    r->seconds = 0.5;
    snprintf(r->note, sizeof r->note, "%s", note);
    return r;
}

static const char *const NASTY_NOTE = "rel_fro 0.31 > 0.01 <&> \"q\" 'a' \x01 bad\xff byte";
static const char *const NASTY_NOTE_XML = "rel_fro 0.31 > 0.01 <&> \"q\" 'a' ? bad? byte";

static void make_rows(result_list_t *l)
{
    memset(l, 0, sizeof *l);
    /* A: one passing and one failing kernel. */
    row(l, "A", 5120, 17408, 1, "w4a8.perblock", "R_exact", VERDICT_PASS, 1e-3, "ok");
    row(l, "A", 5120, 17408, 1, "w4a4.aiter", "R_exact", VERDICT_WRONG, 0.31, NASTY_NOTE);
    row(l, "A", 5120, 17408, 1, "w4a4.aiter", "R_source", VERDICT_PASS, 5e-3, "ok");
    /* B (a name to escape): the kernel cannot take the shape. */
    row(l, "b&<x>\"'", 2880, 4100, 300, "w4a8.perblock", "-", VERDICT_UNSUPPORTED, NAN,
        "K % 32 != 0");
    /* C: poisoned input passes; a regressed and a MAGNITUDE row fail one testcase. */
    row(l, "C", 4096, 4096, 4096, "w4a4.aiter", "R_exact", VERDICT_POISONED_INPUT, 1e-3,
        "x holds 3 NaN");
    row(l, "C", 4096, 4096, 4096, "w4a8.perblock", "R_exact", VERDICT_REGRESSED, 2e-3,
        "baseline: was bit-identical, now 3 elements differ");
    row(l, "C", 4096, 4096, 4096, "w4a8.perblock", "R_source", VERDICT_MAGNITUDE, 0.9,
        "|out|/|ref| = 4");
    /* A's first kernel again, not adjacent: same testcase. */
    row(l, "A", 5120, 17408, 1, "w4a8.perblock", "R_source", VERDICT_PASS, 4e-3, "ok");
}

static char *render(const result_list_t *l, const char *suite, double seconds)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    assert_non_null(fp);
    assert_int_equal(junit_write(fp, suite, l, seconds), 0);
    fclose(fp);
    return buf;
}

static void test_counts_and_structure(void **state)
{
    (void)state;
    result_list_t l;
    make_rows(&l);
    char *doc = render(&l, "nightly <default> & more", 12.5);
    xml_t x;
    if (parse_xml(&x, doc) != 0)
        fail_msg("not well-formed: %s\n%s", x.err, doc);
    assert_string_equal(x.el[0].name, "testsuites");
    const elem_t *suite = &x.el[1];
    assert_string_equal(suite->name, "testsuite");
    assert_string_equal(attr(suite, "name"), "nightly <default> & more");
    assert_string_equal(attr(suite, "tests"), "5");
    assert_string_equal(attr(suite, "failures"), "2");
    assert_string_equal(attr(suite, "skipped"), "1");
    assert_string_equal(attr(suite, "time"), "12.500");
    assert_int_equal(count(&x, "testcase"), 5);
    assert_int_equal(count(&x, "failure"), 2);
    assert_int_equal(count(&x, "skipped"), 1);

    int child;
    const elem_t *tc = testcase(&x, "A:w4a8.perblock", &child);
    assert_non_null(tc);
    assert_string_equal(attr(tc, "classname"), "kreplay.5120x17408.decode");
    assert_string_equal(attr(tc, "time"), "1.000000");   /* both its rows */
    assert_int_equal(child, -1);

    tc = testcase(&x, "A:w4a4.aiter", &child);
    assert_non_null(tc);
    assert_true(child > 0);
    const elem_t *f = &x.el[child];
    assert_string_equal(f->name, "failure");
    assert_string_equal(attr(f, "type"), "WRONG");
    const char *msg = attr(f, "message");
    if (!strstr(msg, "WRONG R_exact: rel_fro 0.31 (threshold 0.01)"))
        fail_msg("message lacks metric and threshold: %s", msg);
    if (!strstr(msg, NASTY_NOTE_XML))
        fail_msg("message lacks the escaped note: %s", msg);
    assert_non_null(strstr(f->text, NASTY_NOTE_XML));
    assert_null(strstr(f->text, "R_source"));   /* only failing rows in the text */

    tc = testcase(&x, "b&<x>\"':w4a8.perblock", &child);
    assert_non_null(tc);
    assert_string_equal(attr(tc, "classname"), "kreplay.2880x4100.prefill");
    assert_string_equal(x.el[child].name, "skipped");
    assert_string_equal(attr(&x.el[child], "message"), "UNSUPPORTED: K % 32 != 0");

    tc = testcase(&x, "C:w4a4.aiter", &child);
    assert_non_null(tc);
    assert_int_equal(child, -1);   /* POISONED_INPUT passes */
    assert_string_equal(attr(tc, "classname"), "kreplay.4096x4096.tiled");

    tc = testcase(&x, "C:w4a8.perblock", &child);
    assert_non_null(tc);
    f = &x.el[child];
    assert_string_equal(attr(f, "type"), "REGRESSED");
    assert_non_null(strstr(attr(f, "message"), "was bit-identical, now 3 elements differ"));
    assert_non_null(strstr(f->text, "REGRESSED R_exact"));
    assert_non_null(strstr(f->text, "MAGNITUDE R_source: rel_fro 0.9 (threshold 0.01)"));

    /* The raw bytes: no unescaped specials inside the note, no control or invalid bytes. */
    assert_null(strstr(doc, "<&>"));
    assert_non_null(strstr(doc, "&lt;&amp;&gt; &quot;q&quot; &apos;a&apos;"));
    for (const unsigned char *p = (const unsigned char *)doc; *p; p++)
        assert_true(*p >= 0x20 || *p == '\n');
    assert_null(strchr(doc, '\xff'));

    /* An independent parser, where there is one. */
    if (system("command -v python3 >/dev/null 2>&1") == 0) {
        char path[512];
        test_tmp_path(path, sizeof path, "junit.xml");
        FILE *fp = fopen(path, "w");
        fputs(doc, fp);
        fclose(fp);
        char cmd[1200];
        snprintf(cmd, sizeof cmd,
                 "python3 -c \"import sys, xml.etree.ElementTree as E; "
                 "r = E.parse(sys.argv[1]).getroot(); "
                 "t = r.findall('.//testcase'); assert len(t) == 5; "
                 "assert len(r.findall('.//failure')) == 2; "
                 "assert '<&>' in r.find('.//failure').get('message')\" '%s'",
                 path);
        assert_int_equal(system(cmd), 0);
        unlink(path);
    }
    free(doc);
    result_list_free(&l);
}

static void test_empty_and_all_pass(void **state)
{
    (void)state;
    result_list_t l = {0};
    char *doc = render(&l, NULL, NAN);
    xml_t x;
    if (parse_xml(&x, doc) != 0)
        fail_msg("not well-formed: %s\n%s", x.err, doc);
    assert_string_equal(attr(&x.el[1], "tests"), "0");
    assert_string_equal(attr(&x.el[1], "name"), "kreplay");
    assert_string_equal(attr(&x.el[1], "time"), "0.000");
    free(doc);

    row(&l, "D", 128, 256, 64, "w4a8.perblock", "R_exact", VERDICT_PASS, 1e-3, "ok");
    row(&l, "D", 128, 256, 64, "w4a8.perblock", "R_source", VERDICT_UNSUPPORTED, NAN, "n/a");
    doc = render(&l, "s", 1);
    if (parse_xml(&x, doc) != 0)
        fail_msg("not well-formed: %s\n%s", x.err, doc);
    assert_int_equal(count(&x, "testcase"), 1);
    assert_int_equal(count(&x, "skipped"), 0);   /* not every row unsupported: it ran */
    assert_int_equal(count(&x, "failure"), 0);
    free(doc);
    result_list_free(&l);
}

/* Provenance on the testsuite, ERROR as <error> (counted in errors, not
 * failures), and the diagnosis in system-out. */
static void test_provenance_errors_and_diagnosis(void **state)
{
    (void)state;
    result_list_t l = {0};
    row(&l, "E", 512, 3072, 17, "w4a8.folded", "-", VERDICT_ERROR, NAN, "cannot read x");
    result_t *w = row(&l, "F", 512, 3072, 17, "w4a8.folded", "R_exact", VERDICT_WRONG, 0.03,
                      "rel_fro 0.03 > 0.01");
    snprintf(w->diagnosis, sizeof w->diagnosis, "|out| is 1/35.0 of R_exact: a scale <off>");
    row(&l, "F", 512, 3072, 17, "w4a4.aiter", "R_exact", VERDICT_PASS, 1e-3, "ok");
    results_meta_t meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.time_utc, sizeof meta.time_utc, "2026-12-01T21:30:05Z");
    snprintf(meta.host, sizeof meta.host, "ci-runner-7");
    snprintf(meta.git_commit, sizeof meta.git_commit, "ad4842d1b2c3");
    snprintf(meta.suite_hash, sizeof meta.suite_hash, "fnv:1234+fnv:abcd");
    snprintf(meta.policy, sizeof meta.policy, "cases/policies/default.yaml");
    snprintf(meta.blas_core, sizeof meta.blas_core, "Haswell");
    junit_run_t run = {.suite_name = "nightly", .seconds = 3, .meta = &meta};
    char *doc = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&doc, &len);
    assert_int_equal(junit_write_run(fp, &run, &l), 0);
    fclose(fp);
    xml_t x;
    if (parse_xml(&x, doc) != 0)
        fail_msg("not well-formed: %s\n%s", x.err, doc);
    const elem_t *suite = &x.el[1];
    assert_string_equal(attr(suite, "tests"), "3");
    assert_string_equal(attr(suite, "errors"), "1");
    assert_string_equal(attr(suite, "failures"), "1");
    assert_string_equal(attr(suite, "timestamp"), "2026-12-01T21:30:05");
    assert_string_equal(attr(suite, "hostname"), "ci-runner-7");
    const char *want[][2] = {{"commit", "ad4842d1b2c3"}, {"suite_hash", "fnv:1234+fnv:abcd"},
                             {"policy", "cases/policies/default.yaml"}, {"blas_core", "Haswell"}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        int found = 0;
        for (int i = 0; i < x.n; i++)
            if (!strcmp(x.el[i].name, "property") && !strcmp(attr(&x.el[i], "name"), want[k][0])) {
                assert_string_equal(attr(&x.el[i], "value"), want[k][1]);
                found = 1;
            }
        if (!found)
            fail_msg("no property %s in\n%s", want[k][0], doc);
    }
    assert_int_equal(count(&x, "error"), 1);
    assert_int_equal(count(&x, "failure"), 1);
    int child;
    testcase(&x, "E:w4a8.folded", &child);
    assert_string_equal(x.el[child].name, "error");
    assert_string_equal(attr(&x.el[child], "type"), "ERROR");
    assert_non_null(strstr(attr(&x.el[child], "message"), "cannot read x"));
    testcase(&x, "F:w4a8.folded", &child);
    assert_string_equal(x.el[child].name, "failure");
    assert_string_equal(x.el[child + 1].name, "system-out");
    assert_non_null(strstr(x.el[child + 1].text,
                           "diagnosis: |out| is 1/35.0 of R_exact: a scale <off>"));
    testcase(&x, "F:w4a4.aiter", &child);
    assert_int_equal(child, -1);   /* passing, nothing diagnosed: no system-out */
    free(doc);
    result_list_free(&l);
}

KR_TEST_MAIN(
    test_counts_and_structure, test_empty_and_all_pass, test_provenance_errors_and_diagnosis);
