/* results_store: result_t rows <-> HDF5 results file (results_store.h):
 * the file, its provenance attributes, atomic replacement, and the read
 * in this process that the reading process runs.  The /rows table itself
 * is results_table.c's; reading through the reading process is
 * results_reader.c's; merging shards results_merge.c's; the per-case
 * partials results_partials.c's.  This is the lowest of them: it calls
 * none of them. */
#include "results_store.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "h5_file.h"
#include "h5_safety.h"
#include "kr_string.h"
#include "blas_info.h"
#include "result_fields.h"
#include "results_table.h"
#include "file_kind.h"
#include "h5_names.h"
#include "result_order.h"
#include "h5_attr.h"

/* ---------------------------------------------------------------- meta */

void results_meta_init(results_meta_t *m)
{
    memset(m, 0, sizeof *m);
    kr_strlcpy(m->schema, RESULTS_SCHEMA_V2, sizeof m->schema);
    if (gethostname(m->host, sizeof m->host - 1) != 0)
        kr_strlcpy(m->host, "unknown", sizeof m->host);
    m->host[sizeof m->host - 1] = '\0';
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(m->time_utc, sizeof m->time_utc, "%Y-%m-%dT%H:%M:%SZ", &tm);
    blas_info_t blas;
    blas_info_get(&blas);
    kr_strlcpy(m->blas_core, blas.core, sizeof m->blas_core);
    blas_info_format(&blas, m->blas, sizeof m->blas);
}

typedef struct {
    const char *name;
    size_t offset, size;
} meta_attr_t;

#define META_ATTR(m) {#m, offsetof(results_meta_t, m), sizeof(((results_meta_t *)0)->m)}
static const meta_attr_t meta_attrs[] = {
    META_ATTR(version),   META_ATTR(git_commit), META_ATTR(host),
    META_ATTR(device),    META_ATTR(kernel_build_id), META_ATTR(suite_name),
    META_ATTR(suite_hash), META_ATTR(time_utc),  META_ATTR(command),
    META_ATTR(shard),     META_ATTR(blas_core),  META_ATTR(blas),
    META_ATTR(policy),    META_ATTR(options),
};
#define N_META_ATTRS ((int)(sizeof meta_attrs / sizeof meta_attrs[0]))

void results_meta_terminate(results_meta_t *m)
{
    m->schema[sizeof m->schema - 1] = '\0';
    for (int i = 0; i < N_META_ATTRS; i++)
        ((char *)m + meta_attrs[i].offset)[meta_attrs[i].size - 1] = '\0';
}

/* ---------------------------------------------------------------- sort */

int result_key_cmp(const result_t *a, const result_t *b)
{
    static const result_text_key_t keys[] = {
        RESULT_TEXT_KEY(case_path), RESULT_TEXT_KEY(kernel), RESULT_TEXT_KEY(reference),
    };
    return result_text_keys_cmp(a, b, keys, (int)(sizeof keys / sizeof keys[0]));
}

int result_list_sort(result_list_t *l)
{
    if (l->count < 2)
        return 0;
    int64_t *perm;
    if ((perm = result_order(l->rows, l->count, result_key_cmp)) == NULL)
        return -1;
    result_t *sorted = malloc((size_t)l->count * sizeof *sorted);
    if (!sorted) {
        free(perm);
        return -1;
    }
    for (int64_t i = 0; i < l->count; i++)
        sorted[i] = l->rows[perm[i]];
    free(perm);
    free(l->rows);
    l->rows = sorted;
    l->cap = l->count;
    return 0;
}

/* ---------------------------------------------------------------- HDF5 plumbing */

/* ---------------------------------------------------------------- write */

int results_store_write_rows(const char *path, const result_t *rows, int64_t n,
                             const results_meta_t *meta, const char *case_key, kr_error_t *err)
{
    if (!path)
        return kr_fail(err, "(null): file: no path given; expected an output path");
    if (n < 0 || (n > 0 && !rows))
        return kr_fail(err, "%s: rows: no rows given; expected a result list", path);
    atomic_target_t target;
    if (atomic_target_open(&target, path, err))
        return -1;
    const char *tmp = target.tmp;

    h5_quiet_t q;
    h5_quiet(&q);
    hid_t fcpl = -1, fapl = -1, dcpl = -1, file = -1;
    int rc = -1;
    const char *stage = "setting up HDF5 property lists";

    fcpl = H5Pcreate(H5P_FILE_CREATE);
    fapl = h5_fapl_nolock();
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (fcpl < 0 || fapl < 0 || dcpl < 0 || H5Pset_obj_track_times(fcpl, 0) < 0 ||
        H5Pset_obj_track_times(dcpl, 0) < 0 ||
        H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_V18) < 0)
        goto fail;

    file = h5_create_exclusive(&target, fcpl, fapl);
    if (file < 0) {
        int e = errno;
        kr_fail(err, "%s: file: cannot create the temporary file %s (%s); expected a writable "
                     "directory", path, tmp, e ? strerror(e) : "HDF5 error");
        goto done;
    }
    errno = 0;   /* from here a set errno is the failed write's */
    stage = "writing the root attributes (disk full?)";
    if (h5_write_str_attr(file, "schema", RESULTS_SCHEMA_V2) != 0)
        goto fail;
    for (int i = 0; i < N_META_ATTRS; i++) {
        char v[4096];
        v[0] = '\0';
        if (meta)
            kr_strlcpy(v, (const char *)meta + meta_attrs[i].offset,
                       meta_attrs[i].size < sizeof v ? meta_attrs[i].size : sizeof v);
        if (h5_write_str_attr(file, meta_attrs[i].name, v) != 0)
            goto fail;
    }
    if (case_key && h5_write_str_attr(file, "case_key", case_key) != 0)
        goto fail;

    if (results_table_write(file, dcpl, path, rows, n, err) != 0)
        goto done;
    errno = 0;
    herr_t cl = H5Fclose(file);
    file = -1;
    if (cl < 0) {
        /* HDF5 keeps the errno of the write that failed. */
        kr_fail(err, "%s: file: closing the temporary file %s failed (%s); expected a complete file",
                path, tmp, errno ? strerror(errno) : "disk full?");
        goto done;
    }
    if (atomic_target_commit(&target, err) != 0)
        goto done;
    rc = 0;
    goto done;
fail:
    if (errno)
        kr_fail(err, "%s: file: HDF5 failed %s: %s; expected a writable results file", path, stage,
                strerror(errno));
    else
        kr_fail(err, "%s: file: HDF5 failed %s; expected a writable results file", path, stage);
done:
    if (file >= 0)
        H5Fclose(file);
    atomic_target_abort(&target);  /* the temporary file of a failed write (HDF5's, too) */
    H5_CLOSE_ALL(dcpl, fapl, fcpl);
    h5_restore(&q);
    return rc;
}

int results_store_write(const char *path, const result_list_t *rows, const results_meta_t *meta,
                        kr_error_t *err)
{
    if (!rows)
        return kr_fail(err, "%s: rows: NULL list; expected a result list", path ? path : "(null)");
    return results_store_write_rows(path, rows->rows, rows->count, meta, NULL, err);
}

/* ---------------------------------------------------------------- read */

typedef struct {
    const char *path;
    kr_error_t *err;
} rd_t;

#define rfail(rd, obj, ...) kr_fail_at((rd)->err, (rd)->path, obj, __VA_ARGS__)

/* A string attribute into buf.  Returns 1 read, 0 absent (buf = ""), -1 error. */
static int read_str_attr(rd_t *rd, hid_t obj, const char *name, char *buf, size_t cap)
{
    buf[0] = '\0';
    htri_t ex = H5Aexists(obj, name);
    if (ex < 0)
        return rfail(rd, name, "cannot check the root attribute (corrupt file?); expected a "
                               "readable file");
    if (ex == 0)
        return 0;
    hid_t attr = H5Aopen(obj, name, H5P_DEFAULT), ftype = -1, mtype = -1, space = -1;
    int rc = -1;
    char *tmp = NULL;
    if (attr < 0 || (ftype = H5Aget_type(attr)) < 0 || (space = H5Aget_space(attr)) < 0) {
        rfail(rd, name, "cannot open the root attribute (corrupt file?); expected a readable "
                        "string");
        goto done;
    }
    if (H5Tget_class(ftype) != H5T_STRING || H5Sget_simple_extent_npoints(space) != 1) {
        rfail(rd, name, "root attribute is %s with %lld element(s); expected one string",
              h5_class_name(H5Tget_class(ftype)), (long long)H5Sget_simple_extent_npoints(space));
        goto done;
    }
    if (H5Tis_variable_str(ftype) > 0) {
        mtype = H5Tcopy(H5T_C_S1);
        char *p = NULL;
        if (mtype < 0 || H5Tset_size(mtype, H5T_VARIABLE) < 0 ||
            H5Tset_cset(mtype, H5Tget_cset(ftype)) < 0 || H5Aread(attr, mtype, &p) < 0) {
            rfail(rd, name, "cannot read the root attribute (corrupt file?); expected a string");
            goto done;
        }
        kr_strlcpy(buf, p ? p : "", cap);
        if (p)
            H5free_memory(p);
    } else {
        size_t sz = H5Tget_size(ftype);
        tmp = calloc(sz + 1, 1);
        mtype = tmp ? h5_fixed_str_type(sz + 1) : -1;
        if (mtype < 0 || H5Tset_cset(mtype, H5Tget_cset(ftype)) < 0 ||
            H5Aread(attr, mtype, tmp) < 0) {
            rfail(rd, name, "cannot read the root attribute (corrupt file?); expected a string");
            goto done;
        }
        tmp[sz] = '\0';
        kr_strlcpy(buf, tmp, cap);
    }
    rc = 1;
done:
    free(tmp);
    H5_CLOSE_ALL(mtype, space, ftype, attr);
    return rc;
}

int results_read_direct(const char *path, result_list_t *rows, results_meta_t *meta,
                        char *case_key, size_t key_cap, int64_t *count_only, kr_error_t *err)
{
    if (rows)
        memset(rows, 0, sizeof *rows);
    if (meta)
        memset(meta, 0, sizeof *meta);
    if (!path)
        return kr_fail(err, "(null): file: no path given; expected a results file path");
    if (!rows && !count_only)
        return kr_fail(err, "%s: rows: NULL list; expected a result list to fill", path);
    struct stat sb;
    if (file_stat_regular(path, "an existing results file (schema " RESULTS_SCHEMA_V2 ")", &sb, err))
        return -1;

    h5_quiet_t q;
    h5_quiet(&q);
    rd_t rd = {.path = path, .err = err};
    hid_t file = -1;
    result_list_t tmp = {0};
    results_meta_t m;
    memset(&m, 0, sizeof m);
    int rc = -1;

    static const h5_expect_t expect = {
        .not_hdf5 = "a results file (schema " RESULTS_SCHEMA_V2 ")",
        .unreadable = "a results file (schema " RESULTS_SCHEMA_V2 ")",
        .complete = "a complete results file",
    };
    file = h5_open_readonly(path, &expect, err);
    if (file < 0)
        goto done;
    if (h5_safety_check(file, path, err) != 0)
        goto done;
    int got = read_str_attr(&rd, file, "schema", m.schema, sizeof m.schema);
    if (got < 0)
        goto done;
    if (got == 0) {
        rfail(&rd, "schema", "no schema attribute (not a kreplay results file?); expected "
                             "schema = \"%s\"", RESULTS_SCHEMA_V2);
        goto done;
    }
    if (strcmp(m.schema, RESULTS_SCHEMA_V2) != 0 && strcmp(m.schema, RESULTS_SCHEMA_V1) != 0) {
        rfail(&rd, "schema", "is \"%s\"; expected \"%s\" (or \"%s\")", m.schema,
              RESULTS_SCHEMA_V2, RESULTS_SCHEMA_V1);
        goto done;
    }
    for (int i = 0; i < N_META_ATTRS; i++)
        if (read_str_attr(&rd, file, meta_attrs[i].name, (char *)&m + meta_attrs[i].offset,
                          meta_attrs[i].size) < 0)
            goto done;
    if (case_key) {
        int k = read_str_attr(&rd, file, "case_key", case_key, key_cap);
        if (k < 0)
            goto done;
        if (k == 0) {
            rfail(&rd, "case_key", "no case_key attribute; expected a partial results file "
                                   "written by results_store_append_case");
            goto done;
        }
    }
    if (count_only ? results_table_count(file, path, count_only, err) != 0
                   : results_table_read(file, path, (int64_t)sb.st_size, &tmp, err) != 0)
        goto done;
    if (rows)
        *rows = tmp;
    memset(&tmp, 0, sizeof tmp);
    if (meta)
        *meta = m;
    rc = 0;
done:
    result_list_free(&tmp);
    if (file >= 0)
        H5Fclose(file);
    h5_restore(&q);
    return rc;
}
