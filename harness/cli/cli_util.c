#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"

#ifndef KREPLAY_GIT_COMMIT
#define KREPLAY_GIT_COMMIT "unknown"
#endif

const char *cli_version(void)
{
    return KREPLAY_VERSION;
}

const char *cli_git_commit(void)
{
    return KREPLAY_GIT_COMMIT;
}

int cli_parse_int_list(const char *s, long long *values, int cap)
{
    int n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || n >= cap)
            return -1;
        values[n++] = v;
        if (*end == ',')
            end++;
        else if (*end != '\0')
            return -1;
        p = end;
    }
    return n > 0 ? n : -1;
}

static int string_compare(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int has_case_extension(const char *name)
{
    size_t n = strlen(name);
    return (n > 3 && !strcmp(name + n - 3, ".h5")) || (n > 5 && !strcmp(name + n - 5, ".hdf5")) ||
           (n > 3 && !strcmp(name + n - 3, ".pt"));
}

char **cli_expand_cases(int n, char **args, int *count)
{
    int cap = 16, len = 0;
    char **out = malloc((size_t)cap * sizeof *out);
    for (int i = 0; i < n; i++) {
        struct stat st;
        if (stat(args[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            DIR *d = opendir(args[i]);
            if (!d)
                continue;
            int first = len;
            struct dirent *e;
            while ((e = readdir(d))) {
                if (!has_case_extension(e->d_name))
                    continue;
                if (len + 1 >= cap)
                    out = realloc(out, (size_t)(cap *= 2) * sizeof *out);
                size_t sz = strlen(args[i]) + strlen(e->d_name) + 2;
                out[len] = malloc(sz);
                snprintf(out[len++], sz, "%s/%s", args[i], e->d_name);
            }
            closedir(d);
            qsort(out + first, (size_t)(len - first), sizeof *out, string_compare);
        } else {
            if (len + 1 >= cap)
                out = realloc(out, (size_t)(cap *= 2) * sizeof *out);
            out[len++] = strdup(args[i]);
        }
    }
    out[len] = NULL;
    *count = len;
    return out;
}

void cli_free_strings(char **list)
{
    if (!list)
        return;
    for (char **p = list; *p; p++)
        free(*p);
    free(list);
}

char *cli_command_line(int argc, char **argv)
{
    size_t len = 16;
    for (int i = 0; i < argc; i++)
        len += strlen(argv[i]) + 1;
    char *s = malloc(len);
    strcpy(s, "kreplay");
    for (int i = 0; i < argc; i++) {
        strcat(s, " ");
        strcat(s, argv[i]);
    }
    return s;
}

int cli_scale_layout_from_word(const char *s, scale_layout_t *out)
{
    static const struct {
        const char *word;
        scale_layout_t layout;
    } short_words[] = {{"nk", SCALE_LAYOUT_NK}, {"kn", SCALE_LAYOUT_KN}};
    for (size_t i = 0; i < sizeof short_words / sizeof short_words[0]; i++) {
        if (!strcmp(s, short_words[i].word)) {
            *out = short_words[i].layout;
            return 0;
        }
    }
    return scale_layout_from_name(s, out);
}

int cli_error(const kr_error_t *err)
{
    fprintf(stderr, "kreplay: error: %s\n", err->msg);
    return EXIT_USAGE;
}
