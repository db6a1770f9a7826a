/* The three held-out corpora's generated W4A8 bugs computed twice,
 * independently: each C plugin (tests/bugs/heldout/gen_plugin.c built with
 * its spec) and the Python kernel of the same spec (grammar_ref.run_spec through
 * heldout_operands.w4a8_kernel) replayed on the bug's case; their outputs
 * must be bit-identical (kreplay's out_digest), so a change to one of the
 * two definitions of the grammar's semantics that the other does not share
 * shows.  Outputs only: the replays run without the diagnosis. */
/* ctest-labels: slow;corpus */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kreplay_checks.h"
#include "python_ready.h"
#include "test_main.h"
#include "test_support.h"

#define BUGS_DIR KREPLAY_SOURCE_DIR "/tests/bugs"
#define MAX_BUGS 64

typedef struct {
    char id[40], cas[32], spec[160];
} gen_bug_t;

/* The generated C bugs of corpus `dir` (corpus.tsv); its #case lines synthesised into out/. */
static int load(const char *dir, const char *out, gen_bug_t *bugs)
{
    char path[600], line[1024];
    snprintf(path, sizeof path, "%s/%s/corpus.tsv", BUGS_DIR, dir);
    FILE *f = fopen(path, "r");
    if (!f)
        print_error("cannot open %s\n", path);
    assert_non_null(f);
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *col[8] = {0}, *p = line;
        int k = 0;
        for (; k < 8 && p; k++) {
            col[k] = p;
            p = strchr(p, '\t');
            if (p)
                *p++ = '\0';
        }
        if (!strcmp(col[0], "#case") && k >= 3) {
            char args[1024], *msg = NULL;
            snprintf(args, sizeof args, "synth %s --out '%s' --name %s-%s", col[2], out, dir, col[1]);
            if (test_run_kreplay(args, &msg) != 0)
                print_error("kreplay %s failed:\n%s\n", args, msg ? msg : "");
            free(msg);
        } else if (line[0] != '#' && k >= 6 && !strcmp(col[1], "generated") && !strcmp(col[2], "c") &&
                   !strcmp(col[3], "W4A8") && n < MAX_BUGS) {
            snprintf(bugs[n].id, sizeof bugs[n].id, "%.39s", col[0]);
            snprintf(bugs[n].cas, sizeof bugs[n].cas, "%.12s-%.12s", dir, col[4]);
            snprintf(bugs[n].spec, sizeof bugs[n].spec, "%.159s", col[5]);
            n++;
        }
    }
    fclose(f);
    return n;
}

/* out_digest of one replay (a copy; NULL when no row came back). */
static char *digest(const char *kernel, const char *case_path)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "PYTHONPATH='%s/heldout' KREPLAY_PYTHON=/usr/bin/python3 '%s' replay %s --refs exact --no-recorded "
             "--reruns 1 --no-diagnose --timeout 600 --json '%s' 2>/dev/null",
             BUGS_DIR, KREPLAY_BINARY, kernel, case_path);
    json_t *root = test_command_json(cmd);
    json_t *row = json_array_get(json_object_get(root, "results"), 0);
    const char *d = row ? test_json_str(row, "out_digest") : "";
    char *copy = d[0] ? strdup(d) : NULL;
    json_decref(root);
    return copy;
}

/* Every generated C bug of corpus `dir` against its Python twin; the number compared. */
static int compare_corpus(const char *dir, const char *tmp)
{
    gen_bug_t bugs[MAX_BUGS];
    const int n = load(dir, tmp, bugs);
    char module[700], text[16384] = "from heldout_operands import w4a8_kernel\n";
    for (int i = 0; i < n; i++) {
        char spec[400] = "", *save = NULL;
        for (char *tok = strtok_r(bugs[i].spec, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
            snprintf(spec + strlen(spec), sizeof spec - strlen(spec), "'%s', ", tok);
        snprintf(text + strlen(text), sizeof text - strlen(text), "%s = w4a8_kernel([%s])\n", bugs[i].id, spec);
    }
    snprintf(module, sizeof module, "%s/%s_twins.py", tmp, dir);
    assert_int_equal(test_write_text(module, text), 0);
    const char *bin = KREPLAY_BINARY, *slash = strrchr(bin, '/');
    for (int i = 0; i < n; i++) {
        char c_kernel[1200], py_kernel[1200], case_path[800];
        snprintf(case_path, sizeof case_path, "%s/%s.h5", tmp, bugs[i].cas);
        snprintf(c_kernel, sizeof c_kernel, "--plugin '%.*s/plugins/libkr_%s_%s.so' --kernels 'bug.*'",
                 (int)(slash - bin), bin, dir, bugs[i].id);
        snprintf(py_kernel, sizeof py_kernel, "--py '%s:%s' --kernels 'py.*'", module, bugs[i].id);
        char *c = digest(c_kernel, case_path), *py = digest(py_kernel, case_path);
        printf("%s %s on %s: C %s, Python %s\n", dir, bugs[i].id, bugs[i].cas, c ? c : "(no row)", py ? py : "(no row)");
        fflush(stdout);
        assert_non_null(c);
        assert_non_null(py);
        assert_string_equal(c, py);
        free(c);
        free(py);
    }
    return n;
}

static void test_c_and_python_bit_identical(void **state)
{
    /* the Python kernels and the runner that feeds them */
    const char *missing = test_python_missing("numpy, torch");
    (void)state;
    if (missing != NULL) {
        print_message("the Python twins cannot run: %s\n", missing);
        skip();
    }
    char tmp[512];
    assert_int_equal(test_tmp_dir(tmp, sizeof tmp, "heldout_identity"), 0);
    /* 16 generated C bugs in each corpus */
    assert_int_equal(compare_corpus("heldout", tmp), 16);
    assert_int_equal(compare_corpus("heldout2", tmp), 16);
    assert_int_equal(compare_corpus("heldout3", tmp), 16);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);     /* the cases: a quarter of a GB */
    assert_int_equal(system(cmd), 0);
}

KR_TEST_MAIN(test_c_and_python_bit_identical);
