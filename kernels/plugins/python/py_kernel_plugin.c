/* libkr_plugin_python.so: Python callables as kreplay kernels (kernels/plugin.h).
 *
 * `kreplay replay --py MODULE:FUNCTION` puts the specs in KREPLAY_PY_KERNELS
 * (comma-separated) and loads this library like any --plugin; each spec is
 * one kernel, named "py.<module's last part>.<function>".  A launch starts
 *     $KREPLAY_PYTHON (default python3) -I kreplay_py_runner.py SPEC
 * (the runner lies next to this library), sends it the operands over a
 * socket on its descriptor 3 and reads back the output (protocol: the
 * runner's docstring).  So the Python kernel runs wherever kreplay runs a C
 * plugin's launch -- in the isolated worker, with its timeout, reruns,
 * output poison and guards -- and:
 *   - a Python exception is a failed launch whose last_error is the
 *     traceback's last line: an ERROR row;
 *   - a Python process killed by a signal (a ctypes segfault) re-raises that
 *     signal here, so the worker dies of it: a CRASHED row naming it;
 *   - a hang blocks this launch until the worker's timeout kills the worker;
 *     the interpreter dies with it (PR_SET_PDEATHSIG): a TIMEOUT row.
 * Every launch starts a fresh interpreter: no state survives between
 * launches, as plugin.h asks.
 *
 * Operands go by name (plugin.h's launch_named): the runner reads the
 * callable's signature and asks for what it takes; each is fetched from
 * kreplay then.  "MODULE:FUNCTION@KERNEL" declares the operands of registry
 * kernel KERNEL (operands_of): its activations, weight and references.
 *
 * The kernel table is filled once, by the constructor, from the environment:
 * plugin.h's ABI is one data symbol and a launch has no context argument, so
 * the table (and one trampoline per slot) is the only place a spec can live. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "plugin.h"

#define PY_MAX_KERNELS 8
#define PY_SPEC_MAX 512
#define RUNNER_NAME "kreplay_py_runner.py"
#define CHILD_FD 3

static kreplay_kernel_t py_kernels[PY_MAX_KERNELS];
static char py_names[PY_MAX_KERNELS][64];
static char py_specs[PY_MAX_KERNELS][PY_SPEC_MAX];     /* MODULE:FUNCTION */
static char py_operands_of[PY_MAX_KERNELS][64];         /* KERNEL of "@KERNEL", or "" */
static char py_runner[4096];
static int py_kernel_count;     /* the constructor's; kreplay_plugin.kernel_count is the same */
static __thread char py_error[1024];

static const char *py_last_error(void)
{
    return py_error[0] ? py_error : NULL;
}

static int fail(const char *fmt, const char *a, long b)
{
    snprintf(py_error, sizeof py_error, fmt, a, b);
    return 1;
}

static int send_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* 1 when all n bytes came, 0 on an early end of stream, -1 on an error. */
static int recv_all(int fd, void *p, size_t n)
{
    char *c = p;
    while (n) {
        ssize_t r = recv(fd, c, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            return 0;
        c += r;
        n -= (size_t)r;
    }
    return 1;
}

static pid_t start_runner(int idx, int child_end)
{
    const char *python = getenv("KREPLAY_PYTHON");
    if (!python || !*python)
        python = "python3";
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* Only async-signal-safe calls from here to exec. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(126);
    if (dup2(child_end, CHILD_FD) < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
        _exit(126);
    /* -I: nothing from the working directory or the user's site shadows the
     * modules a kernel imports (the runner puts back what a spec needs). */
    char *const argv[] = {(char *)python, "-I", py_runner, py_specs[idx], NULL};
    execvp(python, argv);
    _exit(127);
}

/* The runner ended without an answer: say how, and pass a signal on. */
static int runner_died(int idx, pid_t pid)
{
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(st)) {
        int sig = WTERMSIG(st);
        fprintf(stderr, "kreplay python kernel %s: the interpreter was killed by signal %d; "
                        "passing it on\n", py_names[idx], sig);
        signal(sig, SIG_DFL);
        raise(sig);
        return fail("%s: the interpreter was killed by signal %ld", py_specs[idx], sig);
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        return fail("%s: could not start the interpreter (exit %ld); expected python3 on PATH "
                    "or KREPLAY_PYTHON naming one", py_specs[idx], 127);
    return fail("%s: the interpreter exited with status %ld before answering", py_specs[idx],
                WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

/* Sends one named operand: i64 length and the bytes, or -(length) and the
 * reason it is not available. */
static int send_operand(int fd, const kreplay_operand_source_t *src, kreplay_get_operand_fn get,
                        const char *name)
{
    const void *data = NULL;
    int64_t bytes = 0;
    if (get(src, name, &data, &bytes) != 0) {
        const char *why = data ? (const char *)data : "not available";
        int64_t neg = -(int64_t)strlen(why);
        return send_all(fd, &neg, 8) || send_all(fd, why, strlen(why));
    }
    return send_all(fd, &bytes, 8) || send_all(fd, data, (size_t)bytes);
}

/* The runner's request: names separated by '\n'. */
static int send_requested(int fd, char *names, const kreplay_operand_source_t *src,
                          kreplay_get_operand_fn get)
{
    for (char *save = NULL, *n = strtok_r(names, "\n", &save); n; n = strtok_r(NULL, "\n", &save))
        if (send_operand(fd, src, get, n))
            return -1;
    return 0;
}

static int py_launch_named(int32_t idx, const kreplay_operand_source_t *src,
                           kreplay_get_operand_fn get, void *out, int64_t M, int64_t N, int64_t K,
                           void *stream)
{
    (void)stream;
    py_error[0] = 0;
    if (idx < 0 || idx >= py_kernel_count)
        return fail("no Python kernel %s%ld", "", idx);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return fail("%s: socketpair failed (errno %ld)", py_specs[idx], errno);
    pid_t pid = start_runner(idx, sv[1]);
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        return fail("%s: fork failed (errno %ld)", py_specs[idx], errno);
    }
    unsigned char head[32];
    const uint32_t version = 2;
    memcpy(head, "KRPY", 4);
    memcpy(head + 4, &version, 4);
    memcpy(head + 8, &M, 8);
    memcpy(head + 16, &N, 8);
    memcpy(head + 24, &K, 8);
    /* A runner that dies early makes a send fail (no SIGPIPE): its status says why. */
    int ok = send_all(sv[0], head, sizeof head) == 0;
    int32_t status = 1;
    uint64_t len = 0;
    /* Frames until the answer: status 2 is a request for operands. */
    while (ok) {
        unsigned char ans[12];
        if (recv_all(sv[0], ans, sizeof ans) != 1) {
            ok = 0;
            break;
        }
        memcpy(&status, ans, 4);
        memcpy(&len, ans + 4, 8);
        if (status != 2)
            break;
        char *names = len < (1u << 16) ? malloc(len + 1) : NULL;
        ok = names && recv_all(sv[0], names, (size_t)len) == 1;
        if (ok) {
            names[len] = 0;
            ok = send_requested(sv[0], names, src, get) == 0;
        }
        free(names);
    }
    if (!ok) {
        close(sv[0]);
        return runner_died(idx, pid);
    }
    int rc = 0;
    if (status == 0 && len == (uint64_t)(M * N) * 2) {
        if (recv_all(sv[0], out, (size_t)len) != 1)
            rc = fail("%s: the answer ended early (%ld bytes expected)", py_specs[idx], (long)len);
    } else if (status == 1 && len < sizeof py_error) {
        char msg[sizeof py_error];
        if (recv_all(sv[0], msg, (size_t)len) == 1) {
            msg[len] = 0;
            snprintf(py_error, sizeof py_error, "%s", msg);
            rc = 1;
        } else {
            rc = fail("%s: the error message ended early", py_specs[idx], 0);
        }
    } else {
        rc = fail("%s: a malformed answer (length %ld)", py_specs[idx], (long)len);
    }
    close(sv[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return rc;
}

#define PY_TRAMPOLINE(i)                                                                         \
    static int py_launch_##i(const void *x_fp8, const void *weight, const void *weight_scale,   \
                             const void *weight_ref, const float *x_scale, void *out, int64_t M, \
                             int64_t N, int64_t K, void *stream)                                 \
    {                                                                                            \
        (void)x_fp8, (void)weight, (void)weight_scale, (void)weight_ref, (void)x_scale;          \
        (void)out, (void)M, (void)N, (void)K, (void)stream;                                      \
        return fail("%s: launched without named operands; expected kreplay to call "            \
                    "launch_named (%ld)", py_specs[i], i);                                       \
    }
PY_TRAMPOLINE(0)
PY_TRAMPOLINE(1)
PY_TRAMPOLINE(2)
PY_TRAMPOLINE(3)
PY_TRAMPOLINE(4)
PY_TRAMPOLINE(5)
PY_TRAMPOLINE(6)
PY_TRAMPOLINE(7)
static const kreplay_launch_fn py_trampolines[PY_MAX_KERNELS] = {
    py_launch_0, py_launch_1, py_launch_2, py_launch_3,
    py_launch_4, py_launch_5, py_launch_6, py_launch_7,
};

KREPLAY_PLUGIN_EXPORT kreplay_plugin_t kreplay_plugin = {
    .abi_version = KREPLAY_PLUGIN_ABI_VERSION,
    .struct_size = sizeof(kreplay_plugin_t),
    .name = "python",
    .kernel_count = 0,      /* the constructor sets it; 0 (refused by the loader) without specs */
    .kernels = py_kernels,
    .last_error = py_last_error,
};

static const char *py_operands_of_kernel(int32_t idx)
{
    return idx >= 0 && idx < PY_MAX_KERNELS && py_operands_of[idx][0] ? py_operands_of[idx] : NULL;
}

KREPLAY_PLUGIN_EXPORT const kreplay_plugin_operands_t kreplay_plugin_operands = {
    .struct_size = sizeof(kreplay_plugin_operands_t),
    .operands_of = py_operands_of_kernel,
    .launch_named = py_launch_named,
};

/* "pkg.mod:fn" or "dir/mod.py:fn" -> "py.mod.fn" ([A-Za-z0-9._+-], at most 63). */
static void kernel_name(const char *spec, char *name, size_t cap)
{
    const char *colon = strrchr(spec, ':');
    const char *mod_end = colon ? colon : spec + strlen(spec);
    if (mod_end - spec > 3 && !strncmp(mod_end - 3, ".py", 3))
        mod_end -= 3;
    const char *mod = spec;
    for (const char *p = spec; p < mod_end; p++)
        if (*p == '/' || *p == '.')
            mod = p + 1;
    snprintf(name, cap, "py.%.*s.%s", (int)(mod_end - mod), mod, colon ? colon + 1 : "");
    for (char *p = name; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '+' || *p == '-'))
            *p = '_';
}

__attribute__((constructor)) static void py_plugin_init(void)
{
    Dl_info info;
    if (dladdr((void *)py_plugin_init, &info) && info.dli_fname) {
        snprintf(py_runner, sizeof py_runner, "%s", info.dli_fname);
        char *slash = strrchr(py_runner, '/');
        size_t at = slash ? (size_t)(slash - py_runner + 1) : 0;
        snprintf(py_runner + at, sizeof py_runner - at, "%s", RUNNER_NAME);
    }
    const char *env = getenv("KREPLAY_PY_KERNELS");
    int n = 0;
    for (const char *p = env; p && *p && n < PY_MAX_KERNELS;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > 0 && len < PY_SPEC_MAX) {
            memcpy(py_specs[n], p, len);
            py_specs[n][len] = 0;
            /* "@KERNEL" after the function: the operands of that registry kernel. */
            char *at = strrchr(py_specs[n], '@');
            char *colon = strrchr(py_specs[n], ':');
            py_operands_of[n][0] = 0;
            if (at && colon && at > colon) {
                snprintf(py_operands_of[n], sizeof py_operands_of[n], "%s", at + 1);
                *at = 0;
            }
            kernel_name(py_specs[n], py_names[n], sizeof py_names[n]);
            py_kernels[n] = (kreplay_kernel_t){
                .name = py_names[n],
                .summary = py_specs[n],
                .accumulation = "the Python callable's own",
                .act_format = KREPLAY_ACT_FP8_E4M3FN_TOKEN,
                .weight_order = KREPLAY_WEIGHT_CHECKPOINT,
                .scale_layout = KREPLAY_SCALES_KN,
                .weight_ref = KREPLAY_WREF_NONE,
                .launch = py_trampolines[n],
            };
            n++;
        }
        p = end ? end + 1 : p + len;
    }
    kreplay_plugin.kernel_count = n;
    py_kernel_count = n;
}
