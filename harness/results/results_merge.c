/* results_merge: shard results files merged into one (results_store.h's
 * results_store_merge).
 *
 * Separate from results_store.c, the file format, because a merge reads
 * its shards through the reading process (results_reader.c) and refuses
 * repeated rows (results_validate.c), both of which build on the format:
 * here the arrows point down only. */
#include "results_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result_order.h"
#include "results_validate.h"

/* "i/n" -> 1 with *i, *n (1 <= i <= n); anything else -> 0. */
static int parse_shard(const char *s, int *i, int *n)
{
    int a, b, used = 0;
    if (sscanf(s, "%d/%d%n", &a, &b, &used) != 2 || s[used] != '\0' || b < 1 || a < 1 || a > b)
        return 0;
    *i = a;
    *n = b;
    return 1;
}

int results_store_merge(const char **paths, int n, const char *out_path, kr_error_t *err)
{
    if (!paths || n < 1)
        return kr_fail(err, "%s: merge: no input files; expected at least one shard results file",
                       out_path ? out_path : "(null)");
    results_meta_t *metas = calloc((size_t)n, sizeof *metas);
    int *sh_i = calloc((size_t)n, sizeof *sh_i), *sh_n = calloc((size_t)n, sizeof *sh_n);
    result_list_t all = {0}, sorted = {0};
    int64_t *src = NULL, *perm = NULL;
    int rc = -1;
    if (!metas || !sh_i || !sh_n) {
        kr_fail(err, "%s: merge: out of memory; expected to fit in memory", out_path);
        goto done;
    }
    for (int f = 0; f < n; f++) {
        result_list_t part;
        if (results_store_read(paths[f], &part, &metas[f], err) != 0)
            goto done;
        if (results_check_unique(&part, paths[f], err)) {
            result_list_free(&part);
            goto done;
        }
        if (strcmp(metas[f].suite_hash, metas[0].suite_hash) != 0) {
            kr_fail(err, "%s: suite_hash: \"%s\" differs from \"%s\" in %s; expected shards of "
                         "one suite", paths[f], metas[f].suite_hash, metas[0].suite_hash,
                    paths[0]);
            result_list_free(&part);
            goto done;
        }
        if (parse_shard(metas[f].shard, &sh_i[f], &sh_n[f])) {
            for (int g = 0; g < f; g++) {
                if (!sh_n[g])
                    continue;
                if (sh_n[g] != sh_n[f] || sh_i[g] == sh_i[f]) {
                    kr_fail(err, "%s: shard: \"%s\" %s shard \"%s\" of %s; expected distinct "
                                 "shards i/n of one split", paths[f], metas[f].shard,
                            sh_n[g] != sh_n[f] ? "is from another split than" : "repeats",
                            metas[g].shard, paths[g]);
                    result_list_free(&part);
                    goto done;
                }
            }
        }
        int64_t *s2 = realloc(src, (size_t)(all.count + part.count + 1) * sizeof *s2);
        if (!s2) {
            result_list_free(&part);
            kr_fail(err, "%s: merge: out of memory; expected to fit in memory", out_path);
            goto done;
        }
        src = s2;
        for (int64_t r = 0; r < part.count; r++) {
            result_t *row = result_list_add(&all);
            if (!row) {
                result_list_free(&part);
                kr_fail(err, "%s: merge: out of memory; expected to fit in memory", out_path);
                goto done;
            }
            *row = part.rows[r];
            src[all.count - 1] = f;
        }
        result_list_free(&part);
    }
    if ((perm = result_order(all.rows, all.count, result_key_cmp)) == NULL) {
        kr_fail(err, "%s: merge: out of memory; expected to fit in memory", out_path);
        goto done;
    }
    for (int64_t k = 1; k < all.count; k++) {
        const result_t *a = &all.rows[perm[k - 1]], *b = &all.rows[perm[k]];
        if (src[perm[k - 1]] != src[perm[k]] && result_key_cmp(a, b) == 0) {
            kr_fail(err, "%s: rows: case %s, kernel %s, reference %s is also in %s (overlapping "
                         "shards); expected each row in exactly one shard",
                    paths[src[perm[k]]], b->case_path, b->kernel, b->reference,
                    paths[src[perm[k - 1]]]);
            goto done;
        }
    }
    sorted.rows = malloc((size_t)(all.count ? all.count : 1) * sizeof *sorted.rows);
    if (!sorted.rows) {
        kr_fail(err, "%s: merge: out of memory; expected to fit in memory", out_path);
        goto done;
    }
    sorted.count = sorted.cap = all.count;
    for (int64_t k = 0; k < all.count; k++)
        sorted.rows[k] = all.rows[perm[k]];
    /* One case under two paths in two shards is still one case twice. */
    if (results_check_unique(&sorted, out_path, err))
        goto done;
    results_meta_t out_meta = metas[0];
    snprintf(out_meta.shard, sizeof out_meta.shard, "merged %d of %d", n, sh_n[0] ? sh_n[0] : n);
    rc = results_store_write(out_path, &sorted, &out_meta, err);
done:
    result_list_free(&all);
    result_list_free(&sorted);
    free(src);
    free(perm);
    free(metas);
    free(sh_i);
    free(sh_n);
    return rc;
}
