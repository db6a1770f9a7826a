/* isolate_reader: one worker process (isolate.h) that reads untrusted files
 * for the whole run, and the anonymous file (anon_file.h) through which it
 * hands back what it read.
 *
 * libhdf5 itself crashes or hangs on some corrupt files; a reader that runs
 * it in this worker turns that into one error line instead of a crash or a
 * hang of kreplay.  The worker is forked on the first call and serves every
 * call after it; a call that fails retires it (whatever the failed read left
 * in it goes with it), and a crash or hang of a worker that had served other
 * calls is retried once by a fresh worker before the file is blamed.  Calls
 * from several threads are serialized (isolate_reader_lock).  A process
 * forked from the owner starts its own worker.
 *
 * The serve function gets ctx = the isolate_reader_t (as it was when the
 * worker was forked): it writes its answer to out_fd (from offset 0), and
 * the caller reads it after the call. */
#ifndef KR_ISOLATE_READER_H
#define KR_ISOLATE_READER_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "isolate.h"

typedef struct {
    pthread_mutex_t lock;
    pid_t owner;                /* the process the worker belongs to */
    isolate_worker_t *worker;
    int out_fd;                 /* the anonymous answer file, -1 before the first call */
    isolate_serve_fn serve;
    const char *name;           /* "case reader", "results reader": messages, /proc name */
    uint64_t user_as_limit;     /* the owner's soft RLIMIT_AS (UINT64_MAX: none) */
} isolate_reader_t;

#define ISOLATE_READER_INIT(serve_fn, reader_name) \
    {PTHREAD_MUTEX_INITIALIZER, 0, NULL, -1, (serve_fn), (reader_name), UINT64_MAX}

/* Takes the reader's lock and makes it ready (the answer file, a worker to
 * fork); 0 with the lock held, or -1 with err and the lock released. */
int isolate_reader_lock(isolate_reader_t *r, kr_error_t *err);
void isolate_reader_unlock(isolate_reader_t *r);

/* One call, with the lock held: 0 when it ran however it ended (ir says
 * how), -1 with err when no worker could be started. */
int isolate_reader_call(isolate_reader_t *r, const void *request, size_t request_bytes,
                        double timeout_s, isolate_result_t *ir, kr_error_t *err);

/* Ends the worker (a fresh one serves the next call). */
void isolate_reader_retire(isolate_reader_t *r);

/* For atexit: ends and reaps the worker of this process, if any, so that it
 * is counted with the parent and outlives nothing. */
void isolate_reader_shutdown(isolate_reader_t *r);

/* The time limit of one read: timeout_s when > 0, else
 * $KREPLAY_READ_TIMEOUT, else 120 s. */
double isolate_reader_timeout(double timeout_s);

/* 1 when KREPLAY_READ_IN_PROCESS=1 asks for reads in this process (for a
 * debugger). */
int isolate_reader_in_process(void);

/* The error for a read that did not end in ISOLATE_OK, into err; returns
 * -1.  FAILED: the reading process's own message.  CRASHED: "PATH: the
 * HDF5 library crashed reading it (killed by SIGSEGV ...): the file is
 * corrupt; expected EXPECTED", or, under an address-space limit (ulimit -v),
 * that the limit may be the cause.  TIMEOUT: "PATH: reading it did not
 * finish (...)" and note (NULL or "": that the file is corrupt or
 * unreadable, and which variable gives more time). */
int isolate_reader_failure(const isolate_reader_t *r, const isolate_result_t *ir, const char *path,
                           const char *expected, const char *note, kr_error_t *err);

/* The owner's address-space limit (ulimit -v), in bytes, or 0 when there is
 * none: a reading process that died under one may have run out of memory
 * rather than met a corrupt file, and the error says so. */
uint64_t isolate_reader_as_limit(const isolate_reader_t *r);

/* In the reading process, for one read: sets its soft address-space limit
 * (RLIMIT_AS) to its present size plus extra_bytes, so that a file whose
 * claims would make libhdf5 allocate without bound fails an allocation
 * instead of exhausting the machine.  Never above the limit the owner ran
 * under (a user's `ulimit -v` stays in force); nothing in a build with a
 * sanitizer (whose shadow memory is address space too). */
void isolate_reader_bound_memory(const isolate_reader_t *r, uint64_t extra_bytes);

#endif
