/* scripts/check_code_size.py on planted trees: a 200-line function (brace on
 * its own line, and `) {`), a duplicate that differs only in names, a data
 * table that may repeat; and on this repository with its CI budget. */
/* ctest-labels: lint */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "python_ready.h"
#include "test_main.h"
#include "test_support.h"

/* Runs the checker on `root` with extra arguments; returns its exit code and
 * its output in *output (caller frees). */
static int run_checker(const char *root, const char *args, char **output)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s/scripts/check_code_size.py' --root '%s' %s 2>&1",
             KREPLAY_SOURCE_DIR, root, args);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap);
    while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0)
        len += got;
    buf[len] = '\0';
    int status = pclose(p);
    *output = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void fresh_tree(char *root, size_t cap, const char *name)
{
    test_tmp_path(root, cap, name);
    assert_int_equal(mkdir(root, 0755), 0);
}

static FILE *open_in(const char *root, const char *rel)
{
    char path[8200];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    return f;
}

/* A function of exactly `lines` lines from its name to its closing brace;
 * each body line differs (a running sum), so it is no duplicate of itself. */
static void write_function(FILE *f, const char *name, int lines, int brace_own_line)
{
    fprintf(f, "static int %s(int a)%s", name, brace_own_line ? "\n{\n" : " {\n");
    int body = lines - (brace_own_line ? 4 : 3);
    fprintf(f, "    int s = a;\n");
    for (int i = 1; i < body; i++)
        fprintf(f, "    s = s * %d + (a >> %d);\n", i % 7 + 2, i % 5);
    fprintf(f, "    return s;\n}\n\n");
}

/* Both brace styles in one tree: `{` on its own line (long.c) and `) {`
 * (sub/long.cu); a function of exactly 150 lines is within the limit. */
static void test_long_functions(void **state)
{
    (void)state;
    char root[4096], sub[4200], *out;
    fresh_tree(root, sizeof root, "size-long");
    snprintf(sub, sizeof sub, "%s/sub", root);
    assert_int_equal(mkdir(sub, 0755), 0);
    FILE *own_line = open_in(root, "long.c"), *same_line = open_in(root, "sub/long.cu");
    write_function(same_line, "planted_long_cu", 200, 0);
    write_function(same_line, "at_limit", 150, 0);
    fclose(same_line);
    fprintf(own_line, "/* a planted long function */\n#include <stdio.h>\n\n");
    write_function(own_line, "short_one", 20, 1);
    write_function(own_line, "planted_long", 200, 1);
    fclose(own_line);
    assert_int_equal(run_checker(root, "", &out), 1);
    /* short_one is lines 4-23 and a blank line, so planted_long starts at 25. */
    assert_non_null(strstr(out, "long.c:25:planted_long: function of 200 lines (limit 150)"));
    assert_non_null(strstr(out, "sub/long.cu:1:planted_long_cu: function of 200 lines"));
    assert_null(strstr(out, "short_one"));
    assert_null(strstr(out, "at_limit"));
    free(out);
    /* Excused by name, each is still reported, and no longer fails. */
    assert_int_equal(run_checker(root, "--allow-long sub/long.cu:planted_long_cu --allow-long long.c:planted_long",
                                 &out), 0);
    assert_non_null(strstr(out, "planted_long_cu: function of 200 lines (limit 150) (allowed for now"));
    free(out);
}

/* Nine lines of logic written twice with other names, numbers and strings:
 * one pair, naming both functions; under budget 1 it passes, under 0 not. */
/* A file over the line limit fails whatever its functions; C and Python alike. */
static void test_long_files(void **state)
{
    (void)state;
    char root[4096], *out;
    fresh_tree(root, sizeof root, "size-files");
    const struct {
        const char *name, *format;
        int lines;
    } files[] = {{"big.c", "/* line %d */\n", 900}, {"big.py", "# line %d\n", 900},
                 {"ok.c", "/* line %d */\n", 800}};    /* comments count; ok.c is at the limit */
    for (size_t f = 0; f < sizeof files / sizeof files[0]; f++) {
        FILE *fp = open_in(root, files[f].name);
        for (int i = 0; i < files[f].lines; i++)
            fprintf(fp, files[f].format, i);
        fclose(fp);
    }
    const int failed = run_checker(root, "", &out);
    assert_non_null(strstr(out, "big.c: file of 900 lines (limit 800)"));
    assert_non_null(strstr(out, "big.py: file of 900 lines (limit 800)"));
    assert_null(strstr(out, "ok.c: file of"));
    free(out);
    assert_int_equal(failed, 1);
    assert_int_equal(run_checker(root, "--max-file-lines 1000", &out), 0);
    free(out);
}

static void test_planted_duplicate(void **state)
{
    (void)state;
    static const char *const copies[2][4] = {
        {"scale_rows", "rows", "weights", "\"rows\""},
        {"clamp_cols", "cols", "factors", "\"cols\""},
    };
    char root[4096], *out;
    fresh_tree(root, sizeof root, "size-dup");
    for (int c = 0; c < 2; c++) {
        FILE *f = open_in(root, c == 0 ? "a.c" : "b.c");
        fprintf(f,
                "int %s(float *%s, const float *%s, int n)\n{\n"
                "    if (n <= %d)\n        return -1;\n"
                "    for (int i = 0; i < n; i++) {\n"
                "        float v = %s[i] * %s[i %% %d];\n"
                "        if (v != v)\n            puts(%s);\n"
                "        %s[i] = v > 1.0f ? 1.0f : v;\n    }\n"
                "    return n;\n}\n",
                copies[c][0], copies[c][1], copies[c][2], c, copies[c][1], copies[c][2], 3 + c,
                copies[c][3], copies[c][1]);
        fclose(f);
    }
    assert_int_equal(run_checker(root, "--max-pairs 0", &out), 1);
    assert_non_null(strstr(out, "1 duplicate pairs (budget 0)"));
    assert_non_null(strstr(out, "between a.c:scale_rows and b.c:clamp_cols"));
    assert_non_null(strstr(out, "exceed the budget of 0"));
    free(out);
    assert_int_equal(run_checker(root, "--max-pairs 1", &out), 0);
    free(out);
}

/* Two equal tables of struct initialisers are data, not a duplicate; the
 * same rows written as statements are. */
static void test_data_tables_exempt(void **state)
{
    (void)state;
    char root[4096], *out;
    fresh_tree(root, sizeof root, "size-table");
    FILE *f = open_in(root, "tables.c");
    fprintf(f, "struct row { const char *name; int a, b; };\n");
    for (int t = 0; t < 2; t++) {
        fprintf(f, "static const struct row table_%d[] = {\n", t);
        for (int i = 0; i < 12; i++)
            fprintf(f, "    {\"r%d\", %d, %d},\n", i, i * (t + 1), i % (3 + t));
        fprintf(f, "};\n");
    }
    fclose(f);
    assert_int_equal(run_checker(root, "--max-pairs 0", &out), 0);
    assert_non_null(strstr(out, "0 duplicate pairs"));
    free(out);

    f = open_in(root, "statements.c");
    for (int t = 0; t < 2; t++) {
        fprintf(f, "void fill_%d(struct row *r)\n{\n", t);
        fprintf(f, "    int s = r[%d].a;\n    if (s > %d)\n        s -= r[1].b;\n", t, t + 4);
        fprintf(f, "    r[2].a = s * %d;\n    while (r[3].b < s)\n        r[3].b <<= 1;\n", t + 2);
        fprintf(f, "    r[0].name = r[%d].name;\n}\n", t + 1);
    }
    fclose(f);
    assert_int_equal(run_checker(root, "--max-pairs 0", &out), 1);
    assert_non_null(strstr(out, "between statements.c:fill_0 and statements.c:fill_1"));
    free(out);
}

/* The repository itself, as CI checks it (scripts/check_code_size.sh). */
static void test_repository_within_limits(void **state)
{
    (void)state;
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/scripts/check_code_size.sh'", KREPLAY_SOURCE_DIR);
    assert_int_equal(system(cmd), 0);
}

KR_TEST_MAIN_UNLESS(test_python_lacks("sys", "/usr/bin/python3 is not available: skipped"),
    test_long_functions, test_long_files, test_planted_duplicate, test_data_tables_exempt,
    test_repository_within_limits);
