#include "test_support.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

uint64_t test_rng_u64(test_rng_t *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double test_rng_uniform(test_rng_t *r)
{
    return (double)(test_rng_u64(r) >> 11) * 0x1.0p-53;
}

double test_rng_normal(test_rng_t *r)
{
    double u1 = test_rng_uniform(r), u2 = test_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void test_tmp_path(char *buf, size_t cap, const char *name)
{
    static int counter;
    snprintf(buf, cap, "%s/%s-%d-%d", KREPLAY_TEST_TMP, name, (int)getpid(), counter++);
}

int test_tmp_dir(char *buf, size_t cap, const char *name)
{
    test_tmp_path(buf, cap, name);
    return mkdir(buf, 0777);
}

int test_write_text(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");
    if (!fp)
        return -1;
    int bad = fputs(text, fp) < 0;
    return fclose(fp) != 0 || bad ? -1 : 0;
}

int test_run_python(const char *script, const char *args)
{
    size_t cap = strlen(KREPLAY_SOURCE_DIR) + strlen(script) + strlen(args) + 64;
    char *cmd = malloc(cap);
    snprintf(cmd, cap, "/usr/bin/python3 '%s/tests/python/%s' %s", KREPLAY_SOURCE_DIR, script, args);
    int st = system(cmd);
    free(cmd);
    return st;
}

int test_run_python_tool(const char *script, const char *tmp_name)
{
    char dir[1024], args[4096];
    if (test_tmp_dir(dir, sizeof dir, tmp_name) != 0)
        return -1;
    snprintf(args, sizeof args, "'%s' '%s' '%s'", KREPLAY_BINARY, KREPLAY_SOURCE_DIR, dir);
    return test_run_python(script, args);
}

char *test_read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *buf = n >= 0 ? malloc((size_t)n + 1) : NULL;
    size_t got = buf ? fread(buf, 1, (size_t)n, fp) : 0;
    fclose(fp);
    if (buf)
        buf[got] = '\0';
    if (len)
        *len = got;
    return buf;
}

void test_plugin_file(char *buf, size_t cap, const char *name)
{
    const char *bin = KREPLAY_BINARY;
    const char *slash = strrchr(bin, '/');
    if (slash)
        snprintf(buf, cap, "%.*s/plugins/libkr_plugin_%s.so", (int)(slash - bin), bin, name);
    else
        snprintf(buf, cap, "plugins/libkr_plugin_%s.so", name);
}

int test_shell(const char *cmd, char **output)
{
    FILE *p = popen(cmd, "r");
    if (!p) {
        *output = strdup("");
        return -1;
    }
    size_t cap = 1 << 16, len = 0, got;
    char *buf = malloc(cap);
    while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (cap - len < 4096)
            buf = realloc(buf, cap *= 2);
    }
    buf[len] = '\0';
    *output = buf;
    return pclose(p);
}

int test_exit_code(int status)
{
    return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int test_sh(const char *cmd, char **output)
{
    size_t cap = strlen(cmd) + 16;
    char *full = malloc(cap);
    snprintf(full, cap, "(%s) 2>&1", cmd);
    int status = test_shell(full, output);
    free(full);
    return test_exit_code(status);
}

int test_count_files(const char *dir, const char *suffix)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t a = strlen(e->d_name), b = strlen(suffix);
        n += a > b && !strcmp(e->d_name + a - b, suffix);
    }
    closedir(d);
    return n;
}

void test_free_each(void *const *ptrs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ptrs[i]);
}

int test_count_substr(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

int test_replay_json_py(const char *args, const char *target, json_t **root, char *err_text,
                        size_t cap)
{
    char out[1024], errp[1024], cmd[8192];
    test_tmp_path(out, sizeof out, "py.json");
    test_tmp_path(errp, sizeof errp, "py.err");
    snprintf(cmd, sizeof cmd, "KREPLAY_PYTHON=/usr/bin/python3 '%s' replay --json %s '%s' >'%s' 2>'%s'",
             KREPLAY_BINARY, args, target, out, errp);
    int st = system(cmd);
    json_error_t je;
    *root = json_load_file(out, 0, &je);
    FILE *fp = fopen(errp, "r");
    size_t n = fp ? fread(err_text, 1, cap - 1, fp) : 0;
    err_text[n] = 0;
    if (fp)
        fclose(fp);
    return test_exit_code(st);
}

int test_run_kreplay(const char *args, char **output)
{
    size_t cmdlen = strlen(KREPLAY_BINARY) + strlen(args) + 32;
    char *cmd = malloc(cmdlen);
    snprintf(cmd, cmdlen, "'%s' %s 2>&1", KREPLAY_BINARY, args);
    char *buf;
    int status = test_shell(cmd, &buf);
    free(cmd);
    if (output)
        *output = buf;
    else
        free(buf);
    return test_exit_code(status);
}
