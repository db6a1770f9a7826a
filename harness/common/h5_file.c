#include "h5_file.h"

#include <errno.h>

void h5_quiet(h5_quiet_t *q)
{
    H5Eget_auto2(H5E_DEFAULT, &q->func, &q->data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void h5_restore(const h5_quiet_t *q)
{
    H5Eset_auto2(H5E_DEFAULT, q->func, q->data);
}

hid_t h5_fapl_nolock(void)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
#if (H5_VERS_MAJOR == 1 && H5_VERS_MINOR == 10 && H5_VERS_RELEASE >= 7) || H5_VERSION_GE(1, 12, 1)
    if (fapl >= 0)
        H5Pset_file_locking(fapl, 1, 1);
#endif
    return fapl;
}

hid_t h5_open_readonly(const char *path, const h5_expect_t *expect, kr_error_t *err)
{
#if H5_VERSION_GE(1, 12, 0)
    htri_t is = H5Fis_accessible(path, H5P_DEFAULT);
#else
    htri_t is = H5Fis_hdf5(path);
#endif
    if (is == 0) {
        kr_fail(err, "%s: file: not an HDF5 file (no HDF5 signature); expected %s", path,
                expect->not_hdf5);
        return -1;
    }
    if (is < 0) {
        kr_fail(err, "%s: file: cannot be read as HDF5 (unreadable or corrupt); expected %s",
                path, expect->unreadable);
        return -1;
    }
    hid_t fapl = h5_fapl_nolock();
    if (fapl < 0) {
        kr_fail(err, "%s: file: cannot set up an HDF5 property list; expected a working HDF5 "
                     "library", path);
        return -1;
    }
    hid_t file = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (file < 0)
        kr_fail(err, "%s: file: HDF5 cannot open it (truncated or corrupt file?); expected %s",
                path, expect->complete);
    return file;
}

void h5_close_ids(const hid_t *ids, int n)
{
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0)
            continue;
        switch (H5Iget_type(ids[i])) {
        case H5I_FILE: H5Fclose(ids[i]); break;
        case H5I_GROUP: H5Gclose(ids[i]); break;
        case H5I_DATATYPE: H5Tclose(ids[i]); break;
        case H5I_DATASPACE: H5Sclose(ids[i]); break;
        case H5I_DATASET: H5Dclose(ids[i]); break;
        case H5I_ATTR: H5Aclose(ids[i]); break;
        case H5I_GENPROP_LST: H5Pclose(ids[i]); break;
        default: break;
        }
    }
}

uint64_t h5_used_bytes(hid_t file)
{
#if H5_VERSION_GE(1, 10, 2)
    haddr_t eoa = HADDR_UNDEF;
    if (H5Fget_eoa(file, &eoa) < 0 || eoa == HADDR_UNDEF)
        return 0;
    /* Addresses count from the end of a user block, if the file has one. */
    hsize_t userblock = 0;
    const hid_t fcpl = H5Fget_create_plist(file);
    const herr_t got = fcpl < 0 ? -1 : H5Pget_userblock(fcpl, &userblock);
    if (fcpl >= 0)
        H5Pclose(fcpl);
    return got < 0 ? 0 : (uint64_t)eoa + (uint64_t)userblock;
#else
    (void)file;
#endif
    return 0;
}

hid_t h5_create_exclusive(atomic_target_t *t, hid_t fcpl, hid_t fapl)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        char at[4500];
        atomic_target_draw_name(t);
        atomic_target_tmp_path(t, at, sizeof at);
        errno = 0;
        const hid_t file = H5Fcreate(at, H5F_ACC_EXCL, fcpl, fapl);
        if (file >= 0 || errno != EEXIST)
            return file;
    }
    t->tmp_name[0] = '\0';   /* the last name drawn is someone else's file */
    return -1;
}
