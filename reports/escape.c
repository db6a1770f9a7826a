#include "escape.h"

#include "kr_string.h"

#include <stdlib.h>
#include <string.h>

int esc_utf8_len(const unsigned char *p)
{
    return kr_utf8_len(p);
}

/* The code point of a valid sequence of n bytes at p. */
static unsigned utf8_cp(const unsigned char *p, int n)
{
    if (n == 1)
        return p[0];
    unsigned cp = p[0] & (0x7F >> n);
    for (int i = 1; i < n; i++)
        cp = (cp << 6) | (p[i] & 0x3F);
    return cp;
}

static int is_control(unsigned char c)
{
    return c < 0x20 || c == 0x7F;
}

/* Writes the character at p and returns the bytes it took: a control byte
 * as `control` (NULL: as itself), a byte that starts no valid UTF-8
 * sequence as `invalid`, anything else as it is. */
static int put_char(FILE *fp, const unsigned char *p, const char *control, const char *invalid)
{
    if (control && is_control(*p)) {
        fputs(control, fp);
        return 1;
    }
    int n = esc_utf8_len(p);
    if (n == 0) {
        fputs(invalid, fp);
        return 1;
    }
    fwrite(p, 1, (size_t)n, fp);
    return n;
}

void esc_markdown(FILE *fp, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        unsigned char c = *p;
        switch (c) {
        case '|': case '\\': case '`': case '*': case '[': case ']': case '~':
            fputc('\\', fp);
            fputc(c, fp);
            p++;
            continue;
        case '<': fputs("&lt;", fp); p++; continue;
        case '>': fputs("&gt;", fp); p++; continue;
        case '&': fputs("&amp;", fp); p++; continue;
        default: break;
        }
        p += put_char(fp, p, " ", "\xEF\xBF\xBD");
    }
}

void esc_markdown_code(FILE *fp, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t run = 0, longest = 0;
    for (const unsigned char *q = p; *q; q++) {
        run = *q == '`' ? run + 1 : 0;
        if (run > longest)
            longest = run;
    }
    size_t len = strlen((const char *)p);
    /* A span that starts or ends with a backtick needs a space between it
     * and the fence, which CommonMark strips again. */
    int pad = longest > 0 && len > 0 && (p[0] == '`' || p[len - 1] == '`');
    for (size_t i = 0; i <= longest; i++)
        fputc('`', fp);
    if (pad)
        fputc(' ', fp);
    while (*p)
        p += put_char(fp, p, " ", "\xEF\xBF\xBD");
    if (pad)
        fputc(' ', fp);
    for (size_t i = 0; i <= longest; i++)
        fputc('`', fp);
}

/* The entity each ASCII character is written as (NULL: as itself), per
 * format: HTML text and attributes, XML text, XML attribute values (where a
 * raw newline or tab would be normalised to a space). */
typedef const char *entity_table_t[128];
static const entity_table_t HTML_ENTITIES = {
    ['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;", ['\''] = "&#39;",
};
static const entity_table_t XML_TEXT_ENTITIES = {
    ['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;", ['\''] = "&apos;",
    ['\n'] = "\n", ['\t'] = "\t", ['\r'] = "&#13;",
};
static const entity_table_t XML_ATTR_ENTITIES = {
    ['&'] = "&amp;", ['<'] = "&lt;", ['>'] = "&gt;", ['"'] = "&quot;", ['\''] = "&apos;",
    ['\n'] = "&#10;", ['\t'] = "&#9;", ['\r'] = "&#13;",
};

/* Writes the entity of the character at p and returns 1, or returns 0 when
 * it has none. */
static int put_entity(FILE *fp, const unsigned char *p, const entity_table_t *table)
{
    const char *e = *p < 128 ? (*table)[*p] : NULL;
    if (e)
        fputs(e, fp);
    return e != NULL;
}

void esc_html(FILE *fp, const char *s)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    while (*p) {
        if (put_entity(fp, p, &HTML_ENTITIES)) {
            p++;
            continue;
        }
        unsigned char c = *p;
        p += put_char(fp, p, c == '\n' || c == '\t' ? NULL : "&#xFFFD;", "&#xFFFD;");
    }
}

/* 1 when s is a plain decimal number ("-1.5", "+3e-2"): no formula. */
static int is_number(const char *s)
{
    char *end = NULL;
    strtod(s, &end);
    return end != s && *end == '\0' && strchr(s, '(') == NULL;
}

void esc_csv(FILE *fp, const char *s, int always_quote)
{
    if (!s)
        s = "";
    /* A lone "-" (a row without a reference) is no formula. */
    int formula = s[0] && s[1] && strchr("=+-@\t\r", s[0]) != NULL && !is_number(s);
    int quote = always_quote || formula || strpbrk(s, ",\"\r\n") != NULL;
    if (quote)
        fputc('"', fp);
    if (formula)
        fputc('\'', fp);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', fp);
        fputc(*s, fp);
    }
    if (quote)
        fputc('"', fp);
}

void esc_xml(FILE *fp, const char *s, int attr)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    const entity_table_t *entities = attr ? &XML_ATTR_ENTITIES : &XML_TEXT_ENTITIES;
    while (*p) {
        if (put_entity(fp, p, entities)) {
            p++;
            continue;
        }
        if (is_control(*p)) {
            fputc('?', fp);
            p++;
            continue;
        }
        int n = esc_utf8_len(p);
        if (n == 0 || (n == 3 && utf8_cp(p, n) >= 0xFFFE)) {
            fputc('?', fp);
            p += n ? n : 1;
            continue;
        }
        fwrite(p, 1, (size_t)n, fp);
        p += n;
    }
}

void esc_terminal(const char *s, char *out, size_t cap)
{
    kr_str_printable(s, out, cap);
}

void esc_put(FILE *fp, esc_fn_t esc, const char *pre, const char *s, const char *post)
{
    fputs(pre, fp);
    esc(fp, s);
    fputs(post, fp);
}

void esc_put_nonempty(FILE *fp, esc_fn_t esc, const char *pre, const char *s, const char *post)
{
    if (s && s[0])
        esc_put(fp, esc, pre, s, post);
}
