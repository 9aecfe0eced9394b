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

/// `size` zeroed bytes of locked memory from a pool of small slots
/// (secure_pool.c), or NULL when `size` is over 32768 or no memory could be
/// mapped: then use sodium_malloc. Does not need libsodium.
void *vault_secure_pool_alloc(size_t size);

/// Zeroes a slot from vault_secure_pool_alloc of that `size` and returns it
/// to the pool: 0; -1, doing nothing, when `pointer` is not in the pool.
int vault_secure_pool_free(void *pointer, size_t size);

#endif
