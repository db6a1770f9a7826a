/* The held-out bug corpus (tests/bugs/heldout/corpus.tsv, drawn and frozen
 * by make_corpus.py before the diagnosis was tuned): generated bugs (random
 * compositions of one or two grammar primitives, as C plugins and Python
 * kernels over W4A8, W4A4 and bf16) and hand-written ones, each replayed by
 * `kreplay replay` alone on its case; correct variants (fp64, Kahan and
 * pairwise sums, another split-K order, correct Python W4A4 and bf16
 * kernels) on every case.  Prints the score table, each half apart.
 *
 * Scoring, fixed with the corpus: a bug is caught when its row fails; its
 * fault is named when the diagnosis is a checked claim (the row's
 * diagnosis_checked) that names every primitive of a generated bug's spec
 * (or reproduces the output bit for bit on every sampled output under
 * another composition: "equivalent"), or matches a hand-written bug's
 * expected phrase.  Asserted: every failing row carries a diagnosis line,
 * every correct variant passes, and the held-out half's score does not fall
 * below what was measured when the corpus was first scored (19 of 28 named
 * and checked: 68%, under the 80% aimed for; the hand-written half, 0 of 8,
 * is where the grammar has no primitive).  The score is printed either way,
 * so a gain shows.  KREPLAY_HELDOUT_HALF=tune|heldout runs one half only
 * (the held-out score is then not asserted).
 *
 * Built a second time as test_heldout2_corpus (tests/CMakeLists.txt, with
 * -DHELDOUT2_NAMED_FLOOR): the second corpus (tests/bugs/heldout2/), drawn and
 * frozen before the diagnosis was tuned further; every bug of it is held out,
 * its Python kernels find the first corpus's modules too, and the first
 * corpus's correct variants (ids c_*) are replayed from the first corpus's
 * plugins and files.  Same table, score and assertions, its own floor.
 *
 * Built a third time as test_heldout3_corpus (-DHELDOUT3_NAMED_FLOOR): the
 * third corpus (tests/bugs/heldout3/), drawn and frozen before the diagnosis
 * was tuned on the second; every bug held out, the first and second corpora's
 * correct variants (c_*, c2_*) replayed from their own corpora. */
/* ctest-labels: slow;corpus */
/* The held-out half's first measured score: a floor against regressions. */
#define HELDOUT_NAMED_FLOOR 19
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kreplay_checks.h"
#include "python_ready.h"
#include "test_main.h"
#include "test_support.h"

#define HELDOUT_DIR KREPLAY_SOURCE_DIR "/tests/bugs/heldout"
#define HELDOUT2_DIR KREPLAY_SOURCE_DIR "/tests/bugs/heldout2"
#define HELDOUT3_DIR KREPLAY_SOURCE_DIR "/tests/bugs/heldout3"
#define MAX_ENTRIES 192

/* Each corpus's folder, its plugins' prefix (libkr_<prefix>_<id>.so) and the
 * id prefix of its correct variants, which the later corpora list again. */
typedef struct {
    const char *dir, *prefix, *correct_ids;
} home_t;

static const home_t homes[] = {
    {HELDOUT_DIR, "heldout", "c_"}, {HELDOUT2_DIR, "heldout2", "c2_"}, {HELDOUT3_DIR, "heldout3", "c3_"}};

/* Which corpus this build replays (an index of homes), its Python path, its
 * floor and how many entries it has at least. */
typedef struct {
    int home;
    const char *pythonpath, *scratch;
    int named_floor, min_entries;
    const char *held_word;      /* what its half 1 is now: still held out, or tuned on since */
} corpus_t;

#if defined HELDOUT3_NAMED_FLOOR
/* 36 generated bugs, the first corpus's six and the second's two correct variants on four cases */
static const corpus_t corpus = {2, HELDOUT3_DIR ":" HELDOUT2_DIR ":" HELDOUT_DIR, "heldout3_corpus",
                                HELDOUT3_NAMED_FLOOR, 36 + 8 * 4, "held-out"};
#elif defined HELDOUT2_NAMED_FLOOR
/* 36 generated bugs, the first corpus's six correct variants on four cases */
/* held out when first scored (40 of 51), tuned on since */
static const corpus_t corpus = {1, HELDOUT2_DIR ":" HELDOUT_DIR, "heldout2_corpus", HELDOUT2_NAMED_FLOOR,
                                36 + 6 * 4, "once held-out, since tuned"};
#else
/* its held-out half was looked at and tuned on after its first score */
static const corpus_t corpus = {0, HELDOUT_DIR, "heldout_corpus", HELDOUT_NAMED_FLOOR, 40 + 6, "once held-out, since tuned"};
#endif

typedef struct {
    char id[40], origin[16], lang[8], route[8], cas[16], spec[160], expect[512];
    int half;
} entry_t;

typedef struct {
    char name[16], args[256];
} case_def_t;

static entry_t entries[MAX_ENTRIES];
static int n_entries;
static case_def_t cases[8];
static int n_cases;
static char g_dir[512];

/* grammar.c's aliases: the names a report gives these primitives. */
static const char *const aliases[][2] = {
    {"w-k:swap2", "nibble-order"}, {"w:abs", "e2m1-sign"}, {"ws-blocks:next", "scale-k-next"},
    {"ws-blocks:prev", "scale-k-prev"}, {"ws-rows:next", "scale-n-next"},
    {"ws-rows:prev", "scale-n-prev"}, {"ws:kn-as-nk", "scale-kn-read-as-nk"},
    {"ws:nk-as-kn", "scale-nk-read-as-kn"}, {"ws:twice", "scale-twice"},
    {"ws:bias128", "e8m0-bias-128"}, {"ws:bias126", "e8m0-bias-126"},
    {"x:e4m3fnuz", "fp8-e4m3fnuz"}, {"x:e5m2", "fp8-e5m2"}, {"x:e4m3fn", "fp8-e4m3fn"},
    {"xs:inverted", "x_scale-inverted"}, {"xs:by-column", "x_scale-by-column"},
    {"xs:missing", "x_scale-missing"}, {"xs:twice", "x_scale-twice"},
};

/* A field cut short would score a bug against a phrase nobody wrote (an
 * expected phrase cut mid-group no longer compiles): refused. */
static void field(char **p, char *dst, size_t cap)
{
    char *tab = strchr(*p, '\t');
    size_t len = tab ? (size_t)(tab - *p) : strcspn(*p, "\n");
    if (len >= cap) {
        print_error("corpus field of %zu characters, over the %zu this test holds: %.60s...\n", len, cap - 1, *p);
        fail();
    }
    memcpy(dst, *p, len);
    dst[len] = '\0';
    *p = tab ? tab + 1 : *p + strlen(*p);
}

static void load_corpus(void)
{
    char path[600];
    snprintf(path, sizeof path, "%s/corpus.tsv", homes[corpus.home].dir);
    FILE *f = fopen(path, "r");
    if (!f)
        print_error("cannot open %s\n", path);
    assert_non_null(f);
    char line[4096];
    while (fgets(line, sizeof line, f)) {
        char *p = line;
        if (!strchr(line, '\n') && !feof(f)) {
            print_error("%s: a line over %zu characters\n", path, sizeof line - 1);
            fail();
        }
        if (!strncmp(line, "#case\t", 6)) {
            p += 6;
            field(&p, cases[n_cases].name, sizeof cases[n_cases].name);
            field(&p, cases[n_cases].args, sizeof cases[n_cases].args);
            n_cases++;
            continue;
        }
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (n_entries == MAX_ENTRIES) {
            print_error("%s: more than %d entries: raise MAX_ENTRIES\n", path, MAX_ENTRIES);
            fail();
        }
        entry_t *e = &entries[n_entries++];
        char half[8];
        field(&p, e->id, sizeof e->id);
        field(&p, e->origin, sizeof e->origin);
        field(&p, e->lang, sizeof e->lang);
        field(&p, e->route, sizeof e->route);
        field(&p, e->cas, sizeof e->cas);
        field(&p, e->spec, sizeof e->spec);
        field(&p, half, sizeof half);
        field(&p, e->expect, sizeof e->expect);
        e->half = atoi(half);
    }
    fclose(f);
}

static void make_cases(void)
{
    test_tmp_path(g_dir, sizeof g_dir, corpus.scratch);
    mkdir(g_dir, 0755);
    for (int i = 0; i < n_cases; i++) {
        char args[1024], *out = NULL;
        snprintf(args, sizeof args, "synth %s --out '%s' --name %s", cases[i].args, g_dir, cases[i].name);
        if (test_run_kreplay(args, &out) != 0) {
            print_error("kreplay %s failed:\n%s\n", args, out ? out : "");
            fail();
        }
        free(out);
    }
}

/* The corpus an entry's files are in: a correct variant's by its id's prefix
 * (an earlier corpus's, listed again), every other entry's this one's. */
static const home_t *home_of(const entry_t *e)
{
    if (!strcmp(e->origin, "correct"))
        for (size_t i = 0; i < sizeof homes / sizeof homes[0]; i++)
            if (!strncmp(e->id, homes[i].correct_ids, strlen(homes[i].correct_ids)))
                return &homes[i];
    return &homes[corpus.home];
}

/* The replay of one entry as JSON (stderr left out). */
static json_t *replay(const entry_t *e)
{
    char cmd[4096], path[1200], kernel[1024];
    snprintf(path, sizeof path, "%s/%s.h5", g_dir, e->cas);
    const char *bin = KREPLAY_BINARY, *slash = strrchr(bin, '/');
    const home_t *home = home_of(e);
    if (!strcmp(e->lang, "c")) {
        snprintf(kernel, sizeof kernel, "--plugin '%.*s/plugins/libkr_%s_%s.so' --kernels 'bug.*' --refs exact",
                 (int)(slash - bin), bin, home->prefix, e->id);
    } else {
        const char *file = e->origin[0] == 'g' ? "gen_kernels.py" : "hand_bugs.py";
        const char *as = !strcmp(e->route, "W4A4") ? "@w4a4.aiter" : !strcmp(e->route, "BF16") ? "@bf16.sequential" : "";
        snprintf(kernel, sizeof kernel, "--py '%s/%s:%s%s' --kernels 'py.*' --refs %s",
                 home->dir, file, e->id, as, !strcmp(e->route, "BF16") ? "source" : "exact");
    }
    snprintf(cmd, sizeof cmd,
             "PYTHONPATH='%s' KREPLAY_PYTHON=/usr/bin/python3 '%s' replay %s --no-recorded --reruns 1 "
             "--timeout 600 --json '%s' 2>/dev/null",
             corpus.pythonpath, bin, kernel, path);
    return test_command_json(cmd);
}

static int contains_name(const char *diag, const char *prim)
{
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcmp(aliases[i][0], prim))
            return strstr(diag, aliases[i][1]) != NULL;
    return strstr(diag, prim) != NULL;
}

/* "named", "equivalent" or NULL. */
static const char *names_fault(const entry_t *e, const char *full, int checked)
{
    if (!checked)
        return NULL;
    /* the claim alone: a runner-up that names the spec names nothing */
    char diag[4096];
    snprintf(diag, sizeof diag, "%s", full);
    char *runner = strstr(diag, "; runner-up");
    if (runner)
        *runner = '\0';
    if (!strcmp(e->origin, "hand")) {
        regex_t re;
        if (regcomp(&re, e->expect, REG_EXTENDED | REG_ICASE | REG_NOSUB)) {
            print_message("%s: its expected phrase is not a valid POSIX extended regex: counted as not named\n",
                          e->id);
            return NULL;
        }
        const int ok = regexec(&re, diag, 0, NULL, 0) == 0;
        regfree(&re);
        return ok ? "named" : NULL;
    }
    char spec[160];
    snprintf(spec, sizeof spec, "%s", e->spec);
    int all = 1;
    for (char *tok = strtok(spec, ","); tok; tok = strtok(NULL, ","))
        all &= contains_name(diag, tok);
    if (all)
        return "named";
    return strstr(diag, "bit-identical on all") ? "equivalent" : NULL;
}

static int wanted(const entry_t *e, const char *half)
{
    if (!half || !strcmp(half, "all"))
        return 1;
    if (e->half < 0)
        return 1;
    return !strcmp(half, "tune") ? e->half == 0 : e->half == 1;
}

static void test_corpus(void **state)
{
    (void)state;
    const char *skip = test_python_missing("numpy, torch");
    if (skip) {
        print_message("%s\n", skip);
        skip();
    }
    load_corpus();
    assert_true(n_entries >= corpus.min_entries);
    make_cases();
    const char *half = getenv("KREPLAY_HELDOUT_HALF");
    if (half && strcmp(half, "all") && strcmp(half, "tune") && strcmp(half, "heldout")) {
        print_error("KREPLAY_HELDOUT_HALF='%s': expected all, tune or heldout\n", half);
        fail();    /* a misspelt half would run the other one and pass */
    }
    int total[2] = {0, 0}, named[2] = {0, 0}, caught[2] = {0, 0}, silent = 0, false_alarms = 0;
    for (int h = -1; h <= 1; h++) {
        int rows = 0;
        for (int i = 0; i < n_entries; i++)
            rows += entries[i].half == h;
        if (!rows)
            continue;     /* the second corpus has no tuned half */
        printf("\n### %s\n\n| bug | route | case | spec | verdict | named | diagnosis |\n|---|---|---|---|---|---|---|\n",
               h < 0 ? "correct variants" : h == 0 ? "tuned half" : corpus.held_word);
        for (int i = 0; i < n_entries; i++) {
            const entry_t *e = &entries[i];
            if (e->half != h || !wanted(e, half))
                continue;
            json_t *root = replay(e);
            json_t *row = json_array_get(json_object_get(root, "results"), 0);
            const char *verdict = row ? test_json_str(row, "verdict") : "(no row)";
            const char *diag = row ? test_json_str(row, "diagnosis") : "";
            json_t *chk = row ? json_object_get(row, "diagnosis_checked") : NULL;
            const int checked = json_is_integer(chk) && json_integer_value(chk) == 1;
            const int failing = strcmp(verdict, "PASS") && strcmp(verdict, "POISONED_INPUT");
            const char *how = h < 0 ? "" : failing ? names_fault(e, diag, checked) : NULL;
            if (failing && !diag[0])
                silent++;
            if (h < 0) {
                false_alarms += failing;
            } else {
                total[h]++;
                caught[h] += failing;
                named[h] += how != NULL;
            }
            printf("| %s | %s | %s | %s | %s | %s | %s |\n", e->id, e->route, e->cas,
                   e->spec[0] ? e->spec : e->origin, verdict, h < 0 ? "" : how ? how : "no",
                   diag[0] ? diag : (row ? test_json_str(row, "note") : ""));
            fflush(stdout);
            json_decref(root);
        }
    }
    for (int h = 0; h < 2; h++)
        if (total[h])
            printf("\n%s half: %d bugs, %d caught, %d caught with the fault named and checked (%.0f%%)\n",
                   h ? corpus.held_word : "tuned", total[h], caught[h], named[h], 100.0 * named[h] / total[h]);
    printf("correct variants failing: %d; failing rows without a diagnosis line: %d\n", false_alarms, silent);
    fflush(stdout);
    char path[4096];
    for (int i = 0; i < n_cases; i++) {
        snprintf(path, sizeof path, "%s/%s.h5", g_dir, cases[i].name);
        remove(path);
    }
    rmdir(g_dir);
    if (total[0] + total[1] == 0) {
        print_error("KREPLAY_HELDOUT_HALF='%s' selects no bug of this corpus: nothing was scored\n", half ? half : "");
        fail();
    }
    assert_int_equal(false_alarms, 0);
    assert_int_equal(silent, 0);
    if (total[1]) {
        printf("%s half, target 80%%: %s\n", corpus.held_word, named[1] * 5 >= total[1] * 4 ? "met" : "not met");
        assert_true(named[1] >= corpus.named_floor);
    }
}

KR_TEST_MAIN(test_corpus);
