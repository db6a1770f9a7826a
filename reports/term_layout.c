#include "term_layout.h"

#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

int term_width(FILE *fp)
{
    const char *c = getenv("COLUMNS");
    if (c && *c) {
        char *end;
        long v = strtol(c, &end, 10);
        if (*end == '\0' && v > 0 && v < 100000)
            return (int)v;
    }
    struct winsize ws;
    if (fp && isatty(fileno(fp)) && ioctl(fileno(fp), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    return TERM_WIDTH_DEFAULT;
}

void term_middle(const char *s, int width, char *out, size_t cap)
{
    const size_t n = strlen(s);
    if (width < 5 || n <= (size_t)width) {
        snprintf(out, cap, "%s", s);
        return;
    }
    /* The head keeps the family, the tail what tells cases apart (M, seed). */
    const int tail = (width - 3) / 2, head = width - 3 - tail;
    snprintf(out, cap, "%.*s...%s", head, s, s + n - (size_t)tail);
}

void term_wrap(FILE *fp, const char *first, const char *text, int indent, int width)
{
    int col = (int)strlen(first);
    fputs(first, fp);
    const char *p = text;
    int at_line_start = 1;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        size_t w = strcspn(p, " ");
        const int room = width - col - (at_line_start ? 0 : 1);
        if (width > 0 && (int)w > room && !(at_line_start && col <= indent)) {
            fprintf(fp, "\n%*s", indent, "");
            col = indent;
            at_line_start = 1;
            continue;
        }
        if (!at_line_start) {
            fputc(' ', fp);
            col++;
        }
        /* A word longer than a whole line is cut where the line ends. */
        size_t take = w;
        if (width > 0 && (int)take > width - col)
            take = (size_t)(width - col > 1 ? width - col : 1);
        fwrite(p, 1, take, fp);
        col += (int)take;
        p += take;
        at_line_start = 0;
        if (take < w) {
            fprintf(fp, "\n%*s", indent, "");
            col = indent;
            at_line_start = 1;
        }
    }
    fputc('\n', fp);
}

void term_wrap_shell(FILE *fp, const char *first, const char *cmd, int indent, int width)
{
    fputs(first, fp);
    int col = (int)strlen(first), at_start = 1;
    for (const char *p = cmd; *p;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        /* one word: up to a space outside single quotes */
        const char *q = p;
        for (int quoted = 0; *q && (quoted || *q != ' '); q++)
            if (*q == '\'')
                quoted = !quoted;
        const int w = (int)(q - p);
        if (!at_start && width > 0 && col + 1 + w + 2 > width) {
            fprintf(fp, " \\\n%*s", indent, "");
            col = indent;
            at_start = 1;
        }
        if (!at_start) {
            fputc(' ', fp);
            col++;
        }
        fwrite(p, 1, (size_t)w, fp);
        col += w;
        at_start = 0;
        p = q;
    }
    fputc('\n', fp);
}

void term_wrap_lines(FILE *fp, const char *text, int width)
{
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        const size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char *line = malloc(n + 1);
        if (!line) {
            fwrite(p, 1, n, fp);
            fputc('\n', fp);
        } else {
            memcpy(line, p, n);
            line[n] = '\0';
            const int lead = (int)strspn(line, " ");
            char first[64];
            snprintf(first, sizeof first, "%.*s", lead < 60 ? lead : 60, line);
            if (!strncmp(line + lead, "rerun: ", 7)) {
                snprintf(first + strlen(first), sizeof first - strlen(first), "rerun: ");
                term_wrap_shell(fp, first, line + lead + 7, lead + 4, width);
            } else if ((int)n <= width || width <= 0) {
                fputs(line, fp);
                fputc('\n', fp);
            } else {
                term_wrap(fp, first, line + lead, lead + 4, width);
            }
            free(line);
        }
        p += n + (nl ? 1 : 0);
    }
}
