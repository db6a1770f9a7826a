/* case_write: case_t -> schema-v1 case file (cases/SCHEMA.md).
 *
 * The file is written to a fresh "<path>.tmp.<pid>.<random>" next to the
 * target, created exclusively in the directory opened once (atomic_file.h:
 * never through a planted link), and renamed
 * into place, so a reader (or a crash) never sees half a case and a failed
 * write leaves any existing file untouched.  Object timestamps are off and
 * the format bounds are the oldest that hold these objects, so the same case
 * gives the same bytes and old h5py versions read it. */
#include "case_io.h"
#include "h5_attr.h"
#include "h5_file.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct {
    const char *path;   /* the target, named in messages */
    hid_t file, dcpl;
    kr_error_t *err;
} wr_t;

static int write_str_attr(wr_t *w, hid_t obj, const char *label, const char *name,
                          const char *value)
{
    if (h5_write_str_attr(obj, name, value) == 0)
        return 0;
    return kr_fail(w->err, "%s: %s: cannot write attribute %s; expected a writable file", w->path, label,
                   name);
}

static int write_i64_attr(wr_t *w, hid_t obj, const char *name, int64_t value)
{
    if (h5_write_scalar_attr(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value) == 0)
        return 0;
    return kr_fail(w->err, "%s: %s: cannot write root attribute; expected a writable file", w->path,
                   name);
}

/* Creates and fills a dataset; with attr_name set, adds one string
 * attribute (dtype / order / layout / format). */
static int write_ds(wr_t *w, const char *name, hid_t ftype, hid_t mtype, int rank,
                    int64_t d0, int64_t d1, const void *data, const char *attr_name,
                    const char *attr_value)
{
    hsize_t dims[2] = {(hsize_t)d0, (hsize_t)d1};
    hid_t space = H5Screate_simple(rank, dims, NULL), ds = -1;
    int rc = -1;
    if (space < 0)
        goto fail;
    ds = H5Dcreate2(w->file, name, ftype, space, H5P_DEFAULT, w->dcpl, H5P_DEFAULT);
    if (ds < 0 || H5Dwrite(ds, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        goto fail;
    if (attr_name && write_str_attr(w, ds, name, attr_name, attr_value) != 0)
        goto done;
    rc = 0;
    goto done;
fail:
    kr_fail(w->err, "%s: %s: cannot write the dataset (disk full or not writable?); expected "
                    "to write %lld elements", w->path, name, (long long)(rank == 1 ? d0 : d0 * d1));
done:
    H5_CLOSE_ALL(ds, space);
    return rc;
}

static int write_all(wr_t *w, const case_t *c)
{
    const int64_t M = c->M, N = c->N, K = c->K;
    if (write_str_attr(w, w->file, "schema", "schema", CASE_SCHEMA_V1) ||
        write_i64_attr(w, w->file, "M", M) || write_i64_attr(w, w->file, "N", N) ||
        write_i64_attr(w, w->file, "K", K))
        return -1;
    struct { const char *name; const char *val; } prov[] = {
        {"kernel_path", c->kernel_path}, {"layer", c->layer}, {"model", c->model},
        {"capture_time", c->capture_time}, {"env_flags", c->env_flags},
        {"route", c->route}, {"tp_rank", c->tp_rank}, {"versions", c->versions},
        {"gpu_arch", c->gpu_arch}, {"extension_path", c->extension_path},
        {"capture_time_source", c->capture_time_source},
    };
    for (size_t i = 0; i < sizeof prov / sizeof prov[0]; i++)
        if (prov[i].val && write_str_attr(w, w->file, prov[i].name, prov[i].name, prov[i].val))
            return -1;

    if (c->x) {
        if (c->x_storage == X_STORED_F32) {
            if (write_ds(w, "x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, M, K, c->x, NULL, NULL))
                return -1;
        } else {
            /* M*K is bounded by case_validate (<= 2^40), so this cannot overflow. */
            uint16_t *b = malloc((size_t)(M * K) * sizeof *b);
            if (!b)
                return kr_fail(w->err, "%s: x: out of memory encoding %lld bf16 elements; "
                                       "expected to fit in memory", w->path, (long long)(M * K));
            for (int64_t i = 0; i < M * K; i++)
                b[i] = bf16_encode(c->x[i]);   /* RNE, exact for bf16-born values */
            int r = write_ds(w, "x", H5T_STD_U16LE, H5T_NATIVE_UINT16, 2, M, K, b, "dtype",
                             "bfloat16");
            free(b);
            if (r)
                return -1;
        }
    }
    if (c->x_fp8 &&
        (write_ds(w, "x_fp8", H5T_STD_U8LE, H5T_NATIVE_UINT8, 2, M, K, c->x_fp8, "format",
                  case_fp8_format_attr(c->x_fp8_format)) ||
         write_ds(w, "x_scale", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, M, 0, c->x_scale, NULL,
                  NULL)))
        return -1;

    /* case_validate guarantees weight and weight_scale together, and at
     * least one of them or weight_bf16. */
    if (c->weight) {
        if (write_ds(w, "weight", H5T_STD_U8LE, H5T_NATIVE_UINT8, 2, N, K / 2, c->weight,
                     "order", case_weight_order_attr(c->weight_order)))
            return -1;
        int kn = c->scale_layout == SCALE_LAYOUT_KN;
        if (write_ds(w, "weight_scale", H5T_STD_U8LE, H5T_NATIVE_UINT8, 2, kn ? K / 32 : N,
                     kn ? N : K / 32, c->weight_scale, "layout",
                     scale_layout_name(c->scale_layout)))
            return -1;
    }
    if (c->weight_bf16 &&
        write_ds(w, "weight_bf16", H5T_STD_U16LE, H5T_NATIVE_UINT16, 2, N, K, c->weight_bf16,
                 "dtype", "bfloat16"))
        return -1;
    if (c->weight_ref &&
        write_ds(w, "weight_ref", H5T_STD_U8LE, H5T_NATIVE_UINT8, 1, c->weight_ref_len, 0,
                 c->weight_ref, NULL, NULL))
        return -1;

    struct { const char *name; const uint16_t *data; } outs[] = {
        {"out", c->out}, {"out_rerun", c->out_rerun}, {"aiter", c->aiter},
    };
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        if (outs[i].data && write_ds(w, outs[i].name, H5T_STD_U16LE, H5T_NATIVE_UINT16, 2, M, N,
                                     outs[i].data, "dtype", "bfloat16"))
            return -1;
    if (c->ref_recorded && write_ds(w, "ref_recorded", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, M, N,
                                    c->ref_recorded, NULL, NULL))
        return -1;
    return 0;
}

int case_write(const char *path, const case_t *c, kr_error_t *err)
{
    if (!path)
        return kr_fail(err, "(null): file: no path given; expected an output path");
    if (case_validate(c, path, err) != 0)
        return -1;

    atomic_target_t target;
    if (atomic_target_open(&target, path, err))
        return -1;
    h5_quiet_t quiet;
    h5_quiet(&quiet);

    wr_t w = {.path = path, .file = -1, .dcpl = -1, .err = err};
    hid_t fcpl = -1, fapl = -1;
    int rc = -1;

    fcpl = H5Pcreate(H5P_FILE_CREATE);   /* the root group is created with the file */
    fapl = h5_fapl_nolock();   /* the temporary file is private to this process */
    w.dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (fcpl < 0 || fapl < 0 || w.dcpl < 0 || H5Pset_obj_track_times(fcpl, 0) < 0 ||
        H5Pset_obj_track_times(w.dcpl, 0) < 0 ||
        H5Pset_libver_bounds(fapl, H5F_LIBVER_EARLIEST, H5F_LIBVER_V18) < 0) {
        kr_fail(err, "%s: file: cannot set up HDF5 property lists; expected a working HDF5 "
                     "library", path);
        goto done;
    }
    w.file = h5_create_exclusive(&target, fcpl, fapl);
    if (w.file < 0) {
        int e = errno;
        kr_fail(err, "%s: file: cannot create the temporary file %s (%s); expected a writable "
                     "directory", path, target.tmp, e ? strerror(e) : "HDF5 error");
        goto done;
    }
    if (write_all(&w, c) != 0)
        goto done;
    herr_t cl = H5Fclose(w.file);
    w.file = -1;
    if (cl < 0) {
        kr_fail(err, "%s: file: closing the temporary file %s failed (disk full?); expected a "
                     "complete file", path, target.tmp);
        goto done;
    }
    /* fsync, then the rename: a crash right after cannot leave a
     * complete-looking name with missing data. */
    if (atomic_target_commit(&target, err) != 0)
        goto done;
    rc = 0;
done:
    if (w.file >= 0)
        H5Fclose(w.file);
    /* Unconditional: HDF5 may have created the file before failing. */
    atomic_target_abort(&target);
    H5_CLOSE_ALL(w.dcpl, fapl, fcpl);
    h5_restore(&quiet);
    return rc;
}
