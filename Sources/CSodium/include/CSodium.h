#ifndef VAULT_CSODIUM_H
#define VAULT_CSODIUM_H

/* libsodium's API, loaded with dlopen on first use.

   This header gives Swift libsodium's own declarations and constants;
   sodium.c defines the functions vault uses as trampolines into the
   library, which it loads the first time one of them is called. A process
   that never touches a key (a token handed over by the agent, `--version`,
   help) therefore never maps libsodium. Calling a libsodium function that
   sodium.c does not define fails at link time. */
#include <sodium.h>

/// Loads libsodium and runs sodium_init once. Returns 0, or -1 with a
/// static message in *error.
int vault_sodium_load(const char **error);

#endif
