/* suite_yaml: the YAML list helpers every part of the suite parser
 * (suite_internal.h) reads with: a list that must not be empty, an item
 * named for messages, a comma-joined list.  The lowest of the parser's
 * parts: it calls none of them. */
#include "suite_internal.h"

#include <stdio.h>
#include <string.h>

int suite_append_csv(char *dst, size_t cap, const char *item)
{
    size_t l = strlen(dst), il = strlen(item);
    size_t need = l + (l ? 1 : 0) + il + 1;
    if (need > cap)
        return -1;
    if (l)
        dst[l++] = ',';
    memcpy(dst + l, item, il + 1);
    return 0;
}

/* The length of the sequence `list` (the value of `key`), or -1 with the
 * error said when it is not a sequence or is empty; `expect` says what
 * belongs in it. */
int suite_nonempty_seq(kr_yaml_t *y, yaml_node_t *list, const char *key, const char *expect,
                       kr_error_t *err)
{
    if (kr_yaml_expect_seq(y, list, key, err))
        return -1;
    const int n = kr_yaml_seq_len(list);
    if (n == 0)
        return kr_yaml_fail(y, list, 0, err, "%s: the list is empty; expected %s", key, expect);
    return n;
}

/* Item i of the list `list_key`, and its name in messages ("kernels[2]")
 * in key. */
yaml_node_t *suite_seq_item_named(kr_yaml_t *y, yaml_node_t *list, const char *list_key, int i,
                                  char *key, size_t key_cap)
{
    snprintf(key, key_cap, "%s[%d]", list_key, i);
    return kr_yaml_seq_item(y, list, i);
}
