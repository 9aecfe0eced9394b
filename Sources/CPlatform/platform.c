#define _GNU_SOURCE
#include "CPlatform.h"
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <termios.h>
#include <unistd.h>

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
static const int tty_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGTSTP};
static struct sigaction tty_old_actions[sizeof tty_signals / sizeof tty_signals[0]];

static void tty_on_signal(int sig) {
    if (tty_saved) {
        tcsetattr(tty_fd, TCSAFLUSH, &tty_old);
        (void)!write(tty_fd, "\n", 1);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

int vault_tty_echo_off(int fd) {
    struct termios t;
    if (tcgetattr(fd, &t) != 0) return -1;
    tty_old = t;
    tty_fd = fd;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = tty_on_signal;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof tty_signals / sizeof tty_signals[0]; i++)
        sigaction(tty_signals[i], &sa, &tty_old_actions[i]);
    tty_saved = 1;
    t.c_lflag &= ~(tcflag_t)(ECHO | ECHOE | ECHOK | ECHONL);
    t.c_lflag |= ICANON;
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
