#ifndef VAULT_CPLATFORM_H
#define VAULT_CPLATFORM_H

/// Makes the process non-dumpable and sets RLIMIT_CORE to 0. Returns 0 or -1 (errno set).
int vault_refuse_core_dumps(void);
/// The process's PR_GET_DUMPABLE value, or -1.
int vault_get_dumpable(void);
/// Turns terminal echo off on fd, remembering the old settings so that a
/// SIGINT, SIGTERM, SIGHUP or SIGQUIT restores them before the process dies.
int vault_tty_echo_off(int fd);
/// Restores what vault_tty_echo_off changed and removes its signal handlers.
void vault_tty_restore(void);

#endif
