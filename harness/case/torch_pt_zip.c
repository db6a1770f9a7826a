/* torch_pt_zip: the zip layer of a torch.save file: its records, each read
 * whole and bounded, and a tensor's bytes gathered from its storage record. */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "array_grow.h"
#include "torch_pt_internal.h"

/* Index of record PREFIX/<rel>, or -1. */
zip_int64_t pt_record_locate(const pt_file_t *f, const char *rel)
{
    size_t len = strlen(f->prefix) + 1 + strlen(rel) + 1;
    char *name = malloc(len);
    if (!name)
        return -1;
    snprintf(name, len, "%s/%s", f->prefix, rel);
    zip_int64_t idx = zip_name_locate(f->za, name, ZIP_FL_ENC_RAW);
    free(name);
    return idx;
}

/* Size of record idx, refusing one whose claimed size is implausible for its
 * compressed size (a deflate stream expands at most ~1032:1). */
int pt_record_size(const pt_file_t *f, zip_int64_t idx, const char *rel, uint64_t *size,
                       kr_error_t *err)
{
    zip_stat_t st;
    zip_stat_init(&st);
    if (zip_stat_index(f->za, (zip_uint64_t)idx, ZIP_FL_ENC_RAW, &st) != 0 ||
        !(st.valid & ZIP_STAT_SIZE) || !(st.valid & ZIP_STAT_COMP_SIZE) ||
        !(st.valid & ZIP_STAT_COMP_METHOD))
        return ffail(f, err, rel, "cannot read the record's zip entry (corrupt zip?); expected a "
                                  "readable central directory entry");
    if (st.comp_method == ZIP_CM_STORE ? st.size != st.comp_size
                                       : st.size / 1100 > st.comp_size + 4096)
        return ffail(f, err, rel, "the record claims %llu bytes from %llu compressed bytes "
                                  "(corrupt zip?); expected a plausible compression ratio",
                     (unsigned long long)st.size, (unsigned long long)st.comp_size);
    if (st.size > f->max_bytes)
        return ffail(f, err, rel, "the record inflates to %llu bytes (%llu compressed), over the "
                                  "limit of %llu MiB; expected at most that (" PT_MAX_MB_ENV
                                  " raises it)", (unsigned long long)st.size,
                     (unsigned long long)st.comp_size, (unsigned long long)(f->max_bytes >> 20));
    *size = st.size;
    return 0;
}

/* The byte limit from PT_MAX_MB_ENV, or the default. */
int pt_read_max_bytes(pt_file_t *f, kr_error_t *err)
{
    const char *env = getenv(PT_MAX_MB_ENV);
    f->max_bytes = (uint64_t)PT_DEFAULT_MAX_MB << 20;
    if (!env)
        return 0;
    char *end = NULL;
    errno = 0;
    unsigned long long mb = strtoull(env, &end, 10);
    if (errno || end == env || *end || env[0] == '-' || mb < 1 || mb > PT_MAX_MB_CEILING)
        return kr_fail(err, "%s: " PT_MAX_MB_ENV "=\"%.40s\" is not a limit; expected a whole "
                            "number of MiB from 1 to %d", f->path, env, PT_MAX_MB_CEILING);
    f->max_bytes = (uint64_t)mb << 20;
    return 0;
}

/* Reads record idx (exactly `size` bytes) into a malloc'd buffer with one
 * spare NUL byte. */
int pt_record_read(const pt_file_t *f, zip_int64_t idx, const char *rel, uint64_t size,
                       uint8_t **out, kr_error_t *err)
{
    if (size >= SIZE_MAX)
        return ffail(f, err, rel, "the record's %llu bytes do not fit in memory; expected a "
                                  "smaller record", (unsigned long long)size);
    uint8_t *buf = malloc((size_t)size + 1);
    if (!buf)
        return ffail(f, err, rel, "out of memory reading %llu bytes; expected to fit in memory",
                     (unsigned long long)size);
    zip_file_t *zf = zip_fopen_index(f->za, (zip_uint64_t)idx, 0);
    if (!zf) {
        free(buf);
        return ffail(f, err, rel, "cannot open the record (%s; corrupt or encrypted zip?); "
                                  "expected a readable stored or deflated record",
                     zip_strerror(f->za));
    }
    uint64_t got = 0;
    while (got < size) {
        zip_int64_t r = zip_fread(zf, buf + got, size - got);
        if (r < 0) {
            char why[256];
            snprintf(why, sizeof why, "%s", zip_file_strerror(zf));
            zip_fclose(zf);
            free(buf);
            return ffail(f, err, rel, "reading the record failed after %llu of %llu bytes (%s; "
                                      "truncated or corrupt zip?); expected the whole record",
                         (unsigned long long)got, (unsigned long long)size, why);
        }
        if (r == 0)
            break;
        got += (uint64_t)r;
    }
    /* One more read to the end lets libzip verify the CRC of the record. */
    uint8_t extra;
    zip_int64_t r = got == size ? zip_fread(zf, &extra, 1) : 0;
    int cl = zip_fclose(zf);
    if (got != size || r != 0 || cl != 0) {
        free(buf);
        return ffail(f, err, rel, "the record holds %s than its %llu bytes, or fails its CRC "
                                  "(truncated or corrupt zip?); expected an intact record",
                     got < size ? "fewer" : "more", (unsigned long long)size);
    }
    buf[size] = 0;
    *out = buf;
    return 0;
}

/* ---- tensor data ---- */

static int host_is_little(void)
{
    const uint16_t one = 1;
    uint8_t b;
    memcpy(&b, &one, 1);
    return b == 1;
}

int pt_tensor_read(pt_file_t *f, const pt_tensor_t *t, const char *what, void **data,
                   kr_error_t *err)
{
    *data = NULL;
    if (!what)
        what = "tensor";
    size_t es = pt_dtype_size(t->dtype);
    if (es == 0 || t->numel < 0 || (uint64_t)t->numel > SIZE_MAX / es / 2 ||
        (uint64_t)t->numel > f->max_bytes / es)
        return ffail(f, err, what, "a tensor of %lld elements is over the limit of %llu MiB; "
                                   "expected a smaller tensor (" PT_MAX_MB_ENV " raises it)",
                     (long long)t->numel, (unsigned long long)(f->max_bytes >> 20));
    char rel[64];
    snprintf(rel, sizeof rel, "data/%s", t->key);
    zip_int64_t idx = pt_record_locate(f, rel);
    uint64_t size;
    if (idx < 0)
        return ffail(f, err, what, "record %s/%s is missing; expected the tensor's storage",
                     f->prefix, rel);
    if (pt_record_size(f, idx, rel, &size, err))
        return -1;
    if (size != (uint64_t)t->storage_bytes)
        return ffail(f, err, what, "record %s/%s holds %llu bytes; expected %lld", f->prefix, rel,
                     (unsigned long long)size, (long long)t->storage_bytes);
    uint8_t *st = NULL;
    if (pt_record_read(f, idx, rel, size, &st, err))
        return -1;
    size_t bytes = (size_t)t->numel * es;
    uint8_t *o = malloc(bytes ? bytes : 1);
    if (!o) {
        free(st);
        return ffail(f, err, what, "out of memory for %lld elements; expected to fit in memory",
                     (long long)t->numel);
    }
    /* pt_open checked offset + sum((size-1)*stride) < the storage's elements. */
    if (t->numel > 0 && t->contiguous) {
        memcpy(o, st + (size_t)t->offset * es, bytes);
    } else if (t->numel > 0) {
        int64_t idxs[PT_MAX_RANK] = {0};
        int64_t src = t->offset;
        for (int64_t i = 0; i < t->numel; i++) {
            memcpy(o + (size_t)i * es, st + (size_t)src * es, es);
            for (int d = t->rank - 1; d >= 0; d--) {
                if (++idxs[d] < t->sizes[d]) {
                    src += t->strides[d];
                    break;
                }
                src -= (idxs[d] - 1) * t->strides[d];
                idxs[d] = 0;
            }
        }
    }
    free(st);
    if (es > 1 && !host_is_little()) {
        for (size_t i = 0; i < bytes; i += es)
            for (size_t a = 0, b = es - 1; a < b; a++, b--) {
                uint8_t tmp = o[i + a];
                o[i + a] = o[i + b];
                o[i + b] = tmp;
            }
    }
    *data = o;
    return 0;
}
