/* suite_internal: what the parts of the suite parser share (suite.h is
 * its interface).
 *
 * The parser is split by what it reads, each file calling only those
 * listed after it:
 *   suite.c        the YAML root: name, kernels, python, references,
 *                  bands, reruns, device, policy, the cases: list; loading
 *                  and freeing a suite
 *   suite_synth.c  a synth: item (shapes, m, seeds, the synth_params_t
 *                  fields) and the cases it makes
 *   suite_files.c  a files: item's globs expanded to case files
 *   suite_yaml.c   the list helpers all of them read with */
#ifndef KR_SUITE_INTERNAL_H
#define KR_SUITE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "kr_error.h"
#include "shape_catalog.h"
#include "suite.h"
#include "yaml_util.h"

#define SUITE_MAX_FILES 100000
#define SUITE_PATH_MAX 4096

/* One suite being loaded. */
typedef struct {
    kr_yaml_t y;
    suite_t *s;
    char dir[SUITE_PATH_MAX];   /* the suite file's directory */
    shape_catalog_t cat;
    int have_cat;
    int64_t files_cap;
} loader_t;

/* ---- suite_yaml.c ---- */

/* The length of the sequence `list` (the value of `key`), or -1 with the
 * error said when it is not a sequence or is empty; `expect` says what
 * belongs in it. */
int suite_nonempty_seq(kr_yaml_t *y, yaml_node_t *list, const char *key, const char *expect,
                       kr_error_t *err);

/* Item i of the list `list_key`, and its name in messages ("kernels[2]")
 * in key. */
yaml_node_t *suite_seq_item_named(kr_yaml_t *y, yaml_node_t *list, const char *list_key, int i,
                                  char *key, size_t key_cap);

/* item appended to the comma-joined list dst (cap bytes); -1 when it does
 * not fit. */
int suite_append_csv(char *dst, size_t cap, const char *item);

/* ---- suite_files.c ---- */

/* dst = DIR/rel (or rel when absolute, or when DIR is ".").  -1 when too long. */
int suite_join_path(const char *dir, const char *rel, char *dst, size_t cap);

/* files: [globs] of one cases: item (named `key` in messages): every file
 * each glob matches added to the suite; a glob matching none is an error. */
int suite_parse_files(loader_t *L, yaml_node_t *list, const char *key, kr_error_t *err);

/* The suite's files sorted, each once. */
void suite_sort_unique_files(suite_t *s);

/* ---- suite_synth.c ---- */

/* One synth: item (`map`, named `key` in messages; `line` of its key) into
 * *ss. */
int suite_parse_synth(loader_t *L, yaml_node_t *map, const char *key, int line, suite_synth_t *ss,
                      kr_error_t *err);

#endif
