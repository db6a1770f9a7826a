/* The README is a test: every command of its "The nightly gate" block and
 * its "Using it" block runs, as written, on a fresh copy of cases/ in a
 * scratch directory, and must exit as documented (0 unless its comment says
 * "exit N: ..." or "(exit N without a GPU)") and print what it promises.
 *
 * Substituted: build/kreplay -> the built binary; CASE.h5 -> a bundled
 * sample; CASES... -> cases/samples; DIR -> a fresh directory; the torch dump
 * names -> the test fixture dump; ./libmykernels.so -> the example plugin;
 * optional [...] parts are dropped; `ctest -L nightly` lists (-N) the build
 * directory's nightly tests instead of running them.  Two commands run
 * smaller than written, to keep the test to minutes on two cores:
 * calibrate --seeds 1-50 -> 1-2, and compare --synth production -> two
 * catalogue shapes.  The source tree must be untouched afterwards. */
/* ctest-labels: readme;slow */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test_main.h"
#include "test_support.h"

#define MAX_COMMANDS 64

static char scratch[512];
static char build_dir[1024];


/* s with every occurrence of from replaced by to (malloc'd); whole words
 * only when word is set. */
static char *replace(const char *s, const char *from, const char *to, int word)
{
    size_t lf = strlen(from), lt = strlen(to);
    char *out = malloc(strlen(s) * (lt + 1) + 1), *o = out;
    for (const char *p = s; *p;) {
        int at = strncmp(p, from, lf) == 0;
        if (at && word) {
            char before = p == s ? ' ' : p[-1], after = p[lf];
            at = !(before == '_' || before == '-' || (before >= 'A' && before <= 'Z')) &&
                 !(after == '_' || (after >= 'A' && after <= 'Z') || (after >= 'a' && after <= 'z'));
        }
        if (at) {
            memcpy(o, to, lt);
            o += lt;
            p += lf;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

static void subst(char **cmd, const char *from, const char *to, int word)
{
    char *r = replace(*cmd, from, to, word);
    free(*cmd);
    *cmd = r;
}

typedef struct {
    char *cmd;       /* as run */
    char *written;   /* as the README writes it */
    int expect;      /* documented exit code; -2: 2 without a GPU */
} readme_command_t;

/* The command lines of the first ```sh block after the heading. */
static int block_commands(const char *readme, const char *heading, readme_command_t *cmds, int n)
{
    const char *h = strstr(readme, heading);
    assert_non_null(h);
    const char *b = strstr(h, "```sh\n");
    assert_non_null(b);
    b += 6;
    const char *e = strstr(b, "```");
    assert_non_null(e);
    for (const char *line = b; line < e;) {
        const char *eol = strchr(line, '\n');
        char text[2048];
        snprintf(text, sizeof text, "%.*s", (int)(eol - line), line);
        line = eol + 1;
        if (!text[0] || text[0] == '#')
            continue;
        /* "  # comment": the comment holds the documented exit code. */
        int expect = 0;
        char *hash = strstr(text, "  #");
        if (hash) {
            char *ex = strstr(hash, "exit ");
            if (ex && ex[5] >= '0' && ex[5] <= '9' && (ex[6] == ':' || !strncmp(ex + 6, " without a GPU", 14)))
                expect = ex[6] == ':' ? ex[5] - '0' : -2;
            *hash = '\0';
        }
        for (size_t k = strlen(text); k > 0 && text[k - 1] == ' '; k--)
            text[k - 1] = '\0';
        assert_true(n < MAX_COMMANDS);
        cmds[n].written = strdup(text);
        cmds[n].cmd = strdup(text);
        cmds[n].expect = expect;
        n++;
    }
    return n;
}

static void drop_optional(char *s)
{
    char *o = s;
    for (char *p = s; *p;) {
        if (p[0] == ' ' && p[1] == '[') {
            char *close = strchr(p, ']');
            if (close) {
                p = close + 1;
                continue;
            }
        }
        *o++ = *p++;
    }
    *o = '\0';
}

static void prepare(readme_command_t *c, int index)
{
    drop_optional(c->cmd);
    char bin[1200], dir[64], plugin[1200];
    snprintf(bin, sizeof bin, "'%s'", KREPLAY_BINARY);
    snprintf(dir, sizeof dir, "out/dir%d", index);
    snprintf(plugin, sizeof plugin, "%s/plugins/libkr_plugin_example_w4a8.so", build_dir);
    subst(&c->cmd, "build/kreplay", bin, 0);
    subst(&c->cmd, "CASE.h5", "cases/samples/moe_gate_N256_K2048_M8.h5", 0);
    subst(&c->cmd, "CASES...", "cases/samples", 0);
    subst(&c->cmd, "DIR", dir, 1);
    subst(&c->cmd, "./libmykernels.so", plugin, 0);
    subst(&c->cmd, "--seeds 1-50", "--seeds 1-2", 0);
    subst(&c->cmd, "--synth production", "--synth moe_gate,512x3072", 0);
    if (!strcmp(c->cmd, "ctest -L nightly")) {
        free(c->cmd);
        char t[1200];
        snprintf(t, sizeof t, "ctest --test-dir '%s' -N -L nightly", build_dir);
        c->cmd = strdup(t);
    }
}

/* What a command must print or write, beyond its exit code. */
static void check_output(const readme_command_t *c, const char *out)
{
    static const struct {
        const char *in_command, *in_output;
    } promises[] = {
        {"replay --json", "\"results\""},
        {"replay --oracle", "ref_f32_vs_f64"},
        {"--inject scale-const", "a scale off by a constant factor"},
        {"replay --vs", "model:w4a8.folded"},
        {"inspect", "input health"},
        {"list kernels --verbose", "accumulation"},
        {"list shapes", "shape"},
        {"compare", "B/A"},
        {"import", "-> badcase.h5"},
        {"reduce ", "replay the reduced case:"},
        {"baseline update", "baseline baselines/main.h5 <- "},
        {"-o runs/first", "gate PASSED"},
        {"-o runs/today", "0 missing"},
        {"ulp-nudge", "rerun: "},
        {"calibrate", "policy.yaml"},
        {"ctest -L nightly", "nightly_"},
        {"report runs", "report.html"},
        {"-o out/run1", "report: out/run1/report.html"},
    };
    for (size_t i = 0; i < sizeof promises / sizeof promises[0]; i++)
        if (strstr(c->written, promises[i].in_command) && !strstr(out, promises[i].in_output))
            fail_msg("README command '%s' did not print '%s':\n%.3000s", c->written, promises[i].in_output, out);
}

static void test_readme_commands(void **state)
{
    (void)state;
    char path[1200], cmd[4096], *out;
    snprintf(path, sizeof path, "%s/README.md", KREPLAY_SOURCE_DIR);
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    static char readme[1 << 17];
    size_t n = fread(readme, 1, sizeof readme - 1, fp);
    readme[n] = '\0';
    fclose(fp);

    readme_command_t cmds[MAX_COMMANDS];
    /* The gate block first: its runs/ are what the Using block's report reads. */
    int count = block_commands(readme, "\n## The nightly gate\n", cmds, 0);
    int gate_count = count;
    count = block_commands(readme, "\n## Using it\n", cmds, count);
    assert_true(gate_count >= 5);
    assert_true(count - gate_count >= 15);

    char status_before[1200];
    snprintf(status_before, sizeof status_before, "%s/readme-status-before", scratch);
    snprintf(cmd, sizeof cmd, "git -C '%s' status --porcelain --ignored=no > '%s' 2>/dev/null || true",
             KREPLAY_SOURCE_DIR, status_before);
    assert_int_equal(system(cmd), 0);

    for (int i = 0; i < count; i++) {
        readme_command_t *c = &cmds[i];
        prepare(c, i);
        snprintf(cmd, sizeof cmd, "cd '%s' && %s", scratch, c->cmd);
        int rc = test_sh(cmd, &out);
        int ok = c->expect == -2 ? (rc == 2 || (rc <= 1 && !strstr(out, "--device gpu:"))) : rc == c->expect;
        if (!ok)
            fail_msg("README command '%s' (run as '%s') exited %d, documented %d:\n%.3000s", c->written, c->cmd,
                     rc, c->expect == -2 ? 2 : c->expect, out);
        check_output(c, out);
        free(out);
    }
    /* The files the README says appear. */
    static const char *written[] = {"out/run1/results.json", "out/run1/results.csv", "out/run1/report.md",
                                    "outs.h5", "badcase.h5", "small.h5", "baselines/main.h5", "runs/today.xml",
                                    "runs/today/results.h5", "calib/policy.yaml"};
    for (size_t i = 0; i < sizeof written / sizeof written[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", scratch, written[i]);
        if (access(path, R_OK) != 0)
            fail_msg("the README's commands did not write %s", written[i]);
    }
    /* Nothing in the source tree changed. */
    snprintf(cmd, sizeof cmd,
             "git -C '%s' status --porcelain --ignored=no 2>/dev/null | cmp -s - '%s'", KREPLAY_SOURCE_DIR,
             status_before);
    assert_int_equal(system(cmd), 0);
    for (int i = 0; i < count; i++) {
        free(cmds[i].cmd);
        free(cmds[i].written);
    }
}

static int setup(void **state)
{
    (void)state;
    test_tmp_path(scratch, sizeof scratch, "readme");
    char bin[1024];
    snprintf(bin, sizeof bin, "%s", KREPLAY_BINARY);
    snprintf(build_dir, sizeof build_dir, "%s", dirname(bin));
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "mkdir -p '%s' && cp -r '%s/cases' '%s/' && cp '%s/tests/fixtures/pt/dump.pt' "
             "'%s/badcase_1234_5120_3072_17.pt' && cp '%s/tests/fixtures/pt/dump.pt' '%s/badcase.pt'",
             scratch, KREPLAY_SOURCE_DIR, scratch, KREPLAY_SOURCE_DIR, scratch, KREPLAY_SOURCE_DIR, scratch);
    return system(cmd) == 0 ? 0 : -1;
}

KR_TEST_MAIN_SETUP(setup, NULL, test_readme_commands);
