#include "test_support.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int test_run_kreplay(const char *args, char **output)
{
    size_t cmdlen = strlen(KREPLAY_BINARY) + strlen(args) + 32;
    char *cmd = malloc(cmdlen);
    snprintf(cmd, cmdlen, "'%s' %s 2>&1", KREPLAY_BINARY, args);
    FILE *p = popen(cmd, "r");
    free(cmd);
    if (!p)
        return -1;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while ((got = fread(buf + len, 1, cap - len - 1, p)) > 0) {
        len += got;
        if (cap - len < 2) {
            cap *= 2;
            buf = realloc(buf, cap);
        }
    }
    buf[len] = '\0';
    int status = pclose(p);
    if (output)
        *output = buf;
    else
        free(buf);
    if (status == -1 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}
