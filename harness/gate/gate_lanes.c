/* MAP_ANONYMOUS is not POSIX. */
#define _DEFAULT_SOURCE

#include "gate_lanes.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "isolate.h"
#include "kr_string.h"

#define MAX_LANES 16

enum { MSG_START = 1, MSG_RESULT, MSG_FATAL };

/* One report of a lane: then msg_len bytes of text, then n_rows rows. */
typedef struct {
    int32_t type;
    int32_t outcome;
    int64_t item;
    int64_t msg_len;
    int64_t n_rows;
} lane_msg_t;

/* All n bytes written (writing) or read: 0, or -1 at an error or the
 * stream's end. */
static int transfer_all(int fd, void *p, size_t n, int writing)
{
    for (size_t done = 0; done < n;) {
        char *at = (char *)p + done;
        const ssize_t r = writing ? write(fd, at, n - done) : read(fd, at, n - done);
        if (r > 0)
            done += (size_t)r;
        else if (r == 0 || errno != EINTR)
            return -1;
    }
    return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
    return transfer_all(fd, (void *)p, n, 1);
}

static int read_all(int fd, void *p, size_t n)
{
    return transfer_all(fd, p, n, 0);
}

static int send_msg(int fd, int type, int64_t item, int outcome, const char *msg,
                    const result_list_t *rows)
{
    const lane_msg_t h = {.type = type, .outcome = outcome, .item = item,
                          .msg_len = msg ? (int64_t)strlen(msg) : 0, .n_rows = rows ? rows->count : 0};
    return write_all(fd, &h, sizeof h) || (h.msg_len && write_all(fd, msg, (size_t)h.msg_len)) ||
           (h.n_rows && write_all(fd, rows->rows, (size_t)h.n_rows * sizeof(result_t)));
}

/* A lane's process: its worker, then items until the plan is done. */
static void lane_main(const gate_lanes_t *l, int device, int64_t *next, int fd)
{
    kr_error_t err = {{0}};
    if (l->lane_begin(l->ctx, device, &err)) {
        send_msg(fd, MSG_FATAL, -1, 0, err.msg, NULL);
        _exit(1);
    }
    for (;;) {
        const int64_t i = __atomic_fetch_add(next, 1, __ATOMIC_RELAXED);
        if (i >= l->n_items)
            break;
        result_list_t rows = {0};
        kr_error_t cerr = {{0}};
        int outcome = 0;
        if (send_msg(fd, MSG_START, i, 0, NULL, NULL))
            _exit(1);
        l->run_item(l->ctx, i, &rows, &outcome, &cerr);
        const int bad = send_msg(fd, MSG_RESULT, i, outcome, cerr.msg, &rows);
        result_list_free(&rows);
        if (bad)
            _exit(1);
    }
    l->lane_end(l->ctx);
    _exit(0);
}

typedef struct {
    pid_t pid;
    int fd;
    int64_t current;            /* the item it started and has not reported, or -1 */
} lane_t;

/* One message from a lane: 0, 1 at its end of stream, -1 with err. */
static int take_msg(const gate_lanes_t *l, lane_t *ln, kr_error_t *err)
{
    lane_msg_t h;
    if (read_all(ln->fd, &h, sizeof h))
        return 1;
    char msg[KR_ERROR_MSG_MAX] = "";
    result_list_t rows = {0};
    if (h.msg_len < 0 || h.msg_len >= (int64_t)sizeof msg || h.n_rows < 0 ||
        read_all(ln->fd, msg, (size_t)h.msg_len))
        return 1;
    msg[h.msg_len] = '\0';
    if (h.type == MSG_START) {
        ln->current = h.item;
        return 0;
    }
    if (h.type == MSG_FATAL)
        return kr_fail(err, "a GPU lane could not start: %s", msg);
    if (h.n_rows && !(rows.rows = malloc((size_t)h.n_rows * sizeof(result_t))))
        return kr_fail(err, "out of memory for a lane's rows");
    rows.count = rows.cap = h.n_rows;
    if (h.n_rows && read_all(ln->fd, rows.rows, (size_t)h.n_rows * sizeof(result_t))) {
        result_list_free(&rows);
        return 1;
    }
    ln->current = -1;
    kr_error_t cerr = {{0}};
    kr_strlcpy(cerr.msg, msg, sizeof cerr.msg);
    const int st = l->apply(l->ctx, h.item, h.outcome, &cerr, rows.rows, rows.count, err);
    result_list_free(&rows);
    return st;
}

/* A lane's end: reaped, and the item it died on reported lost. */
static int lane_ended(const gate_lanes_t *l, lane_t *ln, kr_error_t *err)
{
    int status = 0;
    while (waitpid(ln->pid, &status, 0) < 0 && errno == EINTR) {
    }
    close(ln->fd);
    ln->fd = -1;
    if (ln->current < 0)
        return 0;
    kr_error_t cerr = {{0}};
    char sig[32];
    if (WIFSIGNALED(status))
        kr_fail(&cerr, "the GPU lane replaying it died (%s)", isolate_signal_name(WTERMSIG(status), sig, sizeof sig));
    else
        kr_fail(&cerr, "the GPU lane replaying it exited with status %d", WEXITSTATUS(status));
    return l->apply(l->ctx, ln->current, l->lost_outcome, &cerr, NULL, 0, err);
}

static int start_lanes(const gate_lanes_t *l, const int *devices, int n, int64_t *next, lane_t *lanes,
                       kr_error_t *err)
{
    for (int i = 0; i < n; i++) {
        int fds[2];
        if (pipe(fds))
            return kr_fail(err, "GPU lanes: pipe: %s", strerror(errno));
        fflush(stdout);
        fflush(stderr);
        const pid_t parent = getpid();
        const pid_t pid = fork();
        if (pid < 0) {
            close(fds[0]);
            close(fds[1]);
            return kr_fail(err, "GPU lanes: fork: %s", strerror(errno));
        }
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(1);
            close(fds[0]);
            for (int j = 0; j < i; j++)
                close(lanes[j].fd);
            lane_main(l, devices[i], next, fds[1]);
        }
        close(fds[1]);
        lanes[i] = (lane_t){.pid = pid, .fd = fds[0], .current = -1};
    }
    return 0;
}

int gate_lanes_run(const gate_lanes_t *l, const int *devices, int n_lanes, kr_error_t *err)
{
    if (n_lanes < 1 || n_lanes > MAX_LANES)
        return kr_fail(err, "GPU lanes: %d lanes; 1 to %d", n_lanes, MAX_LANES);
    int64_t *next = mmap(NULL, sizeof *next, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (next == MAP_FAILED)
        return kr_fail(err, "GPU lanes: mmap: %s", strerror(errno));
    *next = 0;
    lane_t lanes[MAX_LANES];
    memset(lanes, 0, sizeof lanes);
    int status = start_lanes(l, devices, n_lanes, next, lanes, err);
    int open = 0;
    for (int i = 0; i < n_lanes; i++)
        open += lanes[i].pid > 0;
    while (status == 0 && open > 0) {
        struct pollfd pfd[MAX_LANES];
        for (int i = 0; i < n_lanes; i++)
            pfd[i] = (struct pollfd){.fd = lanes[i].fd, .events = POLLIN};
        if (poll(pfd, (nfds_t)n_lanes, -1) < 0 && errno != EINTR) {
            status = kr_fail(err, "GPU lanes: poll: %s", strerror(errno));
            break;
        }
        for (int i = 0; status == 0 && i < n_lanes; i++) {
            if (lanes[i].fd < 0 || !(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            const int r = take_msg(l, &lanes[i], err);
            if (r < 0)
                status = -1;
            else if (r > 0 && (status = lane_ended(l, &lanes[i], err)) == 0)
                open--;
        }
    }
    for (int i = 0; i < n_lanes; i++)
        if (lanes[i].fd >= 0) {  /* stopped early: the others end now */
            kill(lanes[i].pid, SIGKILL);
            close(lanes[i].fd);
            while (waitpid(lanes[i].pid, NULL, 0) < 0 && errno == EINTR) {
            }
        }
    munmap(next, sizeof *next);
    return status;
}
