#include "atomic_file.h"
#include "kr_string.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int atomic_file_open(atomic_file_t *f, const char *path, kr_error_t *err)
{
    memset(f, 0, sizeof *f);
    kr_strlcpy(f->path, path, sizeof f->path);
    snprintf(f->tmp, sizeof f->tmp, "%s.tmp.%d", path, (int)getpid());
    /* Renaming over a device or a directory would replace it (/dev/full as
     * root), so only a regular file, or nothing, may be at path. */
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return kr_fail(err, "%s: exists and is not a regular file; expected a file path to write",
                       path);
    f->fp = fopen(f->tmp, "w");
    if (!f->fp)
        return kr_fail(err, "%s: cannot write: %s", path, strerror(errno));
    return 0;
}

/* fsync of the folder that holds path, so the rename itself is durable.
 * Best effort: some file systems refuse fsync on a directory. */
void sync_parent_dir(const char *path)
{
    char dir[4096];
    kr_strlcpy(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (!slash)
        kr_strlcpy(dir, ".", sizeof dir);
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int atomic_file_commit(atomic_file_t *f, kr_error_t *err)
{
    if (!f->fp) {
        atomic_file_abort(f);
        return kr_fail(err, "%s: write failed: the file was not open", f->path);
    }
    errno = 0;
    int bad = ferror(f->fp) || fflush(f->fp) != 0 || fsync(fileno(f->fp)) != 0;
    int saved = errno;
    bad |= fclose(f->fp) != 0;
    f->fp = NULL;
    if (bad) {
        unlink(f->tmp);
        return kr_fail(err, "%s: write failed: %s", f->path, strerror(saved ? saved : errno));
    }
    if (rename(f->tmp, f->path) != 0) {
        saved = errno;
        unlink(f->tmp);
        return kr_fail(err, "%s: cannot move into place: %s", f->path, strerror(saved));
    }
    sync_parent_dir(f->path);
    return 0;
}

void atomic_file_abort(atomic_file_t *f)
{
    if (f->fp)
        fclose(f->fp);
    f->fp = NULL;
    if (f->tmp[0])
        unlink(f->tmp);
}

int make_dirs(const char *path, kr_error_t *err)
{
    char buf[4096];
    kr_strlcpy(buf, path, sizeof buf);
    size_t len = strlen(buf);
    while (len > 1 && buf[len - 1] == '/')
        buf[--len] = '\0';
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return kr_fail(err, "%s: cannot create directory %s: %s", path, buf, strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) != 0 && errno != EEXIST)
        return kr_fail(err, "%s: cannot create directory: %s", path, strerror(errno));
    struct stat st;
    if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode))
        return kr_fail(err, "%s: exists and is not a directory", path);
    if (access(buf, W_OK) != 0)
        return kr_fail(err, "%s: directory is not writable", path);
    return 0;
}

int make_parent_dirs(const char *path, kr_error_t *err)
{
    char dir[4096];
    kr_strlcpy(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir)
        return 0;
    *slash = '\0';
    return make_dirs(dir, err);
}
