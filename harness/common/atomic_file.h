/* Files written whole or not at all: content goes to a fresh temporary file
 * "<name>.tmp.<pid>.<random>" in the same directory and is renamed over the
 * file only once it is complete, so a reader (or a killed run) never sees
 * half a report.
 *
 * The directory is opened once (atomic_target_open) and everything after
 * is relative to that descriptor (openat, renameat): a directory renamed or
 * replaced by a symbolic link meanwhile does not redirect the write.  The
 * temporary file is created with O_CREAT | O_EXCL | O_NOFOLLOW under a name
 * nobody can predict, so a link planted at the name is never followed (the
 * creation fails and another name is drawn); the rename replaces whatever
 * entry is at the final name, a symbolic link included, and never what it
 * points to. */
#ifndef KR_ATOMIC_FILE_H
#define KR_ATOMIC_FILE_H

#include <stdio.h>

#include "kr_error.h"

/* The place of one atomic write: its directory (open), final name and
 * temporary name. */
typedef struct {
    int dir_fd;                 /* -1 when closed */
    char path[4096];            /* as given, for messages */
    char name[256];             /* the final name in the directory */
    char tmp_name[320];         /* the temporary file's name in it ("" none yet) */
    char tmp[4400];             /* the temporary file's path, for messages */
} atomic_target_t;

/* Opens path's directory and checks what is at path: nothing, a regular
 * file or a symbolic link may be replaced; a directory, device, FIFO or
 * socket is refused (the rename would replace it).  No temporary file yet. */
int atomic_target_open(atomic_target_t *t, const char *path, kr_error_t *err);
/* Draws a fresh temporary name (into t->tmp_name and t->tmp). */
void atomic_target_draw_name(atomic_target_t *t);
/* Creates the temporary file (O_EXCL | O_NOFOLLOW, drawing names until one
 * is free); returns its descriptor (write-only), or -1 with err. */
int atomic_target_create(atomic_target_t *t, kr_error_t *err);
/* A path that reaches the temporary name through the open directory
 * ("/proc/self/fd/N/NAME"; the plain path where /proc is missing), for a
 * library that opens files by name itself. */
void atomic_target_tmp_path(const atomic_target_t *t, char *buf, size_t cap);
/* fsyncs the temporary file, renames it over the final name, fsyncs the
 * directory.  On failure the temporary file is removed. */
int atomic_target_commit(atomic_target_t *t, kr_error_t *err);
/* Removes the temporary file (if any) and closes the directory. */
void atomic_target_abort(atomic_target_t *t);

typedef struct {
    FILE *fp;
    char path[4096];
    char tmp[4400];
    atomic_target_t target;
} atomic_file_t;

/* Refuses a path where something other than a regular file or a symbolic
 * link is (a device, a directory): the rename would replace it. */
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
