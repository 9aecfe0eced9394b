#ifndef VAULT_COPENSSL_H
#define VAULT_COPENSSL_H

#include <stddef.h>

/* OpenSSL's libcrypto, for the RSA, SHA-1 and P-256 signatures that
   libsodium does not offer (OAuth 1.0a, RFC 7523 assertions, DPoP's ES256). Like libcurl it is loaded with dlopen on first
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

/// Generates a P-256 key pair. Writes its private key as DER (SEC1
/// ECPrivateKey, at most out_cap bytes) to out and the length to *out_len.
/// Returns 0 or -1.
int vault_p256_generate(unsigned char *out, size_t out_cap, size_t *out_len);

/// The public point of the P-256 private key in der: x and y, 32 bytes each.
/// Returns 0 or -1.
int vault_p256_public(const unsigned char *der, size_t der_len, unsigned char x[32], unsigned char y[32]);

/// ECDSA P-256 with SHA-256 (JWS ES256) over data with the DER private key:
/// the signature as r || s, 32 bytes each. Returns 0 or -1.
int vault_p256_sign(const unsigned char *der, size_t der_len, const unsigned char *data, size_t data_len,
                    unsigned char out[64]);

#endif
