/* Running a kernel in a child process with a timeout, so that a segfault,
 * an abort or a hang becomes a CRASHED or TIMEOUT row and the run goes on.
 *
 * isolate_run() forks.  The child (a copy of the parent: every pointer in
 * ctx stays valid, copy-on-write) calls fn with an output buffer that is a
 * shared anonymous mapping (MAP_SHARED | MAP_ANONYMOUS), records fn's return
 * code and message in the mapping's header, and exits with _exit (no atexit
 * handlers, no stdio buffers flushed twice).  The parent waits for it, up to
 * timeout_s, on a pipe the child holds open (woken the moment the child
 * ends) and with waitpid(WNOHANG), kills it with SIGKILL when time is up, and
 * always reaps it: no zombie is left behind.  On success the output is
 * copied back into the caller's buffer; otherwise the buffer is untouched.
 *
 * The child leads its own process group; whatever it spawned (a helper a
 * kernel forked) is killed with SIGKILL (killpg) when it ends, however it
 * ends, before it is reaped.  Its stdout is its stderr: kreplay's stdout
 * carries tables and JSON, and a kernel's prints must not land there.
 *
 * In the child: the fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
 * SIGTRAP, SIGSYS) get their default action, so a crash is reported by its
 * own signal even where the parent installed handlers (AddressSanitizer's,
 * say); core dumps are off (RLIMIT_CORE 0); the child is killed if the parent
 * dies (PR_SET_PDEATHSIG).
 *
 * GPUs: CUDA and HIP cannot be used in a child forked from a process that
 * has initialized them.  To isolate GPU work the parent must not touch the
 * GPU runtime at all: every GPU call (device queries included) belongs in the
 * isolated function.  Each child then creates its own context.
 *
 * Nothing here knows kernels or rows: a kernel run in a child, and the
 * verdict of one that failed, are isolate_kernel.h (harness/engine). */
#ifndef KR_ISOLATE_H
#define KR_ISOLATE_H

#include <stddef.h>
#include <sys/types.h>

#include "kr_error.h"

typedef enum {
    ISOLATE_OK = 0,     /* the function returned 0; the output was copied back */
    ISOLATE_FAILED,     /* the function returned nonzero; message holds its error */
    ISOLATE_CRASHED,    /* the child died of a signal, or exited without finishing */
    ISOLATE_TIMEOUT,    /* no result within the timeout; the child was killed */
} isolate_status_t;

typedef struct {
    isolate_status_t status;
    int signal;         /* CRASHED by a signal: its number (SIGKILL for a timeout); else 0 */
    int exit_code;      /* CRASHED by an exit without a result: the exit status; else 0 */
    pid_t pid;          /* the child's process id (already reaped) */
    double seconds;     /* wall time from fork to the child's end (or its kill) */
    char message[KR_ERROR_MSG_MAX]; /* FAILED: the function's error.  CRASHED:
                                       "killed by SIGSEGV (Segmentation fault)" or
                                       "exited with status 3 before finishing".
                                       TIMEOUT: "no result after 2 s: killed (SIGKILL)" */
} isolate_result_t;

/* What runs in the child: fill out[0, out_bytes) and return 0, or return
 * nonzero with err filled. */
typedef int (*isolate_fn)(void *ctx, void *out, size_t out_bytes, kr_error_t *err);

/* Runs fn(ctx, shared, out_bytes, err) in a child and waits up to timeout_s
 * seconds (<= 0: no limit).  Returns 0 when the child ran, however it ended
 * (res says how; `out` holds the output only for ISOLATE_OK), or -1 with err
 * set when it could not be started (mmap, pipe or fork failed). */
int isolate_run(isolate_fn fn, void *ctx, void *out, size_t out_bytes, double timeout_s,
                isolate_result_t *res, kr_error_t *err);

/* isolate_run, except that the output also comes back when fn returned
 * nonzero (ISOLATE_FAILED): what fn wrote before failing (a record of why)
 * is the caller's to read. */
int isolate_run_returned(isolate_fn fn, void *ctx, void *out, size_t out_bytes, double timeout_s,
                         isolate_result_t *res, kr_error_t *err);

/* isolate_run with the output in two parts: fn fills a buffer of
 * head_bytes + body_bytes; on ISOLATE_OK its first head_bytes come back into
 * head and the rest into body (either may be NULL: dropped).  A large body
 * lands where the caller wants it, with no staging copy. */
int isolate_run_split(isolate_fn fn, void *ctx, void *head, size_t head_bytes, void *body,
                      size_t body_bytes, double timeout_s, isolate_result_t *res, kr_error_t *err);

/* ---- A worker: one child process serving many calls ----
 *
 * isolate_run forks for every call.  A fork costs more than the page tables
 * it copies: afterwards every page either process writes takes a
 * copy-on-write fault, which for a call that reads a few MiB costs several
 * times the work itself.  A worker is forked once, on its first call, and
 * then serves calls one at a time over a socket: its memory, and the
 * parent's, stay warm.
 *
 * The worker is set up like isolate_run's child (fatal signals at their
 * default, no core dumps, killed when the parent dies) and also closes
 * every descriptor it inherited except 0-2 and those named in keep_fds, so
 * it holds no pipe the parent opened (a pipe to a plotting process, say)
 * open past the parent's own close.  A call that crashes or hangs the
 * worker (killed at the timeout) ends it and is reported as by isolate_run;
 * the next call starts a fresh worker, as does a call after
 * isolate_worker_retire.  State a call leaves in the worker is seen by the
 * calls after it: retire the worker after a call whose input is suspect. */
typedef struct isolate_worker isolate_worker_t;

/* What the worker runs for each call: the request's bytes in (a copy, in
 * the worker's memory); 0, or nonzero with err filled.  Results go back
 * through something ctx names (e.g. a descriptor in keep_fds). */
typedef int (*isolate_serve_fn)(void *ctx, const void *request, size_t request_bytes,
                                kr_error_t *err);

/* The largest request a call may send. */
#define ISOLATE_WORKER_REQUEST_MAX ((size_t)64 << 10)

/* A worker that will run fn(ctx, ...) (ctx as it is when the worker is
 * forked: the worker sees a copy of the parent's memory from that moment).
 * Nothing is started yet.  Returns NULL when out of memory. */
isolate_worker_t *isolate_worker_new(isolate_serve_fn fn, void *ctx, const int *keep_fds,
                                     int n_keep_fds);

/* Sends the request to the worker (forking it first if none is running)
 * and waits up to timeout_s seconds (<= 0: no limit) for its answer.
 * Returns 0 when the call ran, however it ended (res says how, as for
 * isolate_run; res->pid is the worker's), or -1 with err set when no worker
 * could be started or the request is over ISOLATE_WORKER_REQUEST_MAX. */
int isolate_worker_call(isolate_worker_t *w, const void *request, size_t request_bytes,
                        double timeout_s, isolate_result_t *res, kr_error_t *err);

/* How many calls the running worker has answered (0 when none runs): a
 * crash on a worker that served earlier calls may be their doing. */
int isolate_worker_calls_served(const isolate_worker_t *w);

/* Ends the running worker, if any (SIGKILL, reaped); the next call starts a
 * fresh one. */
void isolate_worker_retire(isolate_worker_t *w);

/* Retires the worker and frees w.  NULL is fine. */
void isolate_worker_free(isolate_worker_t *w);

/* "OK", "FAILED", "CRASHED", "TIMEOUT". */
const char *isolate_status_name(isolate_status_t s);

/* "SIGSEGV", "SIGABRT", ... ("signal 42" for one without a name here). */
const char *isolate_signal_name(int sig, char *buf, size_t cap);

#endif
