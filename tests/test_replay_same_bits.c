/* ctest-labels: blas-bits */
/* The replay's outputs, metrics and verdicts are those of the code before
 * the reference and model paths were made faster (main at 461f6ee): the
 * fixture tests/fixtures/same_bits/rows_<core>.txt holds, for the bundled
 * samples and a synthetic prefill case (1100 x 256 x 2048, replayed in
 * three 512-row blocks under a 16 MiB budget, the old default), every row's
 * verdict, output digest, metrics (as hex floats) and ULP histogram as that
 * code wrote them, in-process with the default options.  Notes and diagnoses
 * are left out: their wording, and the policy file's path and line numbers
 * in them, change with the judgement, not with the bits.
 * The references are OpenBLAS sgemm, whose bits depend on the core: a
 * fixture is kept per core (Zen, Haswell, SkylakeX, Cooperlake, Prescott),
 * and a core without one skips.
 *
 * KREPLAY_WRITE_SAME_BITS=PATH writes the fixture instead.  How they were
 * made: this file as of b095058 (the same rows, before the test helpers
 * moved to tests/support), built at 461f6ee against OpenBLAS 0.3.21; Zen on
 * a 2-core EPYC, the others on a 2-core Xeon with AVX-512 and BF16 with
 * OPENBLAS_CORETYPE set.  The Haswell file written there is byte for byte
 * the Zen file written on the EPYC; Cooperlake's differs from SkylakeX's in
 * 91 of 162 rows (its sgemm is its own). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blas_info.h"
#include "case_io.h"
#include "case_load.h"
#include "replay.h"
#include "synth.h"
#include "test_cases.h"
#include "test_main.h"
#include "test_support.h"

static const char *const SAMPLES[] = {
    "gdn_in_proj_ba_N48_K5120_M17.h5",
    "gdn_in_proj_ba_N96_K5120_M64.h5",
    "gdn_out_proj_slice_N512_K3072_M17_nanhead.h5",
    "moe_gate_N256_K2048_M8.h5",
    "prefill_N256_K2048_M300_kn_wperm.h5",
};

/* One row as a line: everything a replay decides, no timing, no path. */
static void format_row(const result_t *r, char *buf, size_t cap)
{
    const metrics_t *m = &r->metrics;
    const ulp_stats_t *u = &r->ulp;
    int n = snprintf(buf, cap,
                     "%s|%s|%s|%s|%s|%lld|%lld|%a|%a|%a|%lld|%a|%lld|%a|%a|%lld|%lld|%lld|%llu|",
                     r->case_name, r->kernel, r->reference, verdict_name(r->verdict),
                     r->out_digest, (long long)m->count, (long long)m->finite_count, m->rel_fro,
                     m->nmse, m->max_abs, (long long)m->max_abs_index, m->worst_row_rel,
                     (long long)m->worst_row, m->cosine, m->mag_ratio,
                     (long long)(m->out_nf.nan + m->out_nf.pos_inf + m->out_nf.neg_inf),
                     (long long)u->count, (long long)u->identical, (unsigned long long)u->max_ulp);
    for (int b = 0; b < ULP_BIN_COUNT && n > 0 && (size_t)n < cap; b++)
        n += snprintf(buf + n, cap - (size_t)n, "%lld,", (long long)u->bins[b]);
}

static void replay_into(const case_t *c, int64_t block_bytes, FILE *out)
{
    replay_options_t opt;
    replay_options_default(&opt);
    opt.block_bytes = block_bytes;
    result_list_t rows = {0};
    kr_error_t err = {{0}};
    if (replay_case(c, &opt, &rows, &err)) {
        print_error("replay %s: %s\n", c->path ? c->path : "synth", err.msg);
        fail();
    }
    char line[4096];
    for (int64_t i = 0; i < rows.count; i++) {
        format_row(&rows.rows[i], line, sizeof line);
        fprintf(out, "%s\n", line);
    }
    result_list_free(&rows);
}

/* Every row of the set, one line each, into out. */
static void replay_set(FILE *out)
{
    kr_error_t err = {{0}};
    for (size_t i = 0; i < sizeof SAMPLES / sizeof SAMPLES[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/cases/samples/%s", KREPLAY_SOURCE_DIR, SAMPLES[i]);
        case_t c;
        if (case_load(path, &c, NULL, &err)) {
            print_error("%s\n", err.msg);
            fail();
        }
        replay_into(&c, 0, out);
        case_free(&c);
    }
    synth_params_t p = test_synth_params(1100, 256, 2048, 7);
    p.nan_rows = 3;
    p.nan_cols = 64;
    p.nan_col0 = 128;
    case_t c;
    assert_int_equal(synth_case(&p, &c, &err), 0);
    /* The old default budget, so the blocks are the fixture's: merged
     * norms are associated by block (equal to fp64 rounding only, which
     * test_replay_blocks checks); everything else is exact either way. */
    replay_into(&c, (int64_t)16 << 20, out);
    case_free(&c);
}

static char *slurp(FILE *f)
{
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    return s;
}

static void test_same_rows_as_before(void **state)
{
    (void)state;
    blas_info_t b;
    blas_info_get(&b);
    const char *write = getenv("KREPLAY_WRITE_SAME_BITS");
    if (write && write[0]) {
        FILE *f = fopen(write, "w");
        assert_non_null(f);
        replay_set(f);
        fclose(f);
        return;
    }
    char fixture[1024];
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/same_bits/rows_%s.txt", KREPLAY_SOURCE_DIR,
             b.core);
    FILE *f = fopen(fixture, "r");
    if (!f) {
        print_message("no fixture for OpenBLAS core %s (%s): skipped\n", b.core, fixture);
        skip();
    }
    char *want = slurp(f);
    fclose(f);
    FILE *g = tmpfile();
    assert_non_null(g);
    replay_set(g);
    char *got = slurp(g);
    fclose(g);
    /* Line by line, so a failure names the row. */
    const char *w = want, *h = got;
    int line = 1, bad = 0;
    while (*w || *h) {
        const size_t lw = strcspn(w, "\n"), lh = strcspn(h, "\n");
        if (lw != lh || strncmp(w, h, lw) != 0) {
            print_error("row %d differs:\n  before: %.*s\n  now:    %.*s\n", line, (int)lw, w,
                        (int)lh, h);
            bad++;
        }
        w += lw + (w[lw] == '\n');
        h += lh + (h[lh] == '\n');
        line++;
    }
    assert_true(line > 100); /* the set has well over a hundred rows */
    free(want);
    free(got);
    assert_int_equal(bad, 0);
}

/* A replay told that nobody reads its digests (a table printed alone)
 * leaves case_id and out_digest empty and changes nothing else: every row
 * of the samples and of a NaN-headed synthetic case, field by field. */
static void test_skipped_identities_change_nothing_else(void **state)
{
    (void)state;
    kr_error_t err = {{0}};
    for (size_t i = 0; i <= sizeof SAMPLES / sizeof SAMPLES[0]; i++) {
        case_t c;
        if (i < sizeof SAMPLES / sizeof SAMPLES[0]) {
            char path[1024];
            snprintf(path, sizeof path, "%s/cases/samples/%s", KREPLAY_SOURCE_DIR, SAMPLES[i]);
            if (case_load(path, &c, NULL, &err))
                fail_msg("%s", err.msg);
        } else {
            synth_params_t p = test_synth_params(40, 256, 2048, 9);
            p.nan_rows = 2;
            assert_int_equal(synth_case(&p, &c, &err), 0);
        }
        result_list_t with = {0}, without = {0};
        replay_options_t opt;
        replay_options_default(&opt);
        assert_int_equal(replay_case(&c, &opt, &with, &err), 0);
        opt.skip_identities = 1;
        assert_int_equal(replay_case(&c, &opt, &without, &err), 0);
        assert_int_equal(without.count, with.count);
        int digests = 0;
        for (int64_t r = 0; r < with.count; r++) {
            const result_t *a = &with.rows[r];
            result_t b = without.rows[r];
            assert_int_equal(strlen(a->case_id), 16);
            assert_string_equal(b.case_id, "");
            assert_string_equal(b.out_digest, "");
            digests += a->out_digest[0] != '\0';
            memcpy(b.out_digest, a->out_digest, sizeof b.out_digest);
            char la[4096], lb[4096];
            format_row(a, la, sizeof la);
            format_row(&b, lb, sizeof lb);
            assert_string_equal(lb, la);
            assert_string_equal(b.note, a->note);
            assert_string_equal(b.diagnosis, a->diagnosis);
            assert_true(b.threshold == a->threshold);
        }
        assert_true(digests > 0);
        result_list_free(&with);
        result_list_free(&without);
        case_free(&c);
    }
}

/* The rows of kernel `name` (in order) from a replay of c with the kernel
 * patterns given and the recorded outputs left out. */
static void rows_of(const case_t *c, const char *patterns, const char *name, result_list_t *out)
{
    replay_options_t opt;
    replay_options_default(&opt);
    opt.kernel_patterns = patterns;
    opt.include_recorded = 0;
    result_list_t all = {0};
    kr_error_t err = {{0}};
    if (replay_case(c, &opt, &all, &err))
        fail_msg("%s", err.msg);
    for (int64_t i = 0; i < all.count; i++)
        if (!strcmp(all.rows[i].kernel, name))
            *result_list_add(out) = all.rows[i];
    result_list_free(&all);
}

/* The last kernel of a replay computes R_source into its R_exact's buffer
 * once its R_exact row is done; a kernel with another after it keeps both.
 * Its rows are the same either way (R_source and R_sanitized included: the
 * synthetic case has NaN rows). */
static void test_source_in_exact_buffer_same_rows(void **state)
{
    (void)state;
    kr_error_t err = {{0}};
    for (int i = 0; i < 2; i++) {
        case_t c;
        if (i == 0) {
            char path[1024];
            snprintf(path, sizeof path, "%s/cases/samples/%s", KREPLAY_SOURCE_DIR, SAMPLES[4]);
            if (case_load(path, &c, NULL, &err))
                fail_msg("%s", err.msg);
        } else {
            synth_params_t p = test_synth_params(40, 256, 2048, 11);
            p.nan_rows = 2;
            p.nan_cols = 64;
            p.nan_col0 = 128;
            assert_int_equal(synth_case(&p, &c, &err), 0);
        }
        result_list_t last = {0}, not_last = {0};
        rows_of(&c, "w4a8.perblock", "w4a8.perblock", &last);
        rows_of(&c, "w4a8.perblock,w4a8.folded", "w4a8.perblock", &not_last);
        assert_int_equal(last.count, i == 0 ? 2 : 3);  /* R_exact, R_source (, R_sanitized) */
        assert_int_equal(not_last.count, last.count);
        for (int64_t r = 0; r < last.count; r++) {
            char a[4096], b[4096];
            format_row(&last.rows[r], a, sizeof a);
            format_row(&not_last.rows[r], b, sizeof b);
            assert_string_equal(a, b);
            assert_string_equal(last.rows[r].note, not_last.rows[r].note);
        }
        result_list_free(&last);
        result_list_free(&not_last);
        case_free(&c);
    }
}

KR_TEST_MAIN(test_same_rows_as_before, test_skipped_identities_change_nothing_else,
             test_source_in_exact_buffer_same_rows);
