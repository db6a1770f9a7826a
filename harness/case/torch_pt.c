/* torch_pt: torch.save files (zip + the pickle subset torch.save emits for a
 * dict of tensors and ints), read without Python.  See torch_pt.h for what is
 * supported and what is refused.  This file holds the open file and its
 * values, and pt_open, on top of the others: the dtypes (torch_pt_types.c),
 * the zip layer (torch_pt_zip.c), the pickle machine's state (torch_pt_vm.c),
 * the globals and tensor rebuild (torch_pt_rebuild.c) and the opcode loop
 * (torch_pt_pickle.c); each calls only those listed before it.
 *
 * Values are never freed individually: every one is registered with the file
 * and freed by pt_close, so memo aliases, shared storages and even cycles (a
 * list appended to itself) need no bookkeeping. */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zip.h>

#include "array_grow.h"
#include "torch_pt_internal.h"

/* ---- the file ---- */

const char *pt_path(const pt_file_t *f)
{
    return f ? f->path : NULL;
}

const pt_value_t *pt_root(const pt_file_t *f)
{
    return f ? f->root : NULL;
}

const pt_value_t *pt_dict_get(const pt_value_t *dict, const char *key)
{
    if (!dict || dict->kind != PT_DICT || !key)
        return NULL;
    size_t kl = strlen(key);
    for (int64_t j = dict->n - 1; j >= 0; j--) {
        const pt_value_t *k = dict->items[2 * j];
        if (k && k->kind == PT_STR && k->slen == kl && memcmp(k->s, key, kl) == 0)
            return dict->items[2 * j + 1];
    }
    return NULL;
}

static void value_free(pt_value_t *v)
{
    if (!v)
        return;
    free((void *)v->s);
    free(v->items);
    free(v->tensor);
    free(v);
}

void pt_close(pt_file_t *f)
{
    if (!f)
        return;
    for (int64_t i = 0; i < f->nobjs; i++)
        value_free(f->objs[i]);
    free(f->objs);
    if (f->za)
        zip_discard(f->za);   /* read-only: nothing to write back */
    free(f->prefix);
    free(f->path);
    free(f);
}

/* ---- opening ---- */

static int open_zip(pt_file_t *f, kr_error_t *err)
{
    int code = 0;
    f->za = zip_open(f->path, ZIP_RDONLY | ZIP_CHECKCONS, &code);
    if (f->za)
        return 0;
    zip_error_t ze;
    zip_error_init_with_code(&ze, code);
    const char *why = zip_error_strerror(&ze);
    char whybuf[256];
    snprintf(whybuf, sizeof whybuf, "%s", why ? why : "unknown error");
    zip_error_fini(&ze);
    if (code == ZIP_ER_NOZIP)
        return ffail(f, err, "file", "not a zip archive (no end-of-central-directory record: "
                                     "truncated, or the legacy non-zip torch.save format?); "
                                     "expected a torch.save zip file");
    if (code == ZIP_ER_INCONS)
        return ffail(f, err, "file", "the zip archive is inconsistent (%s: truncated or corrupt "
                                     "file?); expected a complete torch.save zip file", whybuf);
    return ffail(f, err, "file", "cannot open as a zip archive (%s); expected a readable "
                                 "torch.save zip file", whybuf);
}

/* PREFIX/data.pkl: exactly one, PREFIX one path component. */
static int find_pickle(pt_file_t *f, zip_int64_t *idx, kr_error_t *err)
{
    zip_int64_t n = zip_get_num_entries(f->za, 0), found = -1;
    if (n < 0)
        return ffail(f, err, "file", "cannot list the zip archive; expected a readable central "
                                     "directory");
    for (zip_int64_t i = 0; i < n; i++) {
        const char *name = zip_get_name(f->za, (zip_uint64_t)i, ZIP_FL_ENC_RAW);
        if (!name)
            continue;
        size_t len = strlen(name);
        if (len <= 9 || strcmp(name + len - 9, "/data.pkl") != 0)
            continue;
        size_t pl = len - 9;
        if (pl > 1024 || memchr(name, '/', pl))
            continue;
        if (found >= 0)
            return ffail(f, err, "data.pkl", "the zip holds more than one PREFIX/data.pkl record; "
                                             "expected exactly one (one torch.save object)");
        found = i;
        free(f->prefix);
        f->prefix = malloc(pl + 1);
        if (!f->prefix)
            return ffail(f, err, "file", "out of memory; expected to fit in memory");
        memcpy(f->prefix, name, pl);
        f->prefix[pl] = 0;
    }
    if (found < 0)
        return ffail(f, err, "data.pkl", "the zip has no PREFIX/data.pkl record (a zip, but not a "
                                         "torch.save file?); expected the record torch.save "
                                         "writes the pickled object to");
    *idx = found;
    return 0;
}

static int check_byteorder(pt_file_t *f, kr_error_t *err)
{
    zip_int64_t idx = pt_record_locate(f, "byteorder");
    if (idx < 0)
        return 0;   /* older torch: little-endian without saying so */
    uint64_t size;
    uint8_t *buf = NULL;
    if (pt_record_size(f, idx, "byteorder", &size, err))
        return -1;
    if (size > 16)
        return ffail(f, err, "byteorder", "the record holds %llu bytes; expected \"little\"",
                     (unsigned long long)size);
    if (pt_record_read(f, idx, "byteorder", size, &buf, err))
        return -1;
    int ok = size == 6 && memcmp(buf, "little", 6) == 0;
    char pb[64];
    pt_printable((const char *)buf, (size_t)size, pb, sizeof pb);
    free(buf);
    if (!ok)
        return ffail(f, err, "byteorder", "\"%s\" is " SUBSET " (big-endian data); expected "
                                          "\"little\"", pb);
    return 0;
}

int pt_open(const char *path, pt_file_t **out, kr_error_t *err)
{
    if (!out)
        return kr_fail(err, "%s: file: NULL output; expected a pt_file_t ** to fill",
                       path ? path : "(null)");
    *out = NULL;
    if (!path)
        return kr_fail(err, "(null): file: no path given; expected a torch.save file path");
    pt_file_t *f = calloc(1, sizeof *f);
    if (!f || !(f->path = strdup(path))) {
        free(f);
        return kr_fail(err, "%s: file: out of memory; expected to fit in memory", path);
    }
    vm_t vm;
    memset(&vm, 0, sizeof vm);
    uint8_t *pkl = NULL;
    zip_int64_t idx = -1;
    uint64_t size;
    int rc = -1;
    if (pt_read_max_bytes(f, err) || open_zip(f, err) || find_pickle(f, &idx, err) || check_byteorder(f, err) ||
        pt_record_size(f, idx, "data.pkl", &size, err))
        goto done;
    if (size > PT_MAX_PICKLE_BYTES) {
        ffail(f, err, "data.pkl", "the pickle is %llu bytes; expected at most %zu (a dict of "
                                  "tensors and ints)", (unsigned long long)size,
              PT_MAX_PICKLE_BYTES);
        goto done;
    }
    if (pt_record_read(f, idx, "data.pkl", size, &pkl, err))
        goto done;
    vm.f = f;
    vm.p = pkl;
    vm.n = (size_t)size;
    vm.err = err;
    if (pt_run_vm(&vm, &f->root))
        goto done;
    *out = f;
    f = NULL;
    rc = 0;
done:
    free(vm.stack);
    free(vm.memo);
    free(pkl);
    pt_close(f);
    return rc;
}
