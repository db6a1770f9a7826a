/* syscall(2), SYS_getdents64 */
#define _GNU_SOURCE
#include "cli_interrupt.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cli_shell_words.h"

/* The one piece of process-wide state outside the registry: a signal
 * handler can reach nothing else.  Written before the handlers are armed,
 * read only by them. */
static struct {
    char partial_dir[4200];       /* RUNDIR/partial */
    char head[4400];              /* "\nkreplay gate: interrupted by " */
    char tail[8192];              /* " finished and kept in ...; finish the run with:\n  CMD\n" */
    pid_t pid;                    /* the gate's own process: a forked child says nothing */
    struct sigaction old_int, old_term;
    int armed;
} interrupt_state;

static void put(const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

/* The finished case files in the partial folder ("*.h5"; a write in flight
 * is "*.h5.tmp.PID"), counted with calls a signal handler may make; -1 when
 * they cannot be counted. */
static long count_partials(void)
{
#ifdef SYS_getdents64
    int fd = open(interrupt_state.partial_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return 0;   /* no folder yet: no case finished */
    long n = 0;
    char buf[8192];
    for (;;) {
        long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
        if (got <= 0) {
            n = got < 0 ? -1 : n;
            break;
        }
        /* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name */
        for (long off = 0; off < got;) {
            unsigned short reclen;
            memcpy(&reclen, buf + off + 16, sizeof reclen);
            const char *name = buf + off + 19;
            size_t len = strlen(name);
            n += name[0] != '.' && len > 3 && !strcmp(name + len - 3, ".h5");
            off += reclen;
        }
    }
    close(fd);
    return n;
#else
    return -1;
#endif
}

static void on_signal(int sig)
{
    if (getpid() != interrupt_state.pid) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    const long kept = count_partials();
    char num[24];
    int i = (int)sizeof num - 1;
    num[i] = '\0';
    for (long v = kept < 0 ? 0 : kept; i == (int)sizeof num - 1 || v > 0; v /= 10)
        num[--i] = (char)('0' + v % 10);
    put(interrupt_state.head);
    put(sig == SIGINT ? "SIGINT; " : "SIGTERM; ");
    put(kept < 0 ? "the cases" : num + i);
    put(kept == 1 ? " case" : kept < 0 ? "" : " cases");
    put(interrupt_state.tail);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* The resume command: the same words, --force left out, --resume added. */
static void resume_command(FILE *fp, int argc, char **argv)
{
    cli_binary_word(fp);
    int has_resume = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--force"))
            continue;
        has_resume |= !strcmp(argv[i], "--resume");
        fputc(' ', fp);
        cli_shell_word(fp, argv[i]);
    }
    if (!has_resume)
        fputs(" --resume", fp);
}

void cli_interrupt_arm(const char *run_dir, int argc, char **argv)
{
    snprintf(interrupt_state.partial_dir, sizeof interrupt_state.partial_dir, "%s/partial", run_dir);
    snprintf(interrupt_state.head, sizeof interrupt_state.head, "\nkreplay %s: interrupted by ",
             argc > 0 ? argv[0] : "gate");
    char *cmd = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&cmd, &len);
    if (mem) {
        resume_command(mem, argc, argv);
        fclose(mem);
    }
    snprintf(interrupt_state.tail, sizeof interrupt_state.tail,
             " finished and kept in %s/ (the case that was running is not); finish the run with:\n  %s\n",
             interrupt_state.partial_dir, cmd ? cmd : "the same command and --resume");
    free(cmd);
    interrupt_state.pid = getpid();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    /* A signal ignored at start stays ignored (a shell starts background
     * jobs so, that Ctrl-C on the terminal spares them). */
    sigaction(SIGINT, NULL, &interrupt_state.old_int);
    sigaction(SIGTERM, NULL, &interrupt_state.old_term);
    if (interrupt_state.old_int.sa_handler != SIG_IGN)
        sigaction(SIGINT, &sa, NULL);
    if (interrupt_state.old_term.sa_handler != SIG_IGN)
        sigaction(SIGTERM, &sa, NULL);
    interrupt_state.armed = 1;
}

void cli_interrupt_disarm(void)
{
    if (!interrupt_state.armed)
        return;
    sigaction(SIGINT, &interrupt_state.old_int, NULL);
    sigaction(SIGTERM, &interrupt_state.old_term, NULL);
    interrupt_state.armed = 0;
}
