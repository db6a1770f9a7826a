/* realpath(3) */
#define _DEFAULT_SOURCE
#include "cli_shell_words.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A word the shell takes as is, or the word in single quotes. */
void cli_shell_word(FILE *fp, const char *s)
{
    int plain = *s != '\0';
    for (const char *p = s; *p && plain; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                strchr("-_./:=,+@%", *p);
    if (plain) {
        fputs(s, fp);
        return;
    }
    fputc('\'', fp);
    for (const char *p = s; *p; p++) {
        if (*p == '\'')
            fputs("'\\''", fp);
        else
            fputc(*p, fp);
    }
    fputc('\'', fp);
}

/* An absolute path where it exists, so the command works from any directory. */
void cli_path_word(FILE *fp, const char *path)
{
    char abs[PATH_MAX];
    cli_shell_word(fp, realpath(path, abs) ? abs : path);
}

void cli_binary_word(FILE *fp)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        cli_shell_word(fp, exe);
    } else {
        fputs("kreplay", fp);
    }
}
