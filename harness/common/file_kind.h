/* file_kind: what is at a path, found before it is read and without ever
 * blocking on it.
 *
 * A FIFO given where a file is expected blocks open() (for reading) until
 * someone writes to it; a device may do anything on open.  So a path is
 * first stat()ed and refused unless it is a regular file; only then is it
 * opened, with O_NONBLOCK (should it have been swapped for a FIFO in
 * between, the open returns at once), and the open descriptor checked
 * again (fstat) to be that regular file.  The error names the path and what
 * is there: "FILE: file: is a FIFO (named pipe), not a regular file;
 * expected a results file". */
#ifndef KR_FILE_KIND_H
#define KR_FILE_KIND_H

#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "kr_error.h"

/* "a directory", "a FIFO (named pipe)", "a character device", "a block
 * device", "a socket", "a symbolic link", "a regular file". */
const char *file_kind_name(mode_t mode);

/* Opens path for reading (O_RDONLY | O_CLOEXEC, blocking once open) when it
 * is a regular file.  Returns the descriptor, or -1 with err: "PATH: file:
 * cannot open (No such file or directory); expected EXPECTED" or "PATH:
 * file: is a FIFO (named pipe), not a regular file; expected EXPECTED". */
int file_open_regular(const char *path, const char *expected, kr_error_t *err);

/* file_open_regular, then closed: 0 when path is a regular file that can be
 * opened for reading, else -1 with err. */
int file_check_regular(const char *path, const char *expected, kr_error_t *err);

/* file_open_regular, then fstat into *st and closed: 0, or -1 with err. */
int file_stat_regular(const char *path, const char *expected, struct stat *st, kr_error_t *err);

/* file_open_regular as a stdio stream ("rb"); NULL with err. */
FILE *file_fopen_regular(const char *path, const char *expected, kr_error_t *err);

/* 0 when path is a directory (followed through symbolic links), else -1
 * with err: "PATH: is a FIFO (named pipe), not a directory; expected
 * EXPECTED". */
int file_check_dir(const char *path, const char *expected, kr_error_t *err);

#endif
