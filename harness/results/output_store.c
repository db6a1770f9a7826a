#include "output_store.h"

#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_kind.h"
#include "h5_file.h"
#include "h5_safety.h"

static int write_dataset(hid_t group, const char *name, hid_t file_type, hid_t mem_type, int rank,
                         const hsize_t *dims, const void *data)
{
    hid_t space = H5Screate_simple(rank, dims, NULL);
    if (space < 0)
        return -1;
    hid_t dset = H5Dcreate2(group, name, file_type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    herr_t st = dset < 0 ? -1 : H5Dwrite(dset, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data);
    if (dset >= 0)
        H5Dclose(dset);
    H5Sclose(space);
    return st < 0 ? -1 : 0;
}

static int write_string_attr(hid_t obj, const char *name, const char *value)
{
    hid_t type = H5Tcopy(H5T_C_S1);
    H5Tset_size(type, strlen(value) + 1);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t attr = H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT);
    herr_t st = attr < 0 ? -1 : H5Awrite(attr, type, value);
    if (attr >= 0)
        H5Aclose(attr);
    H5Sclose(space);
    H5Tclose(type);
    return st < 0 ? -1 : 0;
}

static hid_t open_or_create_group(hid_t parent, const char *name)
{
    if (H5Lexists(parent, name, H5P_DEFAULT) > 0)
        return H5Gopen2(parent, name, H5P_DEFAULT);
    return H5Gcreate2(parent, name, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
}

int output_store_save(const char *path, const char *case_name, const char *kernel,
                      const kernel_act_t *act, const uint16_t *out, int64_t M, int64_t N,
                      kr_error_t *err)
{
    /* An existing one must be a regular file: a FIFO would block HDF5's reads. */
    const int exists = access(path, F_OK) == 0;
    if (exists && file_check_regular(path, "an outputs file (HDF5) to add to", err))
        return -1;
    h5_quiet_t quiet;
    h5_quiet(&quiet);
    hid_t file = exists ? H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT)
                        : H5Fcreate(path, H5F_ACC_EXCL, H5P_DEFAULT, H5P_DEFAULT);
    int status = -1;
    hid_t gcase = -1, gk = -1;
    if (file < 0) {
        kr_fail(err, "%s: cannot open or create the outputs file", path);
        goto done;
    }
    /* An existing file's links are followed when groups are opened in it:
     * one that leads elsewhere would have the outputs written there. */
    if (h5_safety_check(file, path, err) != 0)
        goto done;
    gcase = open_or_create_group(file, case_name);
    if (gcase < 0) {
        kr_fail(err, "%s: cannot create group /%s", path, case_name);
        goto done;
    }
    if (H5Lexists(gcase, kernel, H5P_DEFAULT) > 0 && H5Ldelete(gcase, kernel, H5P_DEFAULT) < 0) {
        kr_fail(err, "%s: cannot replace /%s/%s", path, case_name, kernel);
        goto done;
    }
    gk = H5Gcreate2(gcase, kernel, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (gk < 0) {
        kr_fail(err, "%s: cannot create group /%s/%s", path, case_name, kernel);
        goto done;
    }
    hsize_t mn[2] = {(hsize_t)M, (hsize_t)N}, mk[2] = {(hsize_t)M, (hsize_t)act->K};
    int bad = write_dataset(gk, "out", H5T_STD_U16LE, H5T_NATIVE_UINT16, 2, mn, out);
    if (!act->codes) {
        /* Unquantized activations (bf16 kernels): the operand values themselves. */
        bad |= write_dataset(gk, "act_values", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 2, mk, act->dequant);
        bad |= write_string_attr(gk, "act_kind", "values");
    } else if (act->kind == ACT_FP8_PER_TOKEN) {
        bad |= write_dataset(gk, "act_codes", H5T_STD_U8LE, H5T_NATIVE_UINT8, 2, mk, act->codes);
        hsize_t m1[1] = {(hsize_t)M};
        bad |= write_dataset(gk, "act_scale", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, 1, m1,
                             act->token_scale);
        bad |= write_string_attr(gk, "act_kind", "fp8_per_token");
        bad |= write_string_attr(gk, "act_format",
                                 act->fp8_format == FP8_E4M3FN ? "e4m3fn" : "e4m3fnuz");
    } else {
        bad |= write_dataset(gk, "act_codes", H5T_STD_U8LE, H5T_NATIVE_UINT8, 2, mk, act->codes);
        hsize_t mb[2] = {(hsize_t)M, (hsize_t)(act->K / 32)};
        bad |= write_dataset(gk, "act_scale", H5T_STD_U8LE, H5T_NATIVE_UINT8, 2, mb,
                             act->block_scale);
        bad |= write_string_attr(gk, "act_kind", "mxfp4_per_block");
        bad |= write_string_attr(gk, "act_format", "e2m1");
    }
    if (bad) {
        kr_fail(err, "%s: writing /%s/%s failed", path, case_name, kernel);
        goto done;
    }
    status = 0;
done:
    /* HDF5 writes its metadata at close: on a full disk that is where it fails. */
    if (gk >= 0 && H5Gclose(gk) < 0 && status == 0)
        status = kr_fail(err, "%s: closing /%s/%s failed (disk full?)", path, case_name, kernel);
    if (gcase >= 0 && H5Gclose(gcase) < 0 && status == 0)
        status = kr_fail(err, "%s: closing /%s failed (disk full?)", path, case_name);
    errno = 0;
    if (file >= 0 && H5Fclose(file) < 0 && status == 0)
        status = kr_fail(err, "%s: closing the file failed (%s)", path, errno ? strerror(errno) : "disk full?");
    h5_restore(&quiet);
    return status;
}

int output_store_commit(const char *tmp, const char *path, int discard, kr_error_t *err)
{
    struct stat st;
    if (stat(tmp, &st) != 0)
        return 0;   /* nothing was saved */
    if (discard) {
        unlink(tmp);
        return kr_fail(err, "%s: not written: a case stopped before all its outputs were saved "
                            "(see the errors above)", path);
    }
    int fd = open(tmp, O_RDONLY | O_CLOEXEC);
    int bad = fd < 0 || fsync(fd) != 0;
    int e = errno;
    if (fd >= 0)
        close(fd);
    if (bad) {
        unlink(tmp);
        return kr_fail(err, "%s: write failed: %s", path, strerror(e));
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        unlink(tmp);
        return kr_fail(err, "%s: exists and is not a regular file; expected a file path to write", path);
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return kr_fail(err, "%s: cannot move the outputs into place: %s", path, strerror(e));
    }
    return 0;
}
