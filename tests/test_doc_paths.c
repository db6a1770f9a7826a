/* scripts/check_doc_paths.sh: every repository path the documents cite
 * exists.  Run on the repository's own documents (they must pass), and on
 * scratch trees with planted bad paths, whose exact file:line messages are
 * asserted, beside near misses the check must leave alone (fenced commands,
 * placeholders, output names). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test_main.h"
#include "test_support.h"

/* Runs the checker on root; stdout and stderr into *output (caller frees).
 * Returns its exit status, or -1. */
static int run_check(const char *root, char **output)
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "'%s/scripts/check_doc_paths.sh' '%s' 2>&1", KREPLAY_SOURCE_DIR, root);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap);
    assert_non_null(buf);
    while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
    }
    buf[len] = '\0';
    const int status = pclose(p);
    *output = buf;
    return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void make_dirs(const char *path)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *s = buf + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        assert_true(mkdir(buf, 0755) == 0 || errno == EEXIST);
        *s = '/';
    }
    assert_true(mkdir(buf, 0755) == 0 || errno == EEXIST);
}

/* Writes root/rel (directories made as needed). */
static void put_file(const char *root, const char *rel, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    make_dirs(path);
    *slash = '/';
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

/* The repository's documents cite only paths that exist, and the check
 * really looked at them (a count of a few cited paths would mean the
 * extraction lost them). */
static void test_repository_documents_pass(void **state)
{
    (void)state;
    char *out = NULL;
    const int rc = run_check(KREPLAY_SOURCE_DIR, &out);
    if (rc != 0)
        fprintf(stderr, "%s", out);
    assert_int_equal(rc, 0);
    long checked = 0, docs = 0;
    const char *line = strstr(out, "check_doc_paths: ");
    assert_non_null(line);
    assert_int_equal(sscanf(line, "check_doc_paths: %ld cited paths in %ld documents", &checked, &docs), 2);
    assert_true(checked >= 150);
    assert_true(docs >= 20);
    free(out);
}

/* A scratch tree: the files the good citations name, and documents with
 * planted bad paths, each on a known line. */
static void plant_tree(const char *root)
{
    put_file(root, "harness/judge/judge.c", "int x;\n");
    put_file(root, "kernels/cpu/w4a8_perblock.c", "int y;\n");
    put_file(root, "README.md",
             "# scratch\n"                                                                /* 1 */
             "\n"                                                                         /* 2 */
             "Good: `harness/judge/judge.c`, `kernels/cpu/` and `kernels/cpu/*.c`.\n"     /* 3 */
             "Bad: the judgement was in `harness/verdict.c`.\n"                           /* 4 */
             "```sh\n"                                                                    /* 5 */
             "`fenced/nothere.c` is a command, not a citation\n"                          /* 6 */
             "```\n"                                                                      /* 7 */
             "Not paths: `RUNDIR/results.h5`, `plots/NAME.svg`, `kreplay-out/default/`, `/etc/passwd`.\n"
             "A link: [the design](docs/MISSING.md); a glob: `kernels/cpu/*.hip`.\n"      /* 9 */
             "| `kernels/` | the models (`cpu/`) |\n"                                     /* 10 */
             "A short path with no folder before it: `cpu/`.\n"                           /* 11 */
             "`kernels/cpu/w4a8_perblock.c kernels/cpu/w4a8_folded.c` in one span.\n");   /* 12 */
    put_file(root, "docs/GUIDE.md",
             "# guide\n"
             "See `docs/DESIGN.md` and `../README.md`.\n");                               /* 2 */
    put_file(root, "harness/judge/README.md",
             "# judge\n"
             "\n"
             "`judge.c` holds it; `diagnosis/k_blocks.c` tries K.\n");                     /* 3 */
}

static void test_planted_bad_paths_are_named_by_file_and_line(void **state)
{
    (void)state;
    char root[4096];
    test_tmp_path(root, sizeof root, "doc_paths");
    plant_tree(root);
    char *out = NULL;
    assert_int_equal(run_check(root, &out), 1);
    static const char *const expected[] = {
        "README.md:4: missing path 'harness/verdict.c'",
        "README.md:9: missing path 'docs/MISSING.md'",
        "README.md:9: missing path 'kernels/cpu/*.hip'",
        "README.md:11: missing path 'cpu/'",
        "README.md:12: missing path 'kernels/cpu/w4a8_folded.c'",
        "docs/GUIDE.md:2: missing path 'docs/DESIGN.md'",
        "harness/judge/README.md:3: missing path 'diagnosis/k_blocks.c'",
    };
    for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
        if (!strstr(out, expected[i]))
            fprintf(stderr, "expected \"%s\" in:\n%s", expected[i], out);
        assert_non_null(strstr(out, expected[i]));
    }
    /* Nothing else is flagged: not the fenced command, the placeholders,
     * the output directory, the absolute path, nor a path that exists. */
    const int flagged = test_count_substr(out, ": missing path '");
    assert_int_equal(flagged, (int)(sizeof expected / sizeof expected[0]));
    assert_non_null(strstr(out, "check_doc_paths: 7 of "));
    free(out);

    /* The check follows the tree, not the spelling: once the cited files
     * exist, the same documents pass. */
    put_file(root, "harness/verdict.c", "int z;\n");
    put_file(root, "docs/MISSING.md", "# there now\n");
    put_file(root, "docs/DESIGN.md", "# there now\n");
    put_file(root, "kernels/cpu/kr.hip", "\n");
    put_file(root, "cpu/.keep", "\n");
    put_file(root, "kernels/cpu/w4a8_folded.c", "int w;\n");
    put_file(root, "harness/judge/diagnosis/k_blocks.c", "int v;\n");
    char *out2 = NULL;
    const int rc = run_check(root, &out2);
    if (rc != 0)
        fprintf(stderr, "%s", out2);
    assert_int_equal(rc, 0);
    free(out2);
}

/* A root with no documents is a usage error, not a pass. */
static void test_no_documents_is_an_error(void **state)
{
    (void)state;
    char root[4096];
    test_tmp_path(root, sizeof root, "doc_paths_empty");
    put_file(root, "src/a.c", "int a;\n");
    char *out = NULL;
    assert_int_equal(run_check(root, &out), 2);
    assert_non_null(strstr(out, "no README.md or docs/*.md"));
    free(out);
}

KR_TEST_MAIN(
    test_repository_documents_pass, test_planted_bad_paths_are_named_by_file_and_line,
    test_no_documents_is_an_error);
