#include "shape_catalog.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"
#include "data_path.h"
#include "kr_string.h"

/* The bundled catalogue's path: a pure function of where the binary is,
 * computed once (pthread_once: callers may be on several threads). */
static char bundled_path[4200];
static pthread_once_t bundled_path_once = PTHREAD_ONCE_INIT;

static void bundled_path_find(void)
{
    if (kr_data_path("cases/shapes.csv", bundled_path, sizeof bundled_path) != 0)
        snprintf(bundled_path, sizeof bundled_path, "cases/shapes.csv");
}

const char *shape_catalog_default_path(void)
{
    const char *env = getenv("KREPLAY_SHAPES");
    if (env && *env)
        return env;
    pthread_once(&bundled_path_once, bundled_path_find);
    return bundled_path;
}

void shape_catalog_free(shape_catalog_t *cat)
{
    free(cat->shapes);
    cat->shapes = NULL;
    cat->count = 0;
}

int shape_catalog_load(const char *path, shape_catalog_t *cat, kr_error_t *err)
{
    memset(cat, 0, sizeof *cat);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return kr_fail(err, "%s: cannot open the shape catalogue", path);
    char line[512];
    int lineno = 0;
    int64_t cap = 0;
    while (fgets(line, sizeof line, fp)) {
        lineno++;
        line[strcspn(line, "\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *fields[5] = {0};
        char *p = line;
        for (int i = 0; i < 5 && p; i++) {
            fields[i] = p;
            if (i < 4) {
                char *comma = strchr(p, ',');
                if (comma)
                    *comma = '\0';
                p = comma ? comma + 1 : NULL;
            }
        }
        char *end1, *end2;
        long long n = fields[1] ? strtoll(fields[1], &end1, 10) : 0;
        long long k = fields[2] ? strtoll(fields[2], &end2, 10) : 0;
        if (!fields[4] || n <= 0 || k <= 0 || *end1 || *end2 ||
            (strcmp(fields[3], "mxfp4") != 0 && strcmp(fields[3], "bf16") != 0)) {
            fclose(fp);
            shape_catalog_free(cat);
            return kr_fail(err, "%s:%d: expected name,N,K,weight(mxfp4|bf16),role", path, lineno);
        }
        shape_t *s = array_reserve_one(cat->shapes, cat->count, &cap, sizeof *s, 16);
        if (!s) {
            fclose(fp);
            shape_catalog_free(cat);
            return kr_fail(err, "out of memory");
        }
        cat->shapes = s;
        s = &cat->shapes[cat->count++];
        kr_strlcpy(s->name, fields[0], sizeof s->name);
        s->N = n;
        s->K = k;
        kr_strlcpy(s->weight, fields[3], sizeof s->weight);
        kr_strlcpy(s->role, fields[4], sizeof s->role);
    }
    fclose(fp);
    return 0;
}

int shape_catalog_resolve(const shape_catalog_t *cat, const char *spec, shape_t *out, int cap,
                          kr_error_t *err)
{
    char buf[1024];
    kr_strlcpy(buf, spec, sizeof buf);
    int count = 0;
    for (char *save = NULL, *p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
        if (!strcmp(p, "production") || !strcmp(p, "all")) {
            for (int i = 0; i < cat->count; i++) {
                if (count >= cap)
                    return kr_fail(err, "too many shapes (at most %d)", cap);
                out[count++] = cat->shapes[i];
            }
            continue;
        }
        int found = 0;
        for (int i = 0; i < cat->count && !found; i++) {
            if (!strcmp(cat->shapes[i].name, p)) {
                if (count >= cap)
                    return kr_fail(err, "too many shapes (at most %d)", cap);
                out[count++] = cat->shapes[i];
                found = 1;
            }
        }
        if (found)
            continue;
        long long n, k;
        char tail;
        if (sscanf(p, "%lldx%lld%c", &n, &k, &tail) != 2 || n <= 0 || k <= 0)
            return kr_fail(err, "shape '%s' is neither NxK nor a name in the catalogue", p);
        if (count >= cap)
            return kr_fail(err, "too many shapes (at most %d)", cap);
        shape_t *s = &out[count++];
        memset(s, 0, sizeof *s);
        snprintf(s->name, sizeof s->name, "%lldx%lld", n, k);
        s->N = n;
        s->K = k;
        kr_strlcpy(s->weight, "mxfp4", sizeof s->weight);
        /* A bare NxK that is in the catalogue keeps its name and role. */
        for (int i = 0; i < cat->count; i++)
            if (cat->shapes[i].N == n && cat->shapes[i].K == k)
                *s = cat->shapes[i];
    }
    return count > 0 ? count : kr_fail(err, "no shape in '%s'", spec);
}
