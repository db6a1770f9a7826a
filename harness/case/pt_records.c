/* pt_records: a torch.save file's largest record, for a read that timed
 * out (pt_records.h). */
#include "pt_records.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "isolate.h"
#include "kr_string.h"
#include "torch_pt.h"

typedef struct {
    uint64_t size, compressed;
    char name[256];
} largest_t;

/* In a child: the central directory's largest entry. */
static int find_largest(void *ctx, void *out, size_t out_bytes, kr_error_t *err)
{
    const char *path = ctx;
    largest_t *l = out;
    if (out_bytes < sizeof *l)
        return kr_fail(err, "pt_records: no room for the answer");
    memset(l, 0, sizeof *l);
    int code = 0;
    zip_t *za = zip_open(path, ZIP_RDONLY, &code);
    if (!za)
        return kr_fail(err, "%s: not a readable zip", path);
    const zip_int64_t n = zip_get_num_entries(za, 0);
    for (zip_int64_t i = 0; i < n; i++) {
        zip_stat_t st;
        zip_stat_init(&st);
        if (zip_stat_index(za, (zip_uint64_t)i, ZIP_FL_ENC_RAW, &st) != 0 ||
            !(st.valid & ZIP_STAT_SIZE) || st.size <= l->size)
            continue;
        l->size = st.size;
        l->compressed = (st.valid & ZIP_STAT_COMP_SIZE) ? st.comp_size : 0;
        kr_str_printable(st.name ? st.name : "?", l->name, sizeof l->name);
    }
    zip_discard(za);
    return 0;
}

void pt_records_timeout_note(const char *path, char *note, size_t cap)
{
    note[0] = '\0';
    largest_t l;
    isolate_result_t ir;
    kr_error_t err = {{0}};
    if (isolate_run(find_largest, (void *)path, &l, sizeof l, 10.0, &ir, &err) != 0 ||
        ir.status != ISOLATE_OK || l.size == 0)
        return;
    const char *env = getenv(PT_MAX_MB_ENV);
    const long long limit_mb = env && atoll(env) > 0 ? atoll(env) : PT_DEFAULT_MAX_MB;
    snprintf(note, cap,
             "; its largest record, %s, inflates to %llu MiB from %llu bytes (the size limit is "
             "%lld MiB: " PT_MAX_MB_ENV "=N below it refuses such a file at once, "
             "KREPLAY_READ_TIMEOUT=S gives the read more time)",
             l.name, (unsigned long long)(l.size >> 20), (unsigned long long)l.compressed, limit_mb);
}
