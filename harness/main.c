#include <hdf5.h>

#include "blas_info.h"
#include "cli.h"

int main(int argc, char **argv)
{
    /* Before anything runs: OpenBLAS chose its kernels when it was loaded,
     * and only a fresh start can change them. */
    blas_info_fix_core(argv, 0);
    /* A file whose H5Fclose failed (a full disk: HDF5 writes its metadata at
     * close) stays half-closed in HDF5's tables, and the library's atexit
     * cleanup crashes on it (SIGSEGV after the error was reported).  kreplay
     * closes every file itself and removes the ones that failed, so that
     * cleanup has nothing to do. */
    H5dont_atexit();
    return kreplay_main(argc, argv);
}
