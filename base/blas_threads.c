#include "blas_threads.h"

/* OpenBLAS' own entry point (driver/others/blas_server.c, exported by its
 * pthread and OpenMP builds, called by its fork handler); weak, so a BLAS
 * without it links and parking does nothing. */
extern int blas_thread_shutdown_(void) __attribute__((weak));

void blas_threads_park(void)
{
    if (blas_thread_shutdown_)
        blas_thread_shutdown_();
}
