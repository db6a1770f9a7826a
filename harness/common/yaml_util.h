/* Shared libyaml helpers for the suite and policy files.
 *
 * A file is parsed with libyaml's document API (yaml_parser_load), never by
 * hand.  Before the document is built, one pass over libyaml's events bounds
 * the input: at most KR_YAML_MAX_BYTES bytes, nesting at most
 * KR_YAML_MAX_DEPTH deep, one document.  Nothing here recurses, so no input
 * (however deep, however aliased, even an alias cycle) can exhaust the stack.
 *
 * Every error is one line,
 *
 *     PATH:LINE: what is wrong; expected what
 *
 * with LINE 1-based (libyaml's marks are 0-based), and the typed getters say
 *
 *     PATH:LINE: KEY: expected a number, got 'abc'
 *
 * where KEY is the dotted path of the value ("cases[1].synth.m[2]").
 *
 * Scalars follow the YAML 1.2 core schema, strictly: a number, boolean or
 * null is a plain (unquoted) scalar; a quoted "1.5" is a string.  Integers
 * are decimal; numbers also take .inf / -.inf (never .nan); booleans are
 * true / false (also True, TRUE, False, FALSE); null is null, Null, NULL, ~
 * or nothing. */
#ifndef KR_YAML_UTIL_H
#define KR_YAML_UTIL_H

#include <stddef.h>

#include <yaml.h>

#include "kr_error.h"

#define KR_YAML_MAX_BYTES (1 << 20)  /* a suite or policy file is small */
#define KR_YAML_MAX_DEPTH 32         /* nesting of lists and mappings */
#define KR_YAML_MAX_ITEMS 4096       /* items of one list or mapping the helpers will walk */

typedef struct {
    char path[1024];            /* for messages, as given */
    yaml_document_t doc;
    int have_doc;
    char hash[17];              /* 64-bit FNV-1a of the file bytes, 16 lowercase hex digits */
} kr_yaml_t;

/* Reads and parses PATH.  Returns 0, or -1 with err ("PATH:LINE: YAML syntax
 * error: ...", "PATH: cannot read: ...").  An empty document is an error
 * ("PATH:1: empty file; expected <expect>"). */
int kr_yaml_load(const char *path, const char *expect, kr_yaml_t *y, kr_error_t *err);
/* The same on bytes in memory; NAME stands for the path in messages. */
int kr_yaml_load_bytes(const char *name, const char *bytes, size_t len, const char *expect,
                       kr_yaml_t *y, kr_error_t *err);
void kr_yaml_free(kr_yaml_t *y);

/* 64-bit FNV-1a of n bytes, as 16 lowercase hex digits into out[17]. */
void kr_fnv1a64_hex(const void *bytes, size_t n, char out[17]);

yaml_node_t *kr_yaml_root(kr_yaml_t *y);
/* 1-based line of a node (0 for NULL). */
int kr_yaml_line(const yaml_node_t *n);
/* "a mapping", "a list", "a string", "a number", "null", ... for messages. */
const char *kr_yaml_kind(const yaml_node_t *n);
int kr_yaml_is_null(const yaml_node_t *n);
/* A scalar's text (NUL-terminated by libyaml), or NULL if n is not a scalar. */
const char *kr_yaml_scalar(const yaml_node_t *n);

/* Formats "PATH:LINE: " + fmt into err and returns -1.  LINE is the node's
 * (or `line` when node is NULL). */
int kr_yaml_fail(const kr_yaml_t *y, const yaml_node_t *node, int line, kr_error_t *err,
                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Copies a scalar's text for a message: at most 60 characters, non-printable
 * bytes as '?', and "..." when cut. */
void kr_yaml_quote(const yaml_node_t *n, char *buf, size_t cap);

/* Checks that MAP is a mapping whose keys are plain strings, each at most
 * once, all in ALLOWED (NULL-terminated).  WHAT names the mapping in
 * messages ("the suite", "cases[0]"); the unknown-key error lists ALLOWED. */
int kr_yaml_check_map(const kr_yaml_t *y, const yaml_node_t *map, const char *what,
                      const char *const *allowed, kr_error_t *err);
/* The value of KEY in MAP, or NULL when absent (a present null value is
 * returned: test it with kr_yaml_is_null).  *key_line gets the key's line
 * when not NULL. */
yaml_node_t *kr_yaml_get(kr_yaml_t *y, const yaml_node_t *map, const char *key, int *key_line);
/* List access: the length (capped at KR_YAML_MAX_ITEMS + 1 so a caller can
 * refuse long lists) and the i-th item. */
int kr_yaml_seq_len(const yaml_node_t *seq);
yaml_node_t *kr_yaml_seq_item(kr_yaml_t *y, const yaml_node_t *seq, int i);
/* Mapping access by position: pair i's key node and value node. */
int kr_yaml_map_len(const yaml_node_t *map);
int kr_yaml_map_pair(kr_yaml_t *y, const yaml_node_t *map, int i, yaml_node_t **key,
                     yaml_node_t **value);

/* Typed getters.  KEY is the value's path for messages.  Each returns 0, or
 * -1 with "PATH:LINE: KEY: expected ..., got '...'". */
int kr_yaml_expect_seq(const kr_yaml_t *y, const yaml_node_t *n, const char *key, kr_error_t *err);
int kr_yaml_expect_map(const kr_yaml_t *y, const yaml_node_t *n, const char *key, kr_error_t *err);
/* A string scalar (plain or quoted; a plain null, number or boolean is
 * refused only when it is null).  Longer than cap-1 bytes is an error. */
int kr_yaml_get_str(const kr_yaml_t *y, const yaml_node_t *n, const char *key, char *buf,
                    size_t cap, kr_error_t *err);
int kr_yaml_get_double(const kr_yaml_t *y, const yaml_node_t *n, const char *key, double *out,
                       kr_error_t *err);
/* A decimal integer in [lo, hi]. */
int kr_yaml_get_int(const kr_yaml_t *y, const yaml_node_t *n, const char *key, long long lo,
                    long long hi, long long *out, kr_error_t *err);
int kr_yaml_get_bool(const kr_yaml_t *y, const yaml_node_t *n, const char *key, int *out,
                     kr_error_t *err);

#endif
