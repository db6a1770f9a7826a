/* A kernel is one descriptor: no code outside the kernel's own descriptor
 * file names it.  This test walks the source tree and fails, naming
 * file:line, when a registered kernel's name appears as a string literal
 * ("w4a8.folded" or 'w4a8.folded') in a source file (C, headers, HIP/CUDA,
 * Python, shell, CMake) other than
 *   - the file that defines the kernel's descriptor (the line holding
 *     `.name = "NAME"` or a descriptor macro call `MACRO(sym, "NAME", ...)`),
 *   - kernels/registry.c,
 *   - tests/, docs/, cases/ (data: policies and suites name kernels),
 *     scripts/ (command-line users of kreplay, which name kernels as
 *     arguments: `--kernels`, `--vs`, `--py SPEC@KERNEL`) and any README file.
 * Build directories (a folder holding CMakeCache.txt) and hidden folders are
 * skipped.  The names come from the registry itself, not a copy.
 *
 * The scanner is first run on a planted tree whose findings are known, so a
 * scanner that finds nothing cannot pass. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "registry.h"
#include "test_main.h"

#define MAX_FINDINGS 256

typedef struct {
    char path[512];     /* relative to the scanned root */
    int line;
    char name[64];
} finding_t;

typedef struct {
    const char *root;
    const char *const *names;
    int n_names;
    char (*owner)[512];         /* [n_names]: the descriptor file of each name, "" if none */
    finding_t found[MAX_FINDINGS];
    int n_found;
} scan_t;

static int has_suffix(const char *s, const char *suffix)
{
    const size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int is_source_file(const char *base)
{
    static const char *const exts[] = {".c", ".h", ".hip", ".cu", ".cuh", ".cpp", ".py", ".sh", ".cmake"};
    if (strcmp(base, "CMakeLists.txt") == 0)
        return 1;
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (has_suffix(base, exts[i]))
            return 1;
    return 0;
}

/* Where kernel names belong: the registry, tests, docs, data, READMEs. */
static int is_exempt(const char *rel, const char *base)
{
    return strcmp(rel, "kernels/registry.c") == 0 || strncmp(rel, "tests/", 6) == 0 ||
           strncmp(rel, "docs/", 5) == 0 || strncmp(rel, "cases/", 6) == 0 ||
           strncmp(rel, "scripts/", 8) == 0 ||
           strncmp(base, "README", 6) == 0;
}

/* Does `line` hold the quoted name ("NAME" or 'NAME'), exactly? */
static const char *find_literal(const char *line, const char *name)
{
    const size_t n = strlen(name);
    for (const char *p = line; (p = strpbrk(p, "\"'")) != NULL; p++)
        if (strncmp(p + 1, name, n) == 0 && p[n + 1] == p[0])
            return p;
    return NULL;
}

/* Is this the line that defines the name's descriptor? */
static int is_descriptor_line(const char *line, const char *at)
{
    const char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    if (strncmp(p, ".name", 5) == 0) {
        p += 5;
        while (*p == ' ')
            p++;
        if (*p++ != '=')
            return 0;
        while (*p == ' ')
            p++;
        return p == at;
    }
    /* MACRO(sym, "NAME", ...): an upper-case macro whose second argument it is */
    const char *q = p;
    while (isupper((unsigned char)*q) || isdigit((unsigned char)*q) || *q == '_')
        q++;
    if (q == p || *q != '(')
        return 0;
    const char *comma = strchr(q, ',');
    if (!comma || comma > at)
        return 0;
    for (const char *r = comma + 1; r < at; r++)
        if (*r != ' ')
            return 0;
    return 1;
}

typedef void (*line_fn)(scan_t *s, const char *rel, int lineno, const char *line);

static void visit_file(scan_t *s, const char *path, const char *rel, line_fn fn)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return;
    char line[4096];
    int lineno = 0;
    while (fgets(line, sizeof line, fp))
        fn(s, rel, ++lineno, line);
    fclose(fp);
}

static void walk(scan_t *s, const char *rel_dir, line_fn fn)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s%s%s", s->root, rel_dir[0] ? "/" : "", rel_dir);
    char cache[1100];
    snprintf(cache, sizeof cache, "%s/CMakeCache.txt", dir);
    if (access(cache, F_OK) == 0)
        return;     /* a build directory */
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char rel[512], path[1600];
        snprintf(rel, sizeof rel, "%s%s%s", rel_dir, rel_dir[0] ? "/" : "", e->d_name);
        snprintf(path, sizeof path, "%s/%s", s->root, rel);
        struct stat st;
        if (lstat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode))
            walk(s, rel, fn);
        else if (S_ISREG(st.st_mode) && is_source_file(e->d_name))
            visit_file(s, path, rel, fn);
    }
    closedir(d);
}

static void find_owner(scan_t *s, const char *rel, int lineno, const char *line)
{
    (void)lineno;
    for (int i = 0; i < s->n_names; i++) {
        const char *at = find_literal(line, s->names[i]);
        if (at && !s->owner[i][0] && is_descriptor_line(line, at))
            snprintf(s->owner[i], sizeof s->owner[i], "%s", rel);
    }
}

static void find_stray(scan_t *s, const char *rel, int lineno, const char *line)
{
    const char *base = strrchr(rel, '/') ? strrchr(rel, '/') + 1 : rel;
    if (is_exempt(rel, base))
        return;
    for (int i = 0; i < s->n_names; i++) {
        if (strcmp(rel, s->owner[i]) == 0 || !find_literal(line, s->names[i]))
            continue;
        if (s->n_found < MAX_FINDINGS) {
            finding_t *f = &s->found[s->n_found];
            snprintf(f->path, sizeof f->path, "%s", rel);
            f->line = lineno;
            snprintf(f->name, sizeof f->name, "%s", s->names[i]);
        }
        s->n_found++;
    }
}

/* A fresh scan of root for names: first the descriptor file owning each name. */
static void scan_owners(scan_t *s, const char *root, const char *const *names, int n_names)
{
    memset(s, 0, sizeof *s);
    s->root = root;
    s->names = names;
    s->n_names = n_names;
    s->owner = calloc((size_t)n_names, sizeof *s->owner);
    assert_non_null(s->owner);
    walk(s, "", find_owner);
}

/* Scans root; returns the number of stray literals (s->found holds them). */
static int scan_tree(scan_t *s, const char *root, const char *const *names, int n_names)
{
    scan_owners(s, root, names, n_names);
    walk(s, "", find_stray);
    free(s->owner);
    s->owner = NULL;
    return s->n_found;
}

static int has_finding(const scan_t *s, const char *path, int line, const char *name)
{
    for (int i = 0; i < s->n_found && i < MAX_FINDINGS; i++)
        if (!strcmp(s->found[i].path, path) && s->found[i].line == line && !strcmp(s->found[i].name, name))
            return 1;
    return 0;
}

static void write_file(const char *root, const char *rel, const char *text)
{
    char path[1024], dir[1024];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + strlen(root) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        mkdir(dir, 0755);
        *p = '/';
    }
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* A planted tree: the literals outside the descriptor file are found, with
 * their lines; the exempt places are not. */
static void test_planted_literals_are_found(void **state)
{
    (void)state;
    char root[512];
    snprintf(root, sizeof root, "%s/kernel_literals.%d", KREPLAY_TEST_TMP, (int)getpid());
    mkdir(KREPLAY_TEST_TMP, 0755);
    assert_int_equal(mkdir(root, 0755), 0);
    write_file(root, "kernels/cpu/alpha.c",
               "const kernel_desc_t kernel_alpha = {\n    .name = \"fam.alpha\",\n"
               "    .summary = \"like \\\"fam.alpha\\\" itself\",\n};\n");
    write_file(root, "kernels/cpu/macros.c", "KMACRO(kernel_beta, \"fam.beta\", 3);\n");
    write_file(root, "kernels/registry.c", "/* \"fam.alpha\" */\n");
    write_file(root, "harness/use.c", "int f(void)\n{\n    return kernel_find(\"fam.alpha\") != 0;\n}\n");
    write_file(root, "harness/longer.c", "const char *s = \"fam.alpha.longer\"; /* not fam.alpha */\n");
    write_file(root, "reports/plot.py", "\n\nK = 'fam.beta'\n");
    write_file(root, "harness/prose.c", "/* fam.alpha in a comment, unquoted */\n");
    write_file(root, "harness/data.yaml", "kernel: \"fam.alpha\"\n");
    write_file(root, "tests/test_alpha.c", "kernel_find(\"fam.alpha\");\n");
    write_file(root, "docs/A.md", "\"fam.alpha\"\n");
    write_file(root, "scripts/drive.py", "MODEL = \"fam.alpha\"\n");
    write_file(root, "harness/README.md", "\"fam.beta\"\n");
    write_file(root, "build-x/CMakeCache.txt", "\n");
    write_file(root, "build-x/gen.c", "\"fam.alpha\"\n");

    const char *const names[] = {"fam.alpha", "fam.beta", "fam.alpha.longer"};
    scan_t *s = malloc(sizeof *s);
    assert_non_null(s);
    const int n = scan_tree(s, root, names, 3);
    for (int i = 0; i < s->n_found; i++)
        print_message("found %s:%d: %s\n", s->found[i].path, s->found[i].line, s->found[i].name);
    assert_int_equal(n, 3);
    assert_true(has_finding(s, "harness/use.c", 3, "fam.alpha"));
    assert_true(has_finding(s, "reports/plot.py", 3, "fam.beta"));
    /* fam.alpha.longer has no descriptor: any literal of it is stray */
    assert_true(has_finding(s, "harness/longer.c", 1, "fam.alpha.longer"));
    free(s);
}

/* The real tree: no registered kernel is named outside its descriptor. */
static void test_no_kernel_literal_outside_its_descriptor(void **state)
{
    (void)state;
    const int n = kernel_count();
    assert_true(n > 0);
    const char **names = calloc((size_t)n, sizeof *names);
    assert_non_null(names);
    for (int i = 0; i < n; i++)
        names[i] = kernel_at(i)->name;
    scan_t *s = malloc(sizeof *s);
    assert_non_null(s);
    scan_owners(s, KREPLAY_SOURCE_DIR, names, n);
    /* every registered kernel has a descriptor file the scanner recognises */
    int missing = 0;
    for (int i = 0; i < n; i++)
        if (!s->owner[i][0]) {
            print_error("%s: no descriptor line (.name = \"%s\") found under %s\n", names[i], names[i],
                        KREPLAY_SOURCE_DIR);
            missing++;
        }
    walk(s, "", find_stray);
    for (int i = 0; i < s->n_found && i < MAX_FINDINGS; i++)
        print_error("%s:%d: kernel name \"%s\" as a string literal outside its descriptor file; "
                    "read the descriptor's fields instead (kernel_for_role, gpu_entry, act/weight)\n",
                    s->found[i].path, s->found[i].line, s->found[i].name);
    free(s->owner);
    const int stray = s->n_found;
    free(s);
    free(names);
    assert_int_equal(missing, 0);
    assert_int_equal(stray, 0);
}

KR_TEST_MAIN(test_planted_literals_are_found, test_no_kernel_literal_outside_its_descriptor);
