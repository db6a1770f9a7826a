#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kreplay_checks.h"
#include "test_support.h"

char *test_kreplay_output(const char *args, int rc)
{
    char *out = NULL;
    const int got = test_run_kreplay(args, &out);
    if (got != rc)
        fail_msg("'kreplay %s' exited %d, want %d: %s", args, got, rc, out);
    return out;
}

void test_kreplay_expect(const char *args, int rc, const char *want)
{
    char *out = test_kreplay_output(args, rc);
    if (want && !strstr(out, want))
        fail_msg("'kreplay %s' lacks '%s': %s", args, want, out);
    free(out);
}

void test_expect_phrases(const char *text, const char *const *phrases)
{
    for (; *phrases; phrases++)
        if (!strstr(text, *phrases))
            fail_msg("lacks '%s': %s", *phrases, text);
}

char *test_read_in_dir(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = test_read_file(path, NULL);
    if (!text)
        fail_msg("cannot read %s", path);
    return text;
}

json_t *test_command_json(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        fail_msg("%s: cannot start", cmd);
    json_error_t jerr;
    json_t *root = json_loadf(p, 0, &jerr);
    pclose(p);
    if (!root)
        fail_msg("%s: no JSON (%s)", cmd, jerr.text);
    return root;
}

const char *test_json_str(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s ? s : "";
}

void test_console_command(const char *text, const char *prefix, char *cmd, size_t cap)
{
    const char *line = strstr(text, prefix);
    assert_non_null(line);
    line += strlen(prefix);
    size_t len = 0;
    cmd[0] = '\0';
    for (const char *eol = strchr(line, '\n'); eol && len < cap - 1; eol = strchr(line, '\n')) {
        const int continued = eol - line >= 2 && eol[-1] == '\\' && eol[-2] == ' ';
        len += (size_t)snprintf(cmd + len, cap - len, "%.*s", (int)(eol - line - (continued ? 2 : 0)), line);
        if (!continued)
            break;
        line = eol + 1 + strspn(eol + 1, " ");
        len += (size_t)snprintf(cmd + len, cap - len, " ");
    }
}
