/* case_mapping: a case file mapped privately (case_mapping.h). */
/* MADV_POPULATE_READ and MAP_* extensions are Linux's. */
#define _GNU_SOURCE

#include "case_mapping.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

/* Linux 5.14; older headers lack it, older kernels answer EINVAL. */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

int case_file_identity_of(int fd, case_file_identity_t *id)
{
    struct stat sb;
    if (fstat(fd, &sb) != 0)
        return -1;
    memset(id, 0, sizeof *id);
    id->dev = (uint64_t)sb.st_dev;
    id->ino = (uint64_t)sb.st_ino;
    id->size = sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
    id->mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000 + sb.st_mtim.tv_nsec;
    id->ctime_ns = (int64_t)sb.st_ctim.tv_sec * 1000000000 + sb.st_ctim.tv_nsec;
    return 0;
}

int case_mapping_map_fd(int fd, const char *path, uint64_t bytes, case_mapping_t *m,
                        kr_error_t *err)
{
    memset(m, 0, sizeof *m);
    if (case_file_identity_of(fd, &m->id) != 0)
        return kr_fail(err, "%s: file: fstat failed (%s)", path, strerror(errno));
    if (bytes == 0 || bytes > m->id.size)
        bytes = m->id.size;
    if (bytes == 0 || bytes > (uint64_t)SIZE_MAX)
        return kr_fail(err, "%s: file: %llu bytes cannot be mapped", path,
                       (unsigned long long)bytes);
    void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
        const int e = errno;
        struct rlimit rl;
        char limit[96] = "";
        if (e == ENOMEM && getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
            snprintf(limit, sizeof limit, "; under an address-space limit (ulimit -v) of %llu MiB",
                     (unsigned long long)(rl.rlim_cur >> 20));
        return kr_fail(err, "%s: file: mapping %llu bytes of its arrays failed (%s%s)", path,
                       (unsigned long long)bytes, strerror(e), limit);
    }
    m->base = p;
    m->bytes = (size_t)bytes;
    return 0;
}

int case_mapping_open_expecting(const char *path, const case_file_identity_t *expect,
                                uint64_t bytes, case_mapping_t *m, kr_error_t *err)
{
    memset(m, 0, sizeof *m);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kr_fail(err, "%s: file: cannot open it again to map its arrays (%s)", path,
                       strerror(errno));
    case_file_identity_t now;
    int st = case_file_identity_of(fd, &now);
    if (st != 0) {
        st = kr_fail(err, "%s: file: fstat failed (%s)", path, strerror(errno));
    } else if (memcmp(&now, expect, sizeof now) != 0) {
        st = kr_fail(err, "%s: file: it changed while it was being read (size %llu -> %llu "
                     "bytes, or replaced or rewritten); expected it unchanged until read",
                     path, (unsigned long long)expect->size, (unsigned long long)now.size);
    } else {
        st = case_mapping_map_fd(fd, path, bytes, m, err);
    }
    close(fd); /* the mapping keeps the file */
    return st;
}

int case_mapping_holds(const case_mapping_t *m, const void *p, size_t bytes)
{
    if (!m || !m->base || !p)
        return 0;
    const uintptr_t a = (uintptr_t)p, b = (uintptr_t)m->base;
    return a >= b && a - b <= m->bytes && bytes <= m->bytes - (a - b);
}

void case_mapping_prefault(const case_mapping_t *m, uint64_t off, uint64_t bytes)
{
    if (!m->base || off >= m->bytes || bytes == 0)
        return;
    if (bytes > m->bytes - off)
        bytes = m->bytes - off;
    const long page_size = sysconf(_SC_PAGESIZE);
    const uint64_t page = page_size > 0 ? (uint64_t)page_size : 4096;
    const uint64_t start = off / page * page;
    char *at = (char *)m->base + start;
    const size_t len = (size_t)(off + bytes - start);
    /* Not mapped by a populate (an old kernel): read ahead, and let the
     * faults map the pages. */
    if (madvise(at, len, MADV_POPULATE_READ) != 0)
        (void)madvise(at, len, MADV_WILLNEED);
}

static void explain_bus_error(int sig)
{
    static const char msg[] =
        "kreplay: bus error (SIGBUS): most likely a case file was cut short while its arrays "
        "were mapped (a case rewritten in place during a replay); replace a case file by "
        "renaming a new one over it instead\n";
    ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
    (void)ignored;
    signal(sig, SIG_DFL);
    raise(sig);
}

void case_mapping_explain_bus_errors(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = explain_bus_error;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    sigaction(SIGBUS, &sa, NULL);
}

void case_mapping_unmap(case_mapping_t *m)
{
    if (m->base)
        munmap(m->base, m->bytes);
    memset(m, 0, sizeof *m);
}
