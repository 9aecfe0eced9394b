#ifndef VAULT_CPLATFORM_H
#define VAULT_CPLATFORM_H

#include <spawn.h>

/// Makes the process non-dumpable and sets the soft RLIMIT_CORE to 0. Returns 0 or -1 (errno set).
int vault_refuse_core_dumps(void);
/// The process's PR_GET_DUMPABLE value, or -1.
int vault_get_dumpable(void);
/// Turns terminal echo off on fd, remembering the old settings so that a
/// SIGINT, SIGTERM, SIGHUP or SIGQUIT restores them before the process dies.
int vault_tty_echo_off(int fd);
/// Restores what vault_tty_echo_off changed and removes its signal handlers.
void vault_tty_restore(void);

/// Makes a spawned child close every descriptor from `lowest` up, so it
/// inherits only what the spawn set up (glibc's closefrom action, which
/// Swift cannot see without _GNU_SOURCE). Returns 0 or an errno value.
int vault_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest);

#endif
