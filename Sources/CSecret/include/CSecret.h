#ifndef VAULT_CSECRET_H
#define VAULT_CSECRET_H

#include <stddef.h>

/// The Linux Secret Service through libsecret, loaded with dlopen on first
/// use: vault neither links libsecret nor needs it installed.
///
/// Items carry two attributes under the schema "vault.Keyslot": "vault-id"
/// (the vault id in hex) and "slot" (the slot's own id in hex), so each
/// Secret Service slot has its own item. Items stored by older releases
/// have no "slot": a NULL `slot` matches any item of the vault. Every call
/// writes a message into `err` on failure.

/// 0 when libsecret is loaded, else -1 (err says why).
int vault_secret_load(char *err, size_t errlen);
/// Stores `secret` (NUL-terminated) in the default collection. 0 or -1.
int vault_secret_store(
    const char *vault_id, const char *slot, const char *label, const char *secret, char *err, size_t errlen);
/// Copies the stored secret into `out`: its length, 0 when there is none,
/// -1 on an error (or when it does not fit). libsecret's copy is wiped.
int vault_secret_lookup(const char *vault_id, const char *slot, char *out, size_t outlen, char *err, size_t errlen);
/// Removes the matching items. 1 removed, 0 there was none, -1 error.
int vault_secret_clear(const char *vault_id, const char *slot, char *err, size_t errlen);

#endif
