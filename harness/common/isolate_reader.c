/* isolate_reader: a reading worker and its answer file (isolate_reader.h). */
#include "isolate_reader.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <string.h>
#include <unistd.h>

#include "anon_file.h"

int isolate_reader_lock(isolate_reader_t *r, kr_error_t *err)
{
    pthread_mutex_lock(&r->lock);
    if (r->owner != getpid()) {
        /* Inherited from the process that forked this one: its worker
         * answers it, not us.  The descriptor is ours to close. */
        if (r->out_fd >= 0)
            close(r->out_fd);
        r->worker = NULL;
        r->out_fd = -1;
        r->owner = getpid();
    }
    if (r->out_fd < 0) {
        r->out_fd = anon_file_open(r->name, err);
        if (r->out_fd < 0) {
            pthread_mutex_unlock(&r->lock);
            return -1;
        }
    }
    if (!r->worker) {
        struct rlimit rl;
        r->user_as_limit = getrlimit(RLIMIT_AS, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                               ? (uint64_t)rl.rlim_cur : UINT64_MAX;
        r->worker = isolate_worker_new(r->serve, r, &r->out_fd, 1);
        if (!r->worker) {
            pthread_mutex_unlock(&r->lock);
            return kr_fail(err, "%s: out of memory", r->name);
        }
    }
    return 0;
}

void isolate_reader_unlock(isolate_reader_t *r)
{
    pthread_mutex_unlock(&r->lock);
}

int isolate_reader_call(isolate_reader_t *r, const void *request, size_t request_bytes,
                        double timeout_s, isolate_result_t *ir, kr_error_t *err)
{
    for (int attempt = 0;; attempt++) {
        const int served_before = isolate_worker_calls_served(r->worker);
        if (isolate_worker_call(r->worker, request, request_bytes, timeout_s, ir, err))
            return -1;
        if (ir->status == ISOLATE_OK)
            return 0;
        /* Whatever a failed read left in the worker goes with it. */
        isolate_worker_retire(r->worker);
        if (ir->status == ISOLATE_FAILED || served_before == 0 || attempt > 0)
            return 0;
    }
}

void isolate_reader_retire(isolate_reader_t *r)
{
    isolate_worker_retire(r->worker);
}

void isolate_reader_shutdown(isolate_reader_t *r)
{
    if (r->owner == getpid() && r->worker) {
        isolate_worker_free(r->worker);
        r->worker = NULL;
    }
}

int isolate_reader_failure(const isolate_reader_t *r, const isolate_result_t *ir, const char *path,
                           const char *expected, const char *note, kr_error_t *err)
{
    const uint64_t limit = isolate_reader_as_limit(r);
    if (ir->status == ISOLATE_FAILED)
        return kr_fail(err, "%s", ir->message);
    if (ir->status == ISOLATE_CRASHED && limit)
        return kr_fail(err, "%s: reading it failed (%s) under an address-space limit (ulimit -v) of "
                            "%llu MiB: the limit, or a corrupt file; raise the limit to tell", path,
                       ir->message, (unsigned long long)(limit >> 20));
    if (ir->status == ISOLATE_CRASHED)
        return kr_fail(err, "%s: the HDF5 library crashed reading it (%s): the file is corrupt; "
                            "expected %s", path, ir->message, expected);
    return kr_fail(err, "%s: reading it did not finish (%s)%s", path, ir->message,
                   note && *note ? note
                                 : ": the file is corrupt or unreadable (KREPLAY_READ_TIMEOUT=S "
                                   "gives a read more time)");
}

uint64_t isolate_reader_as_limit(const isolate_reader_t *r)
{
    return r->user_as_limit == UINT64_MAX ? 0 : r->user_as_limit;
}

double isolate_reader_timeout(double timeout_s)
{
    if (timeout_s > 0)
        return timeout_s;
    const char *env = getenv("KREPLAY_READ_TIMEOUT");
    return env && atof(env) > 0 ? atof(env) : 120.0;
}

int isolate_reader_in_process(void)
{
    const char *env = getenv("KREPLAY_READ_IN_PROCESS");
    return env && !strcmp(env, "1");
}

/* Sanitizers reserve terabytes of shadow address space. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KR_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
#define KR_SANITIZED 1
#endif
#endif

void isolate_reader_bound_memory(const isolate_reader_t *r, uint64_t extra_bytes)
{
#ifdef KR_SANITIZED
    (void)r;
    (void)extra_bytes;
#else
    FILE *fp = fopen("/proc/self/statm", "r");
    unsigned long long pages = 0;
    const int got = fp ? fscanf(fp, "%llu", &pages) : 0;
    if (fp)
        fclose(fp);
    const long page = sysconf(_SC_PAGESIZE);
    if (got != 1 || page <= 0)
        return;
    uint64_t want = (uint64_t)pages * (uint64_t)page + extra_bytes;
    if (want > r->user_as_limit)
        want = r->user_as_limit;
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0)
        return;
    if (rl.rlim_max != RLIM_INFINITY && want > (uint64_t)rl.rlim_max)
        want = (uint64_t)rl.rlim_max;
    rl.rlim_cur = want == UINT64_MAX ? RLIM_INFINITY : (rlim_t)want;
    (void)setrlimit(RLIMIT_AS, &rl);
#endif
}
