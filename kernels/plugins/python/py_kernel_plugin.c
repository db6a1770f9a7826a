/* libkr_plugin_python.so: Python callables as kreplay kernels (kernels/plugin.h).
 *
 * `kreplay replay --py MODULE:FUNCTION` puts the specs in KREPLAY_PY_KERNELS
 * (comma-separated) and loads this library like any --plugin; each spec is
 * one kernel, named "py.<module's last part>.<function>".  The plugin is
 * persistent (KREPLAY_PLUGIN_PERSISTENT): kreplay launches its kernels in one
 * worker process for the run, and the first launch there starts
 *     $KREPLAY_PYTHON (default python3) -I kreplay_py_runner.py
 * (the runner lies next to this library), which then serves every launch of
 * every Python kernel of the run: torch, Triton and the kernels' modules
 * stay imported.  The operands and the output travel through a shared
 * memory file (descriptor 4 of the runner), the requests and answers over a
 * socket (descriptor 3); protocol: the runner's docstring.  So a Python
 * kernel runs wherever kreplay runs a plugin's launch -- isolated, with its
 * timeout, reruns, output poison and guards -- and:
 *   - a Python exception is a failed launch whose last_error is the
 *     traceback's last line: an ERROR row; the interpreter goes on;
 *   - an interpreter killed by a signal (a ctypes segfault) re-raises that
 *     signal here, so the worker dies of it: a CRASHED row naming it, and
 *     the next launch starts a fresh worker and interpreter;
 *   - a hang blocks this launch until the worker's timeout kills the worker;
 *     the interpreter, in the worker's process group, dies with it: a
 *     TIMEOUT row.
 *
 * Operands go by name (plugin.h's launch_named): the runner reads the
 * callable's signature and asks for what it takes; each is fetched from
 * kreplay then, with its digest when the runner keeps device copies
 * (KREPLAY_PY_DEVICE, set by kreplay's GPU worker).  "MODULE:FUNCTION@KERNEL"
 * declares the operands of registry kernel KERNEL (operands_of): its
 * activations, weight and references.
 *
 * The kernel table is filled once, by the constructor, from the environment:
 * plugin.h's ABI is one data symbol and a launch has no context argument, so
 * the table (and one trampoline per slot) is the only place a spec can live;
 * the runner is the process's one interpreter, for the same reason. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
#define SHARED_FD 4
#define PY_VERSION 3

static kreplay_kernel_t py_kernels[PY_MAX_KERNELS];
static char py_names[PY_MAX_KERNELS][64];
static char py_specs[PY_MAX_KERNELS][PY_SPEC_MAX];     /* MODULE:FUNCTION */
static char py_operands_of[PY_MAX_KERNELS][64];         /* KERNEL of "@KERNEL", or "" */
static char py_runner[4096];
static int py_kernel_count;     /* the constructor's; kreplay_plugin.kernel_count is the same */
static __thread char py_error[1024];

/* The run's interpreter: its process, its socket, the shared file and its
 * mapping.  pid 0: none yet (or it died and was reaped). */
static struct {
    pid_t pid;
    int sock;
    int shm;
    unsigned char *map;
    size_t size;
    uint64_t out_at;            /* where the last launch's output goes in the shared file */
} runner = {0, -1, -1, NULL, 0, 0};

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

static pid_t fork_runner(int child_end, int shm)
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
    /* Out of the way first (either may already sit on 3 or 4), then into place:
     * dup2 clears close-on-exec on the copies. */
    const int sock_high = fcntl(child_end, F_DUPFD, 10), shm_high = fcntl(shm, F_DUPFD, 10);
    if (sock_high < 0 || shm_high < 0 || dup2(sock_high, CHILD_FD) < 0 ||
        dup2(shm_high, SHARED_FD) < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
        _exit(126);
    /* -I: nothing from the working directory or the user's site shadows the
     * modules a kernel imports (the runner puts back what a spec needs). */
    char *const argv[] = {(char *)python, "-I", py_runner, NULL};
    execvp(python, argv);
    _exit(127);
}

/* The interpreter, started on the first launch.  0, or 1 with py_error set. */
static int ensure_runner(int idx)
{
    if (runner.pid > 0)
        return 0;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv))
        return fail("%s: socketpair failed (errno %ld)", py_specs[idx], errno);
    if (runner.shm < 0 && (runner.shm = memfd_create("kreplay-py", MFD_CLOEXEC)) < 0) {
        close(sv[0]);
        close(sv[1]);
        return fail("%s: memfd_create failed (errno %ld)", py_specs[idx], errno);
    }
    const pid_t pid = fork_runner(sv[1], runner.shm);
    close(sv[1]);
    if (pid < 0) {
        close(sv[0]);
        return fail("%s: fork failed (errno %ld)", py_specs[idx], errno);
    }
    runner.pid = pid;
    runner.sock = sv[0];
    return 0;
}

/* The runner ended without an answer: say how, and pass a signal on. */
static int runner_died(int idx)
{
    int st = 0;
    while (waitpid(runner.pid, &st, 0) < 0 && errno == EINTR) {
    }
    close(runner.sock);
    runner.sock = -1;
    runner.pid = 0;     /* the next launch starts another */
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

/* The shared file at least `bytes` long, mapped.  0, or -1. */
static int shared_room(size_t bytes)
{
    if (bytes <= runner.size)
        return 0;
    if (runner.map)
        munmap(runner.map, runner.size);
    runner.map = NULL;
    runner.size = 0;
    if (ftruncate(runner.shm, (off_t)bytes))
        return -1;
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, runner.shm, 0);
    if (m == MAP_FAILED)
        return -1;
    runner.map = m;
    runner.size = bytes;
    return 0;
}

/* A 64-bit digest of an operand: two multiply-rotate lanes over 8-byte
 * words.  Only where the runner keeps device copies (KREPLAY_PY_DEVICE). */
static uint64_t digest(const unsigned char *p, size_t n)
{
    uint64_t a = 0x9E3779B97F4A7C15ull ^ n, b = 0xC2B2AE3D27D4EB4Full;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        uint64_t u, v;
        memcpy(&u, p + i, 8);
        memcpy(&v, p + i + 8, 8);
        a = ((a ^ u) * 0xFF51AFD7ED558CCDull) << 29 | ((a ^ u) * 0xFF51AFD7ED558CCDull) >> 35;
        b = ((b ^ v) * 0xC4CEB9FE1A85EC53ull) << 31 | ((b ^ v) * 0xC4CEB9FE1A85EC53ull) >> 33;
    }
    for (; i < n; i++)
        a = (a ^ p[i]) * 0x100000001B3ull;
    a ^= b * 0x9E3779B97F4A7C15ull;
    return a ^ (a >> 31);
}

#define SHARED_ALIGN(n) (((n) + 63) & ~(size_t)63)

/* The operands the runner asked for (names separated by '\n'), each copied
 * into the shared file, and room for the output after them; the answer:
 * the file's size, each operand's length, offset and digest (or -length and
 * why it is not available), the output's offset.  0, or -1. */
static int send_requested(int fd, char *names, const kreplay_operand_source_t *src,
                          kreplay_get_operand_fn get, size_t out_bytes)
{
    enum { MAX_NAMES = 16 };
    const void *data[MAX_NAMES];
    int64_t bytes[MAX_NAMES];
    int n = 0, status = 0;
    size_t total = 0;
    for (char *save = NULL, *p = strtok_r(names, "\n", &save); p && n < MAX_NAMES;
         p = strtok_r(NULL, "\n", &save), n++) {
        data[n] = NULL;
        status = get(src, p, &data[n], &bytes[n]);
        if (status)
            bytes[n] = -1;
        else
            total += SHARED_ALIGN((size_t)bytes[n]);
    }
    if (shared_room(total + out_bytes))
        return -1;
    const int keep = getenv("KREPLAY_PY_DEVICE") != NULL;
    uint64_t size = runner.size, offset = 0;
    if (send_all(fd, &size, 8))
        return -1;
    for (int i = 0; i < n; i++) {
        if (bytes[i] < 0) {
            const char *why = data[i] ? (const char *)data[i] : "not available";
            int64_t neg = -(int64_t)strlen(why);
            if (send_all(fd, &neg, 8) || send_all(fd, why, strlen(why)))
                return -1;
            continue;
        }
        memcpy(runner.map + offset, data[i], (size_t)bytes[i]);
        const uint64_t where[2] = {offset, keep ? digest(runner.map + offset, (size_t)bytes[i]) : 0};
        if (send_all(fd, &bytes[i], 8) || send_all(fd, where, 16))
            return -1;
        offset += SHARED_ALIGN((size_t)bytes[i]);
    }
    runner.out_at = offset;
    return send_all(fd, &offset, 8);
}

/* Frames until the answer; status 2 is a request for operands.  1 with
 * *status and *len, or 0 when the runner's stream ended. */
static int await_answer(const kreplay_operand_source_t *src, kreplay_get_operand_fn get,
                        size_t out_bytes, int32_t *status, uint64_t *len)
{
    for (;;) {
        unsigned char ans[12];
        if (recv_all(runner.sock, ans, sizeof ans) != 1)
            return 0;
        memcpy(status, ans, 4);
        memcpy(len, ans + 4, 8);
        if (*status != 2)
            return 1;
        char *names = *len < (1u << 16) ? malloc(*len + 1) : NULL;
        int ok = names && recv_all(runner.sock, names, (size_t)*len) == 1;
        if (ok) {
            names[*len] = 0;
            ok = send_requested(runner.sock, names, src, get, out_bytes) == 0;
        }
        free(names);
        if (!ok)
            return 0;
    }
}

static int py_launch_named(int32_t idx, const kreplay_operand_source_t *src,
                           kreplay_get_operand_fn get, void *out, int64_t M, int64_t N, int64_t K,
                           void *stream)
{
    (void)stream;
    py_error[0] = 0;
    if (idx < 0 || idx >= py_kernel_count)
        return fail("no Python kernel %s%ld", "", idx);
    if (ensure_runner(idx))
        return 1;
    const uint32_t spec_len = (uint32_t)strlen(py_specs[idx]);
    unsigned char head[36];
    const uint32_t version = PY_VERSION;
    memcpy(head, "KRPY", 4);
    memcpy(head + 4, &version, 4);
    memcpy(head + 8, &M, 8);
    memcpy(head + 16, &N, 8);
    memcpy(head + 24, &K, 8);
    memcpy(head + 32, &spec_len, 4);
    const size_t out_bytes = (size_t)M * (size_t)N * 2;
    int32_t status = 1;
    uint64_t len = 0;
    /* A runner that died makes a send fail (no SIGPIPE) or the stream end: its status says why. */
    if (send_all(runner.sock, head, sizeof head) || send_all(runner.sock, py_specs[idx], spec_len) ||
        !await_answer(src, get, out_bytes, &status, &len))
        return runner_died(idx);
    if (status == 0 && len == out_bytes && runner.size >= out_bytes) {
        memcpy(out, runner.map + runner.out_at, out_bytes);
        return 0;
    }
    if (status == 1 && len < sizeof py_error) {
        char msg[sizeof py_error];
        if (recv_all(runner.sock, msg, (size_t)len) != 1)
            return runner_died(idx);
        msg[len] = 0;
        snprintf(py_error, sizeof py_error, "%s", msg);
        return 1;
    }
    return fail("%s: a malformed answer (length %ld)", py_specs[idx], (long)len);
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
    .flags = KREPLAY_PLUGIN_PERSISTENT,
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
