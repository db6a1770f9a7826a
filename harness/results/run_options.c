#include "run_options.h"

#include <stdio.h>
#include <string.h>

#include "kr_string.h"

int run_options_append(char *buf, size_t cap, const char *name, const char *value)
{
    size_t len = strlen(buf);
    size_t need = len + (len ? 1 : 0) + strlen(name) + 1;
    for (const char *v = value; v && *v; v++)
        need += (*v == ';' || *v == '\\') ? 2 : 1;
    need += value ? 1 : 0;
    if (need > cap)
        return -1;
    char *o = buf + len;
    if (len)
        *o++ = ';';
    o += sprintf(o, "%s", name);
    if (value) {
        *o++ = '=';
        for (const char *v = value; *v; v++) {
            if (*v == ';' || *v == '\\')
                *o++ = '\\';
            *o++ = *v;
        }
    }
    *o = '\0';
    return 0;
}

#define RUN_OPTIONS_MAX 64

typedef struct {
    char name[64];
    char shown[512];      /* "'a', 'b'", "given", or "" (not given) */
} option_entry_t;

typedef struct {
    option_entry_t e[RUN_OPTIONS_MAX];
    int n;
} option_list_t;

static option_entry_t *entry_for(option_list_t *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->e[i].name, name))
            return &l->e[i];
    if (l->n == RUN_OPTIONS_MAX)
        return NULL;
    option_entry_t *e = &l->e[l->n++];
    kr_strlcpy(e->name, name, sizeof e->name);
    e->shown[0] = '\0';
    return e;
}

/* One "name[=value]" entry (escapes undone) into the list. */
static void add_entry(option_list_t *l, const char *entry)
{
    char name[64];
    const char *eq = strchr(entry, '=');
    size_t nlen = eq ? (size_t)(eq - entry) : strlen(entry);
    snprintf(name, sizeof name, "%.*s", (int)nlen, entry);
    option_entry_t *e = entry_for(l, name);
    if (!e)
        return;
    size_t len = strlen(e->shown);
    snprintf(e->shown + len, sizeof e->shown - len, "%s%s%s%s", len ? ", " : "", eq ? "'" : "",
             eq ? eq + 1 : "given", eq ? "'" : "");
}

static void parse_list(const char *fp, option_list_t *l)
{
    memset(l, 0, sizeof *l);
    char entry[1024];
    size_t n = 0;
    for (const char *p = fp;; p++) {
        if (*p == '\\' && p[1]) {
            p++;
        } else if (*p == ';' || *p == '\0') {
            entry[n] = '\0';
            if (n)
                add_entry(l, entry);
            n = 0;
            if (!*p)
                break;
            continue;
        }
        if (n + 1 < sizeof entry)
            entry[n++] = *p;
    }
}

static void describe(char *msg, size_t cap, int first, const char *name, const char *was, const char *now)
{
    size_t len = strlen(msg);
    /* An entry the gate adds ("python kernel X") is no option: no dashes. */
    snprintf(msg + len, cap - len, "%s%s%s: was %s, now %s", first ? "" : "; ", strchr(name, ' ') ? "" : "--", name,
             was[0] ? was : "not given", now[0] ? now : "not given");
}

int run_options_diff(const char *was, const char *now, char *msg, size_t cap)
{
    static const option_entry_t none = {{0}, {0}};
    option_list_t a, b;
    parse_list(was ? was : "", &a);
    parse_list(now ? now : "", &b);
    if (cap)
        msg[0] = '\0';
    int differ = 0;
    for (int i = 0; i < a.n; i++) {
        const option_entry_t *other = &none;
        for (int j = 0; j < b.n; j++)
            if (!strcmp(a.e[i].name, b.e[j].name))
                other = &b.e[j];
        if (strcmp(a.e[i].shown, other->shown) != 0)
            describe(msg, cap, differ++ == 0, a.e[i].name, a.e[i].shown, other->shown);
    }
    for (int j = 0; j < b.n; j++) {
        int known = 0;
        for (int i = 0; i < a.n && !known; i++)
            known = !strcmp(a.e[i].name, b.e[j].name);
        if (!known)
            describe(msg, cap, differ++ == 0, b.e[j].name, "", b.e[j].shown);
    }
    /* Entries past what the lists hold, or values cut in display: the
     * strings themselves still decide. */
    if (differ == 0 && strcmp(was ? was : "", now ? now : "") != 0) {
        snprintf(msg, cap, "the options were '%s', now '%s'", was ? was : "", now ? now : "");
        differ = 1;
    }
    return differ;
}
