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
    /* Each line is the text as written (its spacing kept: a table row stays
     * aligned) up to the last space that fits; a word longer than a line is
     * cut where the line ends. */
    fputs(first, fp);
    int col = (int)strlen(first);
    const char *p = text;
    while (*p) {
        const int room = width - col;
        const size_t rest = strlen(p);
        if (width <= 0 || (int)rest <= room) {
            fputs(p, fp);
            break;
        }
        int cut = -1;
        for (int i = room; i > 0; i--)
            if (p[i] == ' ') {
                cut = i;
                break;
            }
        if (cut <= 0 && col > indent) {
            cut = 0;            /* nothing fits after the prefix: start on the next line */
        } else if (cut <= 0) {
            cut = room > 1 ? room : 1;
        }
        int end = cut;
        while (end > 0 && p[end - 1] == ' ')
            end--;
        fwrite(p, 1, (size_t)end, fp);
        p += cut;
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        fprintf(fp, "\n%*s", indent, "");
        col = indent;
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

/* The length of the label when LINE is a labelled shell command (a gate's
 * "rerun: " and "reduce: " lines), which is continued with a backslash so
 * it still pastes as one command; else 0. */
static size_t shell_command_label(const char *line)
{
    static const char *const labels[] = {"rerun: ", "reduce: "};
    for (size_t i = 0; i < sizeof labels / sizeof labels[0]; i++)
        if (!strncmp(line, labels[i], strlen(labels[i])))
            return strlen(labels[i]);
    return 0;
}

void term_wrap_lines(FILE *fp, const char *text, int width)
{
    term_wrap_lines_hang(fp, text, width, -1);
}

void term_wrap_lines_hang(FILE *fp, const char *text, int width, int hang)
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
            const size_t label = shell_command_label(line + lead);
            if (label > 0) {
                snprintf(first + strlen(first), sizeof first - strlen(first), "%.*s", (int)label, line + lead);
                term_wrap_shell(fp, first, line + lead + label, lead + 4, width);
            } else if ((int)n <= width || width <= 0) {
                fputs(line, fp);
                fputc('\n', fp);
            } else {
                term_wrap(fp, first, line + lead, hang >= 0 && hang < width - 20 ? hang : lead + 4, width);
            }
            free(line);
        }
        p += n + (nl ? 1 : 0);
    }
}
