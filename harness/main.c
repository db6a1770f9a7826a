#include "blas_info.h"
#include "cli.h"

int main(int argc, char **argv)
{
    /* Before anything runs: OpenBLAS chose its kernels when it was loaded,
     * and only a fresh start can change them. */
    blas_info_fix_core(argv, 0);
    return kreplay_main(argc, argv);
}
