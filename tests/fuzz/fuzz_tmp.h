/* Shared by the file-based fuzz targets: writes the input to a per-process
 * temporary file (under $TMPDIR, /dev/shm when it exists) and returns its path. */
#ifndef KR_FUZZ_TMP_H
#define KR_FUZZ_TMP_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int fuzz_write_tmp(char *path, size_t cap, const char *ext, const uint8_t *data, size_t size)
{
    struct stat st;
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir)
        dir = stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, cap, "%s/kr-fuzz-%d.%s", dir, (int)getpid(), ext);
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return -1;
    int ok = fwrite(data, 1, size, fp) == size;
    ok &= fclose(fp) == 0;
    return ok ? 0 : -1;
}

#endif
