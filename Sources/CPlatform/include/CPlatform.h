#ifndef VAULT_CPLATFORM_H
#define VAULT_CPLATFORM_H

#include <spawn.h>

/// Makes the process non-dumpable and sets the soft RLIMIT_CORE to 0. Returns 0 or -1 (errno set).
int vault_refuse_core_dumps(void);
/// The process's PR_GET_DUMPABLE value, or -1.
int vault_get_dumpable(void);
/// Turns terminal echo off on fd, remembering the old settings so that a
/// terminating signal restores them before the process dies, a stop (Ctrl-Z)
/// restores them while stopped, and SIGCONT turns echo off again.
int vault_tty_echo_off(int fd);
/// Restores what vault_tty_echo_off changed and removes its signal handlers.
void vault_tty_restore(void);

/// Makes a spawned child close every descriptor from `lowest` up, so it
/// inherits only what the spawn set up (glibc's closefrom action, which
/// Swift cannot see without _GNU_SOURCE). Returns 0 or an errno value.
int vault_spawn_close_from(posix_spawn_file_actions_t *actions, int lowest);

/// A listening Unix stream socket bound at `path` (which must not exist),
/// created under umask 0177 so only the owner may connect; close-on-exec
/// and non-blocking. Returns the descriptor or -1 (errno set).
int vault_unix_listen(const char *path);
/// A connected Unix stream socket to `path`, close-on-exec, or -1 (errno set).
int vault_unix_connect(const char *path);
/// The next connection on a listening socket, close-on-exec, or -1 (errno set).
int vault_unix_accept(int fd);
/// An epoll instance watching the listening sockets `fd` and `fd2` (skipped
/// when negative) for connections, registered EPOLLEXCLUSIVE: of the threads
/// waiting on such instances, the kernel wakes one per connection, not all.
/// Close-on-exec; -1 (errno set) on failure.
int vault_accept_waiter(int fd, int fd2);
/// Waits on a waiter up to `timeout_ms`: 1 when a connection may be
/// waiting, 0 on timeout, -1 (errno set) on failure.
int vault_accept_wait(int waiter, int timeout_ms);
/// The uid of the process at the other end of a Unix socket (SO_PEERCRED),
/// or -1 (errno set).
long long vault_peer_uid(int fd);
/// The uid and pid of the process at the other end of a Unix socket, with
/// one SO_PEERCRED: 0, or -1 (errno set). The pid is 0 when the kernel
/// does not know it (the peer is in another pid namespace).
int vault_peer_credentials(int fd, long long *uid, int *pid);

/// Blocks SIGTERM, SIGINT and SIGHUP, ignores SIGPIPE, and returns a
/// non-blocking signalfd that reports the blocked ones, or -1.
int vault_signal_fd(void);
/// The next signal number pending on a vault_signal_fd, or 0 if none.
int vault_signal_read(int fd);
/// Unblocks what vault_signal_fd blocked (for a child about to exec).
void vault_signal_unblock(void);

/// From now on, zero every heap block before it is freed or moved by
/// realloc (the agent turns it on; see wipe.c). Cannot be turned off.
void vault_wipe_freed_memory(void);
/// 1 when vault_wipe_freed_memory was called.
int vault_wiping_freed_memory(void);
/// Returns free heap pages to the kernel (malloc_trim).
void vault_release_free_memory(void);

/// Makes a spawned child lead a session of its own (POSIX_SPAWN_SETSID, a
/// GNU extension Swift cannot see), with no signal blocked
/// and the signals vault blocks or ignores (TERM, INT, HUP, PIPE, QUIT)
/// back at their defaults. Returns 0, or an errno value.
int vault_spawn_detached(posix_spawnattr_t *attributes);

/// The processors this process may run on (sched_getaffinity, a GNU
/// extension Swift cannot see); 1 when that cannot be learned.
int vault_usable_processors(void);

#endif
