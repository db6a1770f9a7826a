/* Files written whole or not at all: content goes to "<path>.tmp.<pid>" in
 * the same directory and is renamed over path only once it is complete, so a
 * reader (or a killed run) never sees half a report. */
#ifndef KR_ATOMIC_FILE_H
#define KR_ATOMIC_FILE_H

#include <stdio.h>

#include "kr_error.h"

typedef struct {
    FILE *fp;
    char path[4096];
    char tmp[4200];
} atomic_file_t;

/* Refuses a path where something other than a regular file is (a device, a
 * directory): the rename would replace it. */
int atomic_file_open(atomic_file_t *f, const char *path, kr_error_t *err);
/* Flushes, fsyncs, renames into place, fsyncs the directory.  On any write
 * error (ferror, fflush, fsync, fclose) removes the temporary file and
 * returns -1 naming path and the cause (ENOSPC: "No space left on device"). */
int atomic_file_commit(atomic_file_t *f, kr_error_t *err);
/* Drops the temporary file (an error path). */
void atomic_file_abort(atomic_file_t *f);

/* Creates a directory and its parents (mkdir -p). */
int make_dirs(const char *path, kr_error_t *err);

/* fsync of the folder that holds path, so a rename into it is durable.
 * Best effort: some file systems refuse fsync on a directory. */
void sync_parent_dir(const char *path);
/* Creates the directories above a file path (mkdir -p of its dirname). */
int make_parent_dirs(const char *path, kr_error_t *err);

#endif
