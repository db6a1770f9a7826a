#include "yaml_util.h"
#include "file_kind.h"

#include "kr_string.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Events of one file the pre-pass accepts: a 1 MiB file cannot hold many
 * more, and it bounds the document the loader builds. */
#define KR_YAML_MAX_EVENTS 400000

void kr_fnv1a64_hex(const void *bytes, size_t n, char out[17])
{
    const unsigned char *p = bytes;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 0x100000001b3ull;
    }
    snprintf(out, 17, "%016llx", (unsigned long long)h);
}

static int vfail(const char *path, int line, kr_error_t *err, const char *fmt, va_list ap)
{
    if (!err)
        return -1;
    int n = line > 0 ? snprintf(err->msg, sizeof err->msg, "%s:%d: ", path, line)
                     : snprintf(err->msg, sizeof err->msg, "%s: ", path);
    if (n < 0)
        n = 0;
    if ((size_t)n < sizeof err->msg)
        vsnprintf(err->msg + n, sizeof err->msg - (size_t)n, fmt, ap);
    /* One line, whatever the file held: control characters print as '?'. */
    for (char *c = err->msg; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f)
            *c = '?';
    return -1;
}

static int path_fail(const char *path, int line, kr_error_t *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int path_fail(const char *path, int line, kr_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(path, line, err, fmt, ap);
    va_end(ap);
    return -1;
}

int kr_yaml_fail(const kr_yaml_t *y, const yaml_node_t *node, int line, kr_error_t *err,
                 const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(y->path, node ? kr_yaml_line(node) : line, err, fmt, ap);
    va_end(ap);
    return -1;
}

/* 1-based line of a byte offset (reader errors carry an offset, not a mark). */
static int line_of_offset(const char *bytes, size_t len, size_t off)
{
    int line = 1;
    for (size_t i = 0; i < off && i < len; i++)
        line += bytes[i] == '\n';
    return line;
}

static int parser_fail(const char *path, const yaml_parser_t *p, const char *bytes, size_t len,
                       kr_error_t *err)
{
    const char *problem = p->problem ? p->problem : "unknown error";
    int line = (int)p->problem_mark.line + 1;
    if (p->error == YAML_READER_ERROR)
        line = line_of_offset(bytes, len, p->problem_offset);
    if (p->error == YAML_MEMORY_ERROR)
        return path_fail(path, 0, err, "out of memory while parsing YAML");
    if (p->context && (int)p->context_mark.line + 1 != line)
        return path_fail(path, line, err, "YAML syntax error: %s (%s, line %d); expected valid YAML",
                         problem, p->context, (int)p->context_mark.line + 1);
    if (p->context)
        return path_fail(path, line, err, "YAML syntax error: %s (%s); expected valid YAML", problem,
                         p->context);
    if (p->error == YAML_READER_ERROR)
        return path_fail(path, line, err,
                         "YAML syntax error: %s (byte #%d at offset %zu); expected UTF-8 text", problem,
                         p->problem_value, p->problem_offset);
    return path_fail(path, line, err, "YAML syntax error: %s; expected valid YAML", problem);
}

/* One pass over the events: syntax, nesting depth, number of documents. */
static int prepass(const char *path, const char *bytes, size_t len, kr_error_t *err)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return path_fail(path, 0, err, "out of memory");
    yaml_parser_set_input_string(&p, (const unsigned char *)bytes, len);
    int depth = 0, docs = 0, status = 0;
    long events = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            status = parser_fail(path, &p, bytes, len, err);
            break;
        }
        const int line = (int)ev.start_mark.line + 1;
        const yaml_event_type_t type = ev.type;
        yaml_event_delete(&ev);
        if (++events > KR_YAML_MAX_EVENTS) {
            status = path_fail(path, line, err, "too many YAML nodes (more than %d); expected a small file",
                               KR_YAML_MAX_EVENTS);
            break;
        }
        if (type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) {
            if (++depth > KR_YAML_MAX_DEPTH) {
                status = path_fail(path, line, err, "nested more than %d levels deep; expected a flat file",
                                   KR_YAML_MAX_DEPTH);
                break;
            }
        } else if (type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT) {
            depth--;
        } else if (type == YAML_DOCUMENT_START_EVENT) {
            if (++docs > 1) {
                status = path_fail(path, line, err, "a second YAML document; expected one document");
                break;
            }
        } else if (type == YAML_STREAM_END_EVENT) {
            break;
        }
    }
    yaml_parser_delete(&p);
    return status;
}

int kr_yaml_load_bytes(const char *name, const char *bytes, size_t len, const char *expect,
                       kr_yaml_t *y, kr_error_t *err)
{
    memset(y, 0, sizeof *y);
    kr_strlcpy(y->path, name, sizeof y->path);
    if (len > KR_YAML_MAX_BYTES)
        return path_fail(y->path, 0, err, "file is %zu bytes; expected at most %d", len, KR_YAML_MAX_BYTES);
    kr_fnv1a64_hex(bytes, len, y->hash);
    if (prepass(y->path, bytes, len, err))
        return -1;
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return path_fail(y->path, 0, err, "out of memory");
    yaml_parser_set_input_string(&p, (const unsigned char *)bytes, len);
    if (!yaml_parser_load(&p, &y->doc)) {
        int rc = parser_fail(y->path, &p, bytes, len, err);
        yaml_parser_delete(&p);
        return rc;
    }
    yaml_parser_delete(&p);
    y->have_doc = 1;
    if (!yaml_document_get_root_node(&y->doc)) {
        kr_yaml_free(y);
        return path_fail(name, 1, err, "empty file; expected %s", expect ? expect : "a YAML mapping");
    }
    return 0;
}

int kr_yaml_load(const char *path, const char *expect, kr_yaml_t *y, kr_error_t *err)
{
    memset(y, 0, sizeof *y);
    /* Never an open that blocks: a FIFO is refused by what it is. */
    FILE *fp = file_fopen_regular(path, "a readable YAML file", err);
    if (!fp)
        return -1;
    char *buf = malloc((size_t)KR_YAML_MAX_BYTES + 1);
    if (!buf) {
        fclose(fp);
        return path_fail(path, 0, err, "out of memory");
    }
    size_t len = fread(buf, 1, (size_t)KR_YAML_MAX_BYTES + 1, fp);
    int read_error = ferror(fp);
    fclose(fp);
    if (read_error) {
        free(buf);
        return path_fail(path, 0, err, "read error; expected a readable YAML file");
    }
    if (len > KR_YAML_MAX_BYTES) {
        free(buf);
        return path_fail(path, 0, err, "file is larger than %d bytes; expected a small YAML file",
                         KR_YAML_MAX_BYTES);
    }
    int rc = kr_yaml_load_bytes(path, buf, len, expect, y, err);
    free(buf);
    return rc;
}

void kr_yaml_free(kr_yaml_t *y)
{
    if (y->have_doc)
        yaml_document_delete(&y->doc);
    y->have_doc = 0;
}

yaml_node_t *kr_yaml_root(kr_yaml_t *y)
{
    return y->have_doc ? yaml_document_get_root_node(&y->doc) : NULL;
}

int kr_yaml_line(const yaml_node_t *n)
{
    return n ? (int)n->start_mark.line + 1 : 0;
}

const char *kr_yaml_scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

static int is_plain(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
}

static int text_is_one_of(const char *s, const char *const *set)
{
    for (; *set; set++)
        if (!strcmp(s, *set))
            return 1;
    return 0;
}

static const char *const null_words[] = {"", "~", "null", "Null", "NULL", NULL};
static const char *const true_words[] = {"true", "True", "TRUE", NULL};
static const char *const false_words[] = {"false", "False", "FALSE", NULL};
static const char *const inf_words[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", NULL};
static const char *const ninf_words[] = {"-.inf", "-.Inf", "-.INF", NULL};

int kr_yaml_is_null(const yaml_node_t *n)
{
    return is_plain(n) && text_is_one_of(kr_yaml_scalar(n), null_words);
}

/* A plain decimal number: digits, one optional sign, '.', exponent. */
static int parse_number(const char *s, double *out)
{
    if (text_is_one_of(s, inf_words)) {
        *out = INFINITY;
        return 0;
    }
    if (text_is_one_of(s, ninf_words)) {
        *out = -INFINITY;
        return 0;
    }
    int digits = 0;
    for (const char *p = s; *p; p++) {
        if (isdigit((unsigned char)*p))
            digits++;
        else if (!strchr("+-.eE", *p))
            return -1;
    }
    if (!digits)
        return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || *end || errno == ERANGE || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

static int parse_integer(const char *s, long long *out)
{
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    if (!*p)
        return -1;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q))
            return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (*end || errno == ERANGE)
        return -1;
    *out = v;
    return 0;
}

const char *kr_yaml_kind(const yaml_node_t *n)
{
    if (!n)
        return "nothing";
    switch (n->type) {
    case YAML_MAPPING_NODE: return "a mapping";
    case YAML_SEQUENCE_NODE: return "a list";
    case YAML_SCALAR_NODE: {
        if (!is_plain(n))
            return "a string";
        const char *s = kr_yaml_scalar(n);
        double d;
        if (text_is_one_of(s, null_words))
            return "null";
        if (text_is_one_of(s, true_words) || text_is_one_of(s, false_words))
            return "a boolean";
        if (parse_number(s, &d) == 0)
            return "a number";
        return "a string";
    }
    default: return "nothing";
    }
}

void kr_yaml_quote(const yaml_node_t *n, char *buf, size_t cap)
{
    if (!cap)
        return;
    buf[0] = 0;
    const char *s = kr_yaml_scalar(n);
    if (!s)
        return;
    size_t len = n->data.scalar.length, o = 0;
    const size_t max = 60;
    for (size_t i = 0; i < len && i < max && o + 1 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[o++] = (c >= 0x20 && c < 0x7f) || c >= 0x80 ? (char)c : '?';
    }
    if (len > max && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = 0;
}

/* "'abc'", "the string \"1.5\"", "a list", "null": what a value is, for messages. */
static void describe(const yaml_node_t *n, char *buf, size_t cap)
{
    if (n && n->type == YAML_SCALAR_NODE && !kr_yaml_is_null(n)) {
        char q[80];
        kr_yaml_quote(n, q, sizeof q);
        if (is_plain(n))
            snprintf(buf, cap, "'%s'", q);
        else
            snprintf(buf, cap, "the quoted string \"%s\"", q);
        return;
    }
    kr_strlcpy(buf, kr_yaml_kind(n), cap);
}

static int type_fail(const kr_yaml_t *y, const yaml_node_t *n, const char *key, const char *expected,
                     kr_error_t *err)
{
    char got[100];
    describe(n, got, sizeof got);
    return kr_yaml_fail(y, n, 0, err, "%s: expected %s, got %s", key, expected, got);
}

int kr_yaml_seq_len(const yaml_node_t *seq)
{
    if (!seq || seq->type != YAML_SEQUENCE_NODE)
        return 0;
    ptrdiff_t n = seq->data.sequence.items.top - seq->data.sequence.items.start;
    return n > KR_YAML_MAX_ITEMS ? KR_YAML_MAX_ITEMS + 1 : (int)n;
}

yaml_node_t *kr_yaml_seq_item(kr_yaml_t *y, const yaml_node_t *seq, int i)
{
    if (i < 0 || i >= kr_yaml_seq_len(seq))
        return NULL;
    return yaml_document_get_node(&y->doc, seq->data.sequence.items.start[i]);
}

int kr_yaml_map_len(const yaml_node_t *map)
{
    if (!map || map->type != YAML_MAPPING_NODE)
        return 0;
    ptrdiff_t n = map->data.mapping.pairs.top - map->data.mapping.pairs.start;
    return n > KR_YAML_MAX_ITEMS ? KR_YAML_MAX_ITEMS + 1 : (int)n;
}

int kr_yaml_map_pair(kr_yaml_t *y, const yaml_node_t *map, int i, yaml_node_t **key,
                     yaml_node_t **value)
{
    if (i < 0 || i >= kr_yaml_map_len(map))
        return -1;
    const yaml_node_pair_t *pr = &map->data.mapping.pairs.start[i];
    *key = yaml_document_get_node(&y->doc, pr->key);
    *value = yaml_document_get_node(&y->doc, pr->value);
    return *key && *value ? 0 : -1;
}

/* n is a collection of the type wanted, of at most KR_YAML_MAX_ITEMS
 * entries; else the message names what was expected. */
static int expect_collection(const kr_yaml_t *y, const yaml_node_t *n, const char *key,
                             yaml_node_type_t type, const char *what, const char *entries,
                             const char *shorter, kr_error_t *err)
{
    if (!n || n->type != type)
        return type_fail(y, n, key, what, err);
    int len = type == YAML_SEQUENCE_NODE ? kr_yaml_seq_len(n) : kr_yaml_map_len(n);
    if (len > KR_YAML_MAX_ITEMS)
        return kr_yaml_fail(y, n, 0, err, "%s: more than %d %s; expected a shorter %s", key,
                            KR_YAML_MAX_ITEMS, entries, shorter);
    return 0;
}

int kr_yaml_expect_seq(const kr_yaml_t *y, const yaml_node_t *n, const char *key, kr_error_t *err)
{
    return expect_collection(y, n, key, YAML_SEQUENCE_NODE, "a list", "items", "list", err);
}

int kr_yaml_expect_map(const kr_yaml_t *y, const yaml_node_t *n, const char *key, kr_error_t *err)
{
    return expect_collection(y, n, key, YAML_MAPPING_NODE, "a mapping", "keys", "mapping", err);
}

/* A key's text, or NULL when the key is not a string scalar without NULs. */
static const char *key_text(const yaml_node_t *k)
{
    const char *s = kr_yaml_scalar(k);
    if (!s || strlen(s) != k->data.scalar.length)
        return NULL;
    return s;
}

int kr_yaml_check_map(const kr_yaml_t *y, const yaml_node_t *map, const char *what,
                      const char *const *allowed, kr_error_t *err)
{
    if (kr_yaml_expect_map(y, map, what, err))
        return -1;
    const int n = kr_yaml_map_len(map);
    /* kr_yaml_map_pair needs a non-const document only for the lookup. */
    kr_yaml_t *yy = (kr_yaml_t *)y;
    for (int i = 0; i < n; i++) {
        yaml_node_t *k, *v;
        if (kr_yaml_map_pair(yy, map, i, &k, &v))
            return kr_yaml_fail(y, map, 0, err, "%s: malformed mapping; expected key: value pairs", what);
        const char *ks = key_text(k);
        if (!ks) {
            char got[100];
            describe(k, got, sizeof got);
            return kr_yaml_fail(y, k, 0, err, "%s: a key is %s; expected a plain string key", what, got);
        }
        int known = 0;
        for (const char *const *a = allowed; *a && !known; a++)
            known = !strcmp(ks, *a);
        if (!known) {
            char list[512] = "";
            size_t o = 0;
            for (const char *const *a = allowed; *a && o < sizeof list; a++) {
                int w = snprintf(list + o, sizeof list - o, "%s%s", a == allowed ? "" : ", ", *a);
                if (w < 0)
                    break;
                o += (size_t)w;
            }
            char q[80];
            kr_yaml_quote(k, q, sizeof q);
            return kr_yaml_fail(y, k, 0, err, "unknown key '%s' in %s; expected one of: %s", q, what, list);
        }
        for (int j = 0; j < i; j++) {
            yaml_node_t *k2, *v2;
            if (kr_yaml_map_pair(yy, map, j, &k2, &v2) == 0 && key_text(k2) && !strcmp(key_text(k2), ks))
                return kr_yaml_fail(y, k, 0, err, "duplicate key '%s' in %s (first on line %d); expected each key once",
                                    ks, what, kr_yaml_line(k2));
        }
    }
    return 0;
}

yaml_node_t *kr_yaml_get(kr_yaml_t *y, const yaml_node_t *map, const char *key, int *key_line)
{
    const int n = kr_yaml_map_len(map);
    for (int i = 0; i < n && i < KR_YAML_MAX_ITEMS; i++) {
        yaml_node_t *k, *v;
        if (kr_yaml_map_pair(y, map, i, &k, &v))
            continue;
        const char *ks = key_text(k);
        if (ks && !strcmp(ks, key)) {
            if (key_line)
                *key_line = kr_yaml_line(k);
            return v;
        }
    }
    return NULL;
}

int kr_yaml_get_str(const kr_yaml_t *y, const yaml_node_t *n, const char *key, char *buf,
                    size_t cap, kr_error_t *err)
{
    const char *s = kr_yaml_scalar(n);
    if (!s || kr_yaml_is_null(n))
        return type_fail(y, n, key, "a string", err);
    size_t len = n->data.scalar.length;
    if (strlen(s) != len)
        return kr_yaml_fail(y, n, 0, err, "%s: the string holds a NUL character; expected text", key);
    if (len + 1 > cap)
        return kr_yaml_fail(y, n, 0, err, "%s: the string is %zu bytes long; expected at most %zu", key,
                            len, cap ? cap - 1 : 0);
    memcpy(buf, s, len + 1);
    return 0;
}

int kr_yaml_get_double(const kr_yaml_t *y, const yaml_node_t *n, const char *key, double *out,
                       kr_error_t *err)
{
    const char *s = kr_yaml_scalar(n);
    if (!s || !is_plain(n) || strlen(s) != n->data.scalar.length || parse_number(s, out))
        return type_fail(y, n, key, "a number", err);
    return 0;
}

int kr_yaml_get_int(const kr_yaml_t *y, const yaml_node_t *n, const char *key, long long lo,
                    long long hi, long long *out, kr_error_t *err)
{
    const char *s = kr_yaml_scalar(n);
    long long v;
    if (!s || !is_plain(n) || strlen(s) != n->data.scalar.length || parse_integer(s, &v))
        return type_fail(y, n, key, "an integer", err);
    if (v < lo || v > hi) {
        char what[96];
        snprintf(what, sizeof what, "an integer in [%lld, %lld]", lo, hi);
        return type_fail(y, n, key, what, err);
    }
    *out = v;
    return 0;
}

int kr_yaml_get_bool(const kr_yaml_t *y, const yaml_node_t *n, const char *key, int *out,
                     kr_error_t *err)
{
    const char *s = kr_yaml_scalar(n);
    if (s && is_plain(n) && text_is_one_of(s, true_words)) {
        *out = 1;
        return 0;
    }
    if (s && is_plain(n) && text_is_one_of(s, false_words)) {
        *out = 0;
        return 0;
    }
    return type_fail(y, n, key, "true or false", err);
}
