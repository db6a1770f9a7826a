/* Isolation (harness/common/isolate.h): a function run in a child process with a
 * timeout.  Data comes back intact; a failing function gives its message; an
 * exit, a segfault or an abort gives CRASHED with the status or the signal's
 * name; a hang gives TIMEOUT within the timeout plus a little, and the child
 * is gone (reaped, no zombie).  After each, a normal isolated run still
 * succeeds: the run goes on.  The crashing, aborting and hanging kernels are
 * the example plugins of kernels/plugins/examples/.  A worker (one child
 * serving many calls) answers every call from the same process, survives a
 * failing call, is replaced after a crash, an exit, a hang, a retirement or
 * a kill from outside, and holds no descriptor it was not asked to keep.
 * A process the child forks ends with it (its process group is killed),
 * after a return and after a timeout, and the child's stdout is its stderr. */

/* MAP_ANONYMOUS is not POSIX. */
#define _DEFAULT_SOURCE

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "act_prepare.h"
#include "case_io.h"
#include "isolate.h"
#include "isolate_kernel.h"
#include "kr_error.h"
#include "kr_string.h"
#include "plugin_loader.h"
#include "registry.h"
#include "synth.h"
#include "test_support.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The child is gone: reaped (no zombie to wait for) and not running. */
static void assert_child_gone(pid_t pid)
{
    assert_true(pid > 0);
    errno = 0;
    assert_int_equal(waitpid(pid, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
    errno = 0;
    assert_int_equal(kill(pid, 0), -1);
    assert_int_equal(errno, ESRCH);
}

/* ------------------------------------------------------------ plain functions */

typedef struct {
    uint64_t seed;
} fill_ctx_t;

static int fill_fn(void *ctx, void *out, size_t out_bytes, kr_error_t *err)
{
    (void)err;
    test_rng_t r = {((fill_ctx_t *)ctx)->seed};
    uint8_t *o = out;
    for (size_t i = 0; i < out_bytes; i++)
        o[i] = (uint8_t)test_rng_u64(&r);
    return 0;
}

static void test_output_comes_back_intact(void **state)
{
    (void)state;
    const size_t n = (3u << 20) + 7;       /* not a page multiple */
    uint8_t *out = malloc(n), *want = malloc(n);
    assert_non_null(out);
    assert_non_null(want);
    fill_ctx_t ctx = {12345};
    kr_error_t err = {{0}};
    assert_int_equal(fill_fn(&ctx, want, n, &err), 0);
    memset(out, 0, n);
    isolate_result_t res;
    assert_int_equal(isolate_run(fill_fn, &ctx, out, n, 10.0, &res, &err), 0);
    assert_int_equal(res.status, ISOLATE_OK);
    assert_string_equal(isolate_status_name(res.status), "OK");
    assert_int_equal(res.signal, 0);
    assert_true(res.seconds >= 0 && res.seconds < 10.0);
    assert_memory_equal(out, want, n);
    assert_child_gone(res.pid);
    /* No timeout at all. */
    memset(out, 0, n);
    assert_int_equal(isolate_run(fill_fn, &ctx, out, n, 0, &res, &err), 0);
    assert_int_equal(res.status, ISOLATE_OK);
    assert_memory_equal(out, want, n);
    /* No output at all. */
    assert_int_equal(isolate_run(fill_fn, &ctx, NULL, 0, 10.0, &res, &err), 0);
    assert_int_equal(res.status, ISOLATE_OK);
    free(out);
    free(want);
}

static int failing_fn(void *ctx, void *out, size_t out_bytes, kr_error_t *err)
{
    (void)ctx;
    memset(out, 0x11, out_bytes);
    return kr_fail(err, "bad input %d", 42);
}

static int exiting_fn(void *ctx, void *out, size_t out_bytes, kr_error_t *err)
{
    (void)ctx, (void)out, (void)out_bytes, (void)err;
    _exit(3);
}

static int segv_fn(void *ctx, void *out, size_t out_bytes, kr_error_t *err)
{
    (void)ctx, (void)out, (void)out_bytes, (void)err;
    raise(SIGSEGV);
    return 0;
}

static void test_failure_exit_and_signal(void **state)
{
    (void)state;
    uint8_t out[64];
    memset(out, 0xEE, sizeof out);
    isolate_result_t res;
    kr_error_t err = {{0}};
    assert_int_equal(isolate_run(failing_fn, NULL, out, sizeof out, 10.0, &res, &err), 0);
    assert_int_equal(res.status, ISOLATE_FAILED);
    assert_string_equal(res.message, "bad input 42");
    assert_int_equal(isolate_verdict(&res), VERDICT_ERROR);
    for (size_t i = 0; i < sizeof out; i++)
        assert_int_equal(out[i], 0xEE);     /* no partial output comes back */

    assert_int_equal(isolate_run(exiting_fn, NULL, out, sizeof out, 10.0, &res, &err), 0);
    assert_int_equal(res.status, ISOLATE_CRASHED);
    assert_int_equal(res.exit_code, 3);
    assert_int_equal(res.signal, 0);
    assert_non_null(strstr(res.message, "status 3"));
    assert_int_equal(isolate_verdict(&res), VERDICT_CRASHED);
    assert_child_gone(res.pid);

    assert_int_equal(isolate_run(segv_fn, NULL, out, sizeof out, 10.0, &res, &err), 0);
    assert_int_equal(res.status, ISOLATE_CRASHED);
    assert_int_equal(res.signal, SIGSEGV);
    assert_non_null(strstr(res.message, "SIGSEGV"));
    assert_child_gone(res.pid);

    char buf[32];
    assert_string_equal(isolate_signal_name(SIGABRT, buf, sizeof buf), "SIGABRT");
    assert_string_equal(isolate_signal_name(SIGBUS, buf, sizeof buf), "SIGBUS");
    char want[32];
    snprintf(want, sizeof want, "signal %d", SIGRTMIN + 3);
    assert_string_equal(isolate_signal_name(SIGRTMIN + 3, buf, sizeof buf), want);
}

/* ------------------------------------------------------------ process groups */

/* Dead, or a zombie waiting for init: nothing runs under that pid. */
static int process_gone(pid_t pid)
{
    char path[64], stat[512] = "";
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    stat[n] = '\0';
    fclose(f);
    const char *close = strrchr(stat, ')');
    return close && close[1] == ' ' && close[2] == 'Z';
}

static void assert_process_ends(pid_t pid)
{
    assert_true(pid > 0);
    const double give_up = now_seconds() + 2.0;
    while (!process_gone(pid) && now_seconds() < give_up)
        usleep(5000);
    if (!process_gone(pid)) {
        kill(pid, SIGKILL);
        fail_msg("process %ld outlived the isolated child that forked it", (long)pid);
    }
}

/* What a child that spawns a helper reports: the helper's pid, and whether
 * its stdout is its stderr. */
typedef struct {
    pid_t helper;
    int stdout_is_stderr;
} spawn_report_t;

static pid_t spawn_lingering_helper(void)
{
    const pid_t pid = fork();
    if (pid == 0)
        for (;;)
            pause();
    return pid;
}

static int spawn_and_return_fn(void *ctx, void *out, size_t out_bytes, kr_error_t *err)
{
    (void)ctx, (void)out_bytes, (void)err;
    spawn_report_t *r = out;
    struct stat a, b;
    r->stdout_is_stderr = fstat(1, &a) == 0 && fstat(2, &b) == 0 && a.st_dev == b.st_dev &&
                          a.st_ino == b.st_ino;
    r->helper = spawn_lingering_helper();
    return 0;
}

static int spawn_and_hang_fn(void *ctx, void *out, size_t out_bytes, kr_error_t *err)
{
    (void)out, (void)out_bytes, (void)err;
    ((spawn_report_t *)ctx)->helper = spawn_lingering_helper();  /* ctx: a shared mapping */
    for (;;)
        pause();
    return 0;
}

/* Whatever the child spawned ends with it: after a normal return and after
 * a timeout; and the child's stdout is its stderr (not kreplay's tables). */
static void test_spawned_processes_end_with_the_child(void **state)
{
    (void)state;
    spawn_report_t rep = {0};
    isolate_result_t res;
    kr_error_t err = {{0}};
    assert_int_equal(isolate_run(spawn_and_return_fn, NULL, &rep, sizeof rep, 10.0, &res, &err), 0);
    assert_int_equal(res.status, ISOLATE_OK);
    assert_true(rep.stdout_is_stderr);
    assert_process_ends(rep.helper);
    assert_child_gone(res.pid);

    spawn_report_t *shared = mmap(NULL, sizeof *shared, PROT_READ | PROT_WRITE,
                                  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(shared != MAP_FAILED);
    memset(shared, 0, sizeof *shared);
    assert_int_equal(isolate_run(spawn_and_hang_fn, shared, NULL, 0, 2.0, &res, &err), 0);
    assert_int_equal(res.status, ISOLATE_TIMEOUT);
    assert_process_ends(shared->helper);
    assert_child_gone(res.pid);
    munmap(shared, sizeof *shared);
}

/* ------------------------------------------------------------ workers */

/* What the worker's function saw, in memory shared with the test (mapped
 * before the worker is forked). */
typedef struct {
    char echo[256];
    pid_t pid;
    int keep_fd, pipe_fd;           /* set by the test before the worker starts */
    int keep_fd_open, pipe_fd_open; /* seen by the worker on a "probe" */
} worker_shared_t;

static int is_request(const void *req, size_t n, const char *word)
{
    return n == strlen(word) && memcmp(req, word, n) == 0;
}

static int serve_fn(void *ctx, const void *req, size_t n, kr_error_t *err)
{
    worker_shared_t *sh = ctx;
    sh->pid = getpid();
    if (is_request(req, n, "segv"))
        raise(SIGSEGV);
    if (is_request(req, n, "exit"))
        _exit(3);
    if (is_request(req, n, "hang"))
        for (;;)
            pause();
    if (is_request(req, n, "fail"))
        return kr_fail(err, "bad request %d", 7);
    if (is_request(req, n, "probe")) {
        sh->keep_fd_open = fcntl(sh->keep_fd, F_GETFD) != -1;
        sh->pipe_fd_open = fcntl(sh->pipe_fd, F_GETFD) != -1;
    }
    const size_t len = n < sizeof sh->echo - 1 ? n : sizeof sh->echo - 1;
    memcpy(sh->echo, req, len);
    sh->echo[len] = '\0';
    return 0;
}

static worker_shared_t *shared_new(void)
{
    worker_shared_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    sh->keep_fd = sh->pipe_fd = -1;
    return sh;
}

/* One call that must succeed and echo `word` back. */
static pid_t call_ok(isolate_worker_t *w, worker_shared_t *sh, const char *word)
{
    isolate_result_t res;
    kr_error_t err = {{0}};
    assert_int_equal(isolate_worker_call(w, word, strlen(word), 10.0, &res, &err), 0);
    if (res.status != ISOLATE_OK)
        fail_msg("call %s: %s: %s", word, isolate_status_name(res.status), res.message);
    assert_string_equal(sh->echo, word);
    assert_int_equal(sh->pid, res.pid);
    return res.pid;
}

static void assert_no_children_left(void)
{
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

/* A worker serving serve_fn over sh, keeping keep_fds[0..n_keep-1] open. */
static isolate_worker_t *worker_start(worker_shared_t *sh, const int *keep_fds, int n_keep)
{
    isolate_worker_t *w = isolate_worker_new(serve_fn, sh, keep_fds, n_keep);
    assert_non_null(w);
    return w;
}

/* Frees the worker, which must leave no child of this test behind, and sh. */
static void worker_stop(isolate_worker_t *w, worker_shared_t *sh)
{
    isolate_worker_free(w);
    assert_no_children_left();
    munmap(sh, sizeof *sh);
}

/* One process serves every call; a failing call leaves it running (the
 * caller decides whether to retire it); the count of calls served is the
 * running worker's. */
static void test_worker_serves_many_calls(void **state)
{
    (void)state;
    worker_shared_t *sh = shared_new();
    isolate_worker_t *w = worker_start(sh, NULL, 0);
    assert_int_equal(isolate_worker_calls_served(w), 0);
    pid_t first = 0;
    for (int i = 0; i < 50; i++) {
        char word[32];
        snprintf(word, sizeof word, "call %d", i);
        pid_t pid = call_ok(w, sh, word);
        if (i == 0)
            first = pid;
        assert_int_equal(pid, first);
        assert_int_equal(isolate_worker_calls_served(w), i + 1);
    }
    isolate_result_t res;
    kr_error_t err = {{0}};
    assert_int_equal(isolate_worker_call(w, "fail", 4, 10.0, &res, &err), 0);
    assert_int_equal(res.status, ISOLATE_FAILED);
    assert_string_equal(res.message, "bad request 7");
    assert_int_equal(res.pid, first);
    assert_int_equal(call_ok(w, sh, "after the failure"), first);

    /* Too large a request is refused before anything is sent. */
    char *big = calloc(1, ISOLATE_WORKER_REQUEST_MAX + 1);
    assert_non_null(big);
    assert_int_equal(isolate_worker_call(w, big, ISOLATE_WORKER_REQUEST_MAX + 1, 10.0, &res, &err),
                     -1);
    assert_non_null(strstr(err.msg, "request"));
    free(big);
    assert_int_equal(call_ok(w, sh, "still there"), first);

    worker_stop(w, sh);
    assert_child_gone(first);
}

/* A crash, an exit or a hang ends the worker (reaped, no zombie) and is
 * reported as isolate_run reports it; the next call gets a fresh worker. */
static void test_worker_crash_exit_and_hang(void **state)
{
    (void)state;
    worker_shared_t *sh = shared_new();
    isolate_worker_t *w = worker_start(sh, NULL, 0);
    isolate_result_t res;
    kr_error_t err = {{0}};
    pid_t before = call_ok(w, sh, "warm");

    assert_int_equal(isolate_worker_call(w, "segv", 4, 10.0, &res, &err), 0);
    assert_int_equal(res.status, ISOLATE_CRASHED);
    assert_int_equal(res.signal, SIGSEGV);
    assert_non_null(strstr(res.message, "SIGSEGV"));
    assert_int_equal(res.pid, before);
    assert_child_gone(before);
    assert_int_equal(isolate_worker_calls_served(w), 0);
    before = call_ok(w, sh, "after the crash");
    assert_int_not_equal(before, res.pid);

    assert_int_equal(isolate_worker_call(w, "exit", 4, 10.0, &res, &err), 0);
    assert_int_equal(res.status, ISOLATE_CRASHED);
    assert_int_equal(res.exit_code, 3);
    assert_non_null(strstr(res.message, "status 3"));
    assert_child_gone(before);
    before = call_ok(w, sh, "after the exit");

    const double timeout = 0.3, slack = 1.0;
    const double t0 = now_seconds();
    assert_int_equal(isolate_worker_call(w, "hang", 4, timeout, &res, &err), 0);
    const double took = now_seconds() - t0;
    assert_int_equal(res.status, ISOLATE_TIMEOUT);
    assert_non_null(strstr(res.message, "SIGKILL"));
    assert_true(took >= timeout && took < timeout + slack);
    assert_child_gone(before);
    call_ok(w, sh, "after the hang");

    worker_stop(w, sh);
}

static int is_zombie(pid_t pid)
{
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return 0;
    const char *got = fgets(line, sizeof line, fp);
    fclose(fp);
    const char *paren = got ? strrchr(line, ')') : NULL;   /* "pid (comm) S ..." */
    return paren && paren[1] == ' ' && paren[2] == 'Z';
}

/* Retired, or killed from outside between calls: the next call starts a
 * fresh worker and succeeds. */
static void test_worker_retired_or_killed(void **state)
{
    (void)state;
    worker_shared_t *sh = shared_new();
    isolate_worker_t *w = worker_start(sh, NULL, 0);
    pid_t a = call_ok(w, sh, "one");
    isolate_worker_retire(w);
    assert_child_gone(a);
    assert_int_equal(isolate_worker_calls_served(w), 0);
    pid_t b = call_ok(w, sh, "two");
    assert_int_not_equal(a, b);

    kill(b, SIGKILL);
    /* Until it is a zombie (not reaped: the worker's owner does that), so
     * the next send finds it gone rather than racing its death. */
    for (int i = 0; i < 400 && !is_zombie(b); i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    assert_true(is_zombie(b));
    pid_t c = call_ok(w, sh, "three");
    assert_int_not_equal(b, c);
    worker_stop(w, sh);
}

/* The worker closes what it inherited -- a pipe the parent opened before
 * it started reaches EOF when the parent closes its end -- but keeps the
 * descriptors it was given. */
static void test_worker_closes_inherited_descriptors(void **state)
{
    (void)state;
    worker_shared_t *sh = shared_new();
    int p[2];
    assert_int_equal(pipe(p), 0);       /* not close-on-exec: a fork inherits it */
    int keep = open("/dev/null", O_RDONLY);
    assert_true(keep >= 0);
    sh->keep_fd = keep;
    sh->pipe_fd = p[1];
    isolate_worker_t *w = worker_start(sh, &keep, 1);
    call_ok(w, sh, "probe");
    assert_int_equal(sh->keep_fd_open, 1);
    assert_int_equal(sh->pipe_fd_open, 0);
    close(p[1]);
    char c;
    assert_int_equal(read(p[0], &c, 1), 0);     /* EOF now, with the worker still running */
    close(p[0]);
    close(keep);
    worker_stop(w, sh);
}

/* ------------------------------------------------------------ plugin kernels */

typedef struct {
    kr_plugin_t *example, *crash, *hang, *abrt;
    case_t c;
    kernel_inputs_t in;
    kernel_options_t opt;
    uint16_t *model_out;        /* w4a8.perblock's bits */
} fixture_t;

static kr_plugin_t *load(const char *name)
{
    char path[1024];
    test_plugin_file(path, sizeof path, name);
    kr_plugin_t *p = NULL;
    kr_error_t err = {{0}};
    if (plugin_load(path, &p, &err))
        fprintf(stderr, "%s\n", err.msg);
    return p;
}

static int setup(void **state)
{
    fixture_t *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    f->example = load("example_w4a8");
    f->crash = load("crash");
    f->hang = load("hang");
    f->abrt = load("abort");
    if (!f->example || !f->crash || !f->hang || !f->abrt)
        return -1;
    synth_params_t sp;
    synth_params_default(&sp);
    sp.M = 9;
    sp.N = 48;
    sp.K = 128;
    sp.scale_layout = SCALE_LAYOUT_KN;
    kr_error_t err = {{0}};
    if (synth_case(&sp, &f->c, &err))
        return -1;
    const case_t *c = &f->c;
    f->in = (kernel_inputs_t){
        .M = c->M, .N = c->N, .K = c->K,
        .x = c->x, .x_fp8 = c->x_fp8, .x_scale = c->x_scale, .x_fp8_format = c->x_fp8_format,
        .weight = {.packed = c->weight, .scales = c->weight_scale, .layout = c->scale_layout,
                   .e8m0_mode = E8M0_SPEC, .N = c->N, .K = c->K},
        .weight_ref = c->weight_ref, .weight_ref_len = c->weight_ref_len,
    };
    kernel_options_default(&f->opt);
    const kernel_desc_t *m = kernel_find("w4a8.perblock");
    kernel_act_t act;
    f->model_out = malloc((size_t)(c->M * c->N) * sizeof(uint16_t));
    kernel_run_info_t info = {{0}};
    if (!m || !f->model_out || m->prepare_act(m, &f->in, &f->opt, &act, &err) ||
        m->run_cpu(m, &f->in, &act, &f->opt, f->model_out, &info, &err))
        return -1;
    kernel_act_free(&act);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture_t *f = *state;
    plugin_unload(f->example);
    plugin_unload(f->crash);
    plugin_unload(f->hang);
    plugin_unload(f->abrt);
    case_free(&f->c);
    free(f->model_out);
    free(f);
    return 0;
}

/* One isolated run of k; out is malloc'd [M, N] (prefilled 0). */
static void run_isolated(fixture_t *f, const kernel_desc_t *k, double timeout_s,
                         isolate_result_t *res, uint16_t **out)
{
    kernel_act_t act;
    kr_error_t err = {{0}};
    assert_int_equal(k->prepare_act(k, &f->in, &f->opt, &act, &err), 0);
    *out = calloc((size_t)(f->in.M * f->in.N), sizeof(uint16_t));
    assert_non_null(*out);
    kernel_run_info_t info = {{0}};
    assert_int_equal(
        isolate_run_kernel(k, &f->in, &act, &f->opt, *out, &info, timeout_s, res, &err), 0);
    kernel_act_free(&act);
}

/* The example plugin, isolated: OK and bit-identical to the model. */
static void assert_normal_run_ok(fixture_t *f)
{
    isolate_result_t res;
    uint16_t *out;
    run_isolated(f, plugin_kernel_at(f->example, 0), 10.0, &res, &out);
    if (res.status != ISOLATE_OK)
        fprintf(stderr, "example: %s\n", res.message);
    assert_int_equal(res.status, ISOLATE_OK);
    assert_memory_equal(out, f->model_out, (size_t)(f->in.M * f->in.N) * sizeof(uint16_t));
    assert_child_gone(res.pid);
    free(out);
}

static void test_registry_kernel_isolated(void **state)
{
    fixture_t *f = *state;
    isolate_result_t res;
    uint16_t *out;
    run_isolated(f, kernel_find("w4a8.perblock"), 30.0, &res, &out);
    assert_int_equal(res.status, ISOLATE_OK);
    assert_memory_equal(out, f->model_out, (size_t)(f->in.M * f->in.N) * sizeof(uint16_t));
    free(out);
    assert_normal_run_ok(f);
}

/* A plugin killed by `signo` (named `signame`) is CRASHED with that signal
 * named, its child reaped, and the next isolated run unaffected. */
static void assert_plugin_killed_by(fixture_t *f, const kernel_desc_t *k, int signo,
                                    const char *signame)
{
    isolate_result_t res;
    uint16_t *out;
    run_isolated(f, k, 10.0, &res, &out);
    fprintf(stderr, "  %s: %s: %s\n", signame, isolate_status_name(res.status), res.message);
    assert_int_equal(res.status, ISOLATE_CRASHED);
    assert_int_equal(res.signal, signo);
    assert_non_null(strstr(res.message, signame));
    assert_int_equal(isolate_verdict(&res), VERDICT_CRASHED);
    assert_child_gone(res.pid);
    free(out);
    assert_normal_run_ok(f);
}

static void test_segfaulting_plugin(void **state)
{
    fixture_t *f = *state;
    assert_plugin_killed_by(f, plugin_kernel_at(f->crash, 0), SIGSEGV, "SIGSEGV");
}

static void test_aborting_plugin(void **state)
{
    fixture_t *f = *state;
    assert_plugin_killed_by(f, plugin_kernel_at(f->abrt, 0), SIGABRT, "SIGABRT");
}

static void test_hanging_plugin_times_out(void **state)
{
    fixture_t *f = *state;
    const double timeout = 0.5, slack = 1.0;
    isolate_result_t res;
    uint16_t *out;
    const double t0 = now_seconds();
    run_isolated(f, plugin_kernel_at(f->hang, 0), timeout, &res, &out);
    const double took = now_seconds() - t0;
    fprintf(stderr, "  hang: %s after %.3f s: %s\n", isolate_status_name(res.status), took,
            res.message);
    assert_int_equal(res.status, ISOLATE_TIMEOUT);
    assert_int_equal(isolate_verdict(&res), VERDICT_TIMEOUT);
    assert_non_null(strstr(res.message, "SIGKILL"));
    assert_true(took >= timeout);
    assert_true(took < timeout + slack);
    assert_true(res.seconds >= timeout && res.seconds < timeout + slack);
    assert_child_gone(res.pid);
    free(out);
    assert_normal_run_ok(f);
}

/* A run over several kernels, as replay will do it: every kernel gets its
 * row, whatever the one before it did. */
static void test_the_run_goes_on(void **state)
{
    fixture_t *f = *state;
    const kernel_desc_t *plan[] = {
        plugin_kernel_at(f->crash, 0), plugin_kernel_at(f->example, 0),
        plugin_kernel_at(f->hang, 0),  plugin_kernel_at(f->abrt, 0),
        kernel_find("w4a8.perblock"),  plugin_kernel_at(f->example, 0),
    };
    const verdict_t want[] = {VERDICT_CRASHED, VERDICT_PASS,  VERDICT_TIMEOUT,
                              VERDICT_CRASHED, VERDICT_PASS, VERDICT_PASS};
    result_list_t rows = {0};
    for (size_t i = 0; i < sizeof plan / sizeof plan[0]; i++) {
        isolate_result_t res;
        uint16_t *out;
        run_isolated(f, plan[i], 0.5, &res, &out);
        result_t *r = result_list_add(&rows);
        assert_non_null(r);
        snprintf(r->kernel, sizeof r->kernel, "%s", plan[i]->name);
        r->verdict = isolate_verdict(&res);
        kr_strlcpy(r->note, res.message, sizeof r->note);
        if (res.status == ISOLATE_OK)
            assert_memory_equal(out, f->model_out,
                                (size_t)(f->in.M * f->in.N) * sizeof(uint16_t));
        free(out);
    }
    assert_int_equal(rows.count, 6);
    for (int64_t i = 0; i < rows.count; i++) {
        fprintf(stderr, "  %-24s %-8s %s\n", rows.rows[i].kernel,
                verdict_name(rows.rows[i].verdict), rows.rows[i].note);
        assert_int_equal(rows.rows[i].verdict, want[i]);
    }
    result_list_free(&rows);
    /* Nothing left behind. */
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
    assert_int_equal(errno, ECHILD);
}

int main(void)
{
    const struct CMUnitTest plain[] = {
        cmocka_unit_test(test_output_comes_back_intact),
        cmocka_unit_test(test_failure_exit_and_signal),
        cmocka_unit_test(test_spawned_processes_end_with_the_child),
    };
    const struct CMUnitTest plugins[] = {
        cmocka_unit_test(test_registry_kernel_isolated),
        cmocka_unit_test(test_segfaulting_plugin),
        cmocka_unit_test(test_aborting_plugin),
        cmocka_unit_test(test_hanging_plugin_times_out),
        cmocka_unit_test(test_the_run_goes_on),
    };
    const struct CMUnitTest workers[] = {
        cmocka_unit_test(test_worker_serves_many_calls),
        cmocka_unit_test(test_worker_crash_exit_and_hang),
        cmocka_unit_test(test_worker_retired_or_killed),
        cmocka_unit_test(test_worker_closes_inherited_descriptors),
    };
    int failed = cmocka_run_group_tests(plain, NULL, NULL);
    failed += cmocka_run_group_tests(workers, NULL, NULL);
    failed += cmocka_run_group_tests(plugins, setup, teardown);
    return failed;
}
