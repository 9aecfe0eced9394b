#define _GNU_SOURCE
#include "CPlatform.h"
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <termios.h>
#include <unistd.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/signalfd.h>

int vault_refuse_core_dumps(void) {
    /* Only the soft limit: lowering the hard limit could not be undone for
       the command 'vault exec' runs, and non-dumpable already stops dumps. */
    struct rlimit core;
    if (getrlimit(RLIMIT_CORE, &core) != 0) return -1;
    core.rlim_cur = 0;
    if (setrlimit(RLIMIT_CORE, &core) != 0) return -1;
    /* Non-dumpable also stops other processes of the same user from
       ptrace-attaching or reading /proc/PID/mem. */
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return -1;
    return 0;
}

int vault_get_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }

/* State for restoring the terminal from a signal handler: plain C statics
   because a handler can touch nothing else safely. */
static volatile sig_atomic_t tty_saved = 0;
static int tty_fd = -1;
static struct termios tty_old;
static struct termios tty_quiet;
/* Terminating signals restore the terminal and die; stop signals restore
   it, stop, and turn echo off again when continued; SIGCONT alone (after
   an uncatchable SIGSTOP) turns echo off again. */
static const int tty_signals[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGALRM, SIGUSR1,
                                  SIGUSR2, SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT};
static struct sigaction tty_old_actions[sizeof tty_signals / sizeof tty_signals[0]];

static void tty_quiet_again(void) {
    /* Only from the foreground: a background write to the terminal's
       settings would stop the process again (SIGTTOU). */
    if (tty_saved && tcgetpgrp(tty_fd) == getpgrp()) tcsetattr(tty_fd, TCSANOW, &tty_quiet);
}

static void tty_on_signal(int sig) {
    int saved_errno = errno;
    if (sig == SIGCONT) {
        tty_quiet_again();
        errno = saved_errno;
        return;
    }
    if (tty_saved) {
        tcsetattr(tty_fd, TCSAFLUSH, &tty_old);
        (void)!write(tty_fd, "\n", 1);
    }
    if (sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
        struct sigaction dfl, mine;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        sigaction(sig, &dfl, &mine);
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, sig);
        sigprocmask(SIG_UNBLOCK, &set, NULL);
        raise(sig); /* stops here until SIGCONT */
        sigprocmask(SIG_BLOCK, &set, NULL);
        sigaction(sig, &mine, NULL);
        tty_quiet_again();
        errno = saved_errno;
        return;
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

int vault_tty_echo_off(int fd) {
    struct termios t;
    if (tcgetattr(fd, &t) != 0) return -1;
    tty_old = t;
    tty_fd = fd;
    t.c_lflag &= ~(tcflag_t)(ECHO | ECHOE | ECHOK | ECHONL);
    t.c_lflag |= ICANON;
    tty_quiet = t;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = tty_on_signal;
    sigemptyset(&sa.sa_mask);
    /* A background process may change the terminal only with SIGTTOU
       blocked; the handler must not stop itself restoring it. */
    sigaddset(&sa.sa_mask, SIGTTOU);
    for (size_t i = 0; i < sizeof tty_signals / sizeof tty_signals[0]; i++)
        sigaction(tty_signals[i], &sa, &tty_old_actions[i]);
    tty_saved = 1;
    if (tcsetattr(fd, TCSAFLUSH, &t) != 0) {
        vault_tty_restore();
        return -1;
    }
    return 0;
}

void vault_tty_restore(void) {
    if (!tty_saved) return;
    tcsetattr(tty_fd, TCSAFLUSH, &tty_old);
    tty_saved = 0;
    for (size_t i = 0; i < sizeof tty_signals / sizeof tty_signals[0]; i++)
        sigaction(tty_signals[i], &tty_old_actions[i], NULL);
}

int vault_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}

static int unix_address(const char *path, struct sockaddr_un *addr) {
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof addr->sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memset(addr, 0, sizeof *addr);
    addr->sun_family = AF_UNIX;
    memcpy(addr->sun_path, path, n + 1);
    return 0;
}

int vault_unix_listen(const char *path) {
    struct sockaddr_un addr;
    if (unix_address(path, &addr) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&addr, sizeof addr);
    int saved = errno;
    umask(old);
    if (rc != 0 || listen(fd, 64) != 0) {
        if (rc == 0) saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int vault_unix_connect(const char *path) {
    struct sockaddr_un addr;
    if (unix_address(path, &addr) != 0) return -1;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    while (connect(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        if (errno == EINTR) continue;
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int vault_unix_accept(int fd) { return accept4(fd, NULL, NULL, SOCK_CLOEXEC); }

int vault_accept_waiter(int fd, int fd2) {
    int waiter = epoll_create1(EPOLL_CLOEXEC);
    if (waiter < 0) return -1;
    int fds[2] = {fd, fd2};
    for (int i = 0; i < 2; i++) {
        if (fds[i] < 0) continue;
        struct epoll_event event = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.fd = fds[i]};
        if (epoll_ctl(waiter, EPOLL_CTL_ADD, fds[i], &event) != 0) {
            int saved = errno;
            close(waiter);
            errno = saved;
            return -1;
        }
    }
    return waiter;
}

int vault_accept_wait(int waiter, int timeout_ms) {
    struct epoll_event events[2];
    int n = epoll_wait(waiter, events, 2, timeout_ms);
    return n < 0 ? -1 : (n > 0 ? 1 : 0);
}

long long vault_peer_uid(int fd) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred) return -1;
    return (long long)cred.uid;
}

int vault_peer_credentials(int fd, long long *uid, int *pid) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred) return -1;
    *uid = (long long)cred.uid;
    *pid = (int)cred.pid;
    return 0;
}

static sigset_t agent_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    return set;
}

int vault_signal_fd(void) {
    sigset_t set = agent_signals();
    signal(SIGPIPE, SIG_IGN);
    if (sigprocmask(SIG_BLOCK, &set, NULL) != 0) return -1;
    return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int vault_signal_read(int fd) {
    struct signalfd_siginfo info;
    ssize_t n = read(fd, &info, sizeof info);
    if (n != (ssize_t)sizeof info) return 0;
    return (int)info.ssi_signo;
}

void vault_signal_unblock(void) {
    sigset_t set = agent_signals();
    sigprocmask(SIG_UNBLOCK, &set, NULL);
}

int vault_spawn_detached(posix_spawnattr_t *attributes) {
    sigset_t empty, defaults;
    sigemptyset(&empty);
    sigemptyset(&defaults);
    int reset[] = {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGQUIT};
    for (size_t i = 0; i < sizeof reset / sizeof reset[0]; i++) sigaddset(&defaults, reset[i]);
    int rc = posix_spawnattr_setsigmask(attributes, &empty);
    if (rc == 0) rc = posix_spawnattr_setsigdefault(attributes, &defaults);
    if (rc == 0) rc = posix_spawnattr_setflags(attributes, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    return rc;
}

int vault_usable_processors(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
    int n = CPU_COUNT(&set);
    return n > 0 ? n : 1;
}
