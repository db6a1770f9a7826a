/* cmake --install into a temporary prefix, the tree moved elsewhere, and
 * kreplay run from there: it must find its data beside itself
 * (PREFIX/share/kreplay, harness/common/data_path.h), not in the source tree.  The
 * installed catalogue gets an extra line, which `list shapes` must show
 * (proof that the installed copy was read); every shape of the source tree's
 * cases/shapes.csv must be listed too; an installed sample replays; the
 * installed suite resolves its policy, samples and catalogue; and the
 * installed plugin header compiles on its own. */
/* ctest-labels: install */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test_support.h"

static char g_root[1024];

static int sh(const char *fmt, const char *a, const char *b)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, fmt, a, b);
    return system(cmd);
}

/* stdout of a command line into a malloc'd string. */
static char *capture(const char *cmd, int *rc)
{
    char *buf;
    *rc = test_shell(cmd, &buf);
    return buf;
}

static void test_install_moved_tree(void **state)
{
    (void)state;
    char build[1024], inst[1200], moved[1200], cmd[8192];
    snprintf(build, sizeof build, "%s", KREPLAY_BINARY);
    *strrchr(build, '/') = '\0';   /* kreplay lives at the top of the build tree */
    test_tmp_path(g_root, sizeof g_root, "install");
    mkdir(g_root, 0777);
    snprintf(inst, sizeof inst, "%s/prefix", g_root);
    snprintf(moved, sizeof moved, "%s/elsewhere/tree", g_root);
    assert_int_equal(sh("cmake --install '%s' --prefix '%s' >/dev/null", build, inst), 0);
    snprintf(cmd, sizeof cmd, "%s/elsewhere", g_root);
    mkdir(cmd, 0777);
    assert_int_equal(sh("mv '%s' '%s'", inst, moved), 0);

    /* The tree: binary, data, header. */
    const char *files[] = {"bin/kreplay", "share/kreplay/cases/shapes.csv",
                           "share/kreplay/cases/policies/default.yaml",
                           "share/kreplay/cases/suites/default.yaml",
                           "share/kreplay/cases/samples/moe_gate_N256_K2048_M8.h5",
                           "include/kreplay/plugin.h", "include/kreplay/plugin_util.h",
                           "share/man/man1/kreplay.1",
                           "share/bash-completion/completions/kreplay"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(cmd, sizeof cmd, "%s/%s", moved, files[i]);
        struct stat st;
        if (stat(cmd, &st) != 0)
            fail_msg("cmake --install did not install %s", files[i]);
    }

    /* Mark the installed catalogue, then list shapes from an unrelated folder. */
    assert_int_equal(sh("printf 'install_probe_shape,64,256,mxfp4,installed-copy probe\\n' >> "
                        "'%s/share/kreplay/cases/shapes.csv'%s", moved, ""), 0);
    int rc;
    snprintf(cmd, sizeof cmd, "cd '%s' && env -u KREPLAY_SHAPES '%s/bin/kreplay' list shapes",
             g_root, moved);
    char *out = capture(cmd, &rc);
    assert_int_equal(rc, 0);
    if (!strstr(out, "install_probe_shape"))
        fail_msg("the moved tree did not read its own shapes.csv:\n%s", out);
    /* Every shape of the source tree's catalogue (parsed here) is listed. */
    snprintf(cmd, sizeof cmd, "%s/cases/shapes.csv", KREPLAY_SOURCE_DIR);
    FILE *fp = fopen(cmd, "r");
    assert_non_null(fp);
    char line[512];
    int shapes = 0;
    while (fgets(line, sizeof line, fp)) {
        if (line[0] == '#' || line[0] == '\n' || !strchr(line, ','))
            continue;
        *strchr(line, ',') = '\0';
        if (!strcmp(line, "name"))
            continue;   /* a header line, if any */
        if (!strstr(out, line))
            fail_msg("list shapes lacks %s:\n%s", line, out);
        shapes++;
    }
    fclose(fp);
    assert_true(shapes >= 5);
    free(out);

    /* A sample replays from the moved tree. */
    snprintf(cmd, sizeof cmd,
             "cd '%s' && '%s/bin/kreplay' replay '%s/share/kreplay/cases/samples/"
             "moe_gate_N256_K2048_M8.h5'", g_root, moved, moved);
    out = capture(cmd, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "PASS"));
    free(out);

    /* The installed suite resolves (policy, sample globs, catalogue names). */
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s/bin/kreplay' gate "
             "'%s/share/kreplay/cases/suites/default.yaml' --list-shapes", g_root, moved, moved);
    out = capture(cmd, &rc);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "256x2048 bands="));
    free(out);

    /* The plugin header alone is a complete C11 interface. */
    assert_int_equal(sh("printf '#include <kreplay/plugin.h>\\nint main(void){return 0;}\\n' | "
                        "cc -std=c11 -Wall -Werror -fsyntax-only -I '%s/include' -x c -%s",
                        moved, ""), 0);
}

static int cleanup(void **state)
{
    (void)state;
    if (g_root[0] && !getenv("KR_TEST_KEEP_TMP"))
        sh("rm -rf '%s'%s", g_root, "");
    return 0;
}

int main(void)
{
    if (system("command -v cmake >/dev/null 2>&1 && command -v cc >/dev/null 2>&1") != 0) {
        fprintf(stderr, "cmake or cc not on PATH: skipped\n");
        return TEST_SKIPPED;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_install_moved_tree, cleanup)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
