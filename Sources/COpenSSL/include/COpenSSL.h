#ifndef VAULT_COPENSSL_H
#define VAULT_COPENSSL_H

#include <stddef.h>

/* OpenSSL's libcrypto, for the RSA and SHA-1 based signatures that
   libsodium does not offer (OAuth 1.0a, RFC 7523 assertions). Like libcurl it is loaded with dlopen on first
   use, so commands that never sign do not load it. */

/// Loads libcrypto once. Returns 0, or -1 with a static message in *error.
int vault_openssl_load(const char **error);

/// HMAC-SHA1 of data under key into out (20 bytes). Returns 0 or -1.
int vault_hmac_sha1(const unsigned char *key, size_t key_len, const unsigned char *data, size_t data_len,
                    unsigned char out[20]);

/// RSASSA-PKCS1-v1_5 with SHA-1 over data, with a PEM private key. Writes at
/// most out_cap bytes to out and their count to *out_len. Returns 0 or -1.
int vault_rsa_sha1_sign(const char *pem, size_t pem_len, const unsigned char *data, size_t data_len,
                        unsigned char *out, size_t out_cap, size_t *out_len);

/// RSASSA-PKCS1-v1_5 with SHA-256 (JWS RS256) over data, with a PEM private
/// key. Writes at most out_cap bytes to out and their count to *out_len.
/// Returns 0 or -1.
int vault_rsa_sha256_sign(const char *pem, size_t pem_len, const unsigned char *data, size_t data_len,
                          unsigned char *out, size_t out_cap, size_t *out_len);

/// Reads a PEM private key (never asking for a password): 1 for an RSA key,
/// 0 for another kind, with its size in bits in *bits; -1 when it cannot be read.
int vault_private_key_info(const char *pem, size_t pem_len, int *bits);

#endif
