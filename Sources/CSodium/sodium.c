/* Trampolines into libsodium, which is loaded with dlopen on first use.

   Each function below has libsodium's own name and prototype (the compiler
   checks them against <sodium.h>) and forwards to the library's
   definition. The definitions are hidden: the linker resolves vault's
   calls to them, and the loaded library never sees them, so its own
   internal calls stay inside it.

   When the library cannot be loaded, functions that can report failure do
   (-1, NULL); vault_sodium_load tells why. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Only libsodium's declarations are hidden: a hidden reference to a libc
   function would have to be defined inside vault. */
#define SODIUM_STATIC 1
#pragma GCC visibility push(hidden)
#include "CSodium.h"

#define SODIUM_FUNCTIONS(X)                                                                                            \
    X(sodium_init)                                                                                                     \
    X(sodium_memzero)                                                                                                  \
    X(sodium_memcmp)                                                                                                   \
    X(sodium_malloc)                                                                                                   \
    X(sodium_free)                                                                                                     \
    X(sodium_pad)                                                                                                      \
    X(sodium_unpad)                                                                                                    \
    X(sodium_base64_encoded_len)                                                                                       \
    X(sodium_bin2base64)                                                                                               \
    X(sodium_base642bin)                                                                                               \
    X(randombytes_buf)                                                                                                 \
    X(randombytes_uniform)                                                                                             \
    X(crypto_generichash)                                                                                              \
    X(crypto_generichash_blake2b_salt_personal)                                                                        \
    X(crypto_kdf_derive_from_key)                                                                                      \
    X(crypto_hash_sha256)                                                                                              \
    X(crypto_pwhash)                                                                                                   \
    X(crypto_aead_xchacha20poly1305_ietf_encrypt)                                                                      \
    X(crypto_aead_xchacha20poly1305_ietf_decrypt)                                                                      \
    X(crypto_sign_seed_keypair)                                                                                        \
    X(crypto_sign_detached)

static struct {
#define FIELD(name) __typeof__(name) *name;
    SODIUM_FUNCTIONS(FIELD)
#undef FIELD
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char load_error[256] = "libsodium was not loaded";

static void load(void) {
    void *library = dlopen("libsodium.so.23", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "cannot load libsodium.so.23 (%s)", why ? why : "unknown error");
        return;
    }
#define RESOLVE(name)                                                                                                  \
    *(void **)(&api.name) = dlsym(library, #name);                                                                     \
    if (!api.name) {                                                                                                   \
        snprintf(load_error, sizeof load_error, "libsodium.so.23 lacks %s", #name);                                    \
        return;                                                                                                        \
    }
    SODIUM_FUNCTIONS(RESOLVE)
#undef RESOLVE
    if (api.sodium_init() < 0) {
        snprintf(load_error, sizeof load_error, "libsodium could not initialize (no source of randomness)");
        return;
    }
    loaded = 1;
}

/* True once the library is loaded and initialized. */
static int ready(void) {
    pthread_once(&once, load);
    return loaded;
}

/* For functions that have no way to report failure: vault cannot go on
   without randomness. */
static void require(void) {
    if (!ready()) {
        fprintf(stderr, "vault: %s\n", load_error);
        abort();
    }
}

int vault_sodium_load(const char **error) {
    if (ready()) return 0;
    if (error) *error = load_error;
    return -1;
}

int sodium_init(void) { return ready() ? 0 : -1; }

void sodium_memzero(void *const pnt, const size_t len) {
    if (ready()) {
        api.sodium_memzero(pnt, len);
    } else {
        explicit_bzero(pnt, len);
    }
}

int sodium_memcmp(const void *const b1_, const void *const b2_, size_t len) {
    return ready() ? api.sodium_memcmp(b1_, b2_, len) : -1;
}

void *sodium_malloc(const size_t size) { return ready() ? api.sodium_malloc(size) : NULL; }

/* Only memory from sodium_malloc, which loaded the library, comes here. */
void sodium_free(void *ptr) {
    if (ptr && ready()) api.sodium_free(ptr);
}

int sodium_pad(size_t *padded_buflen_p, unsigned char *buf, size_t unpadded_buflen, size_t blocksize,
               size_t max_buflen) {
    return ready() ? api.sodium_pad(padded_buflen_p, buf, unpadded_buflen, blocksize, max_buflen) : -1;
}

int sodium_unpad(size_t *unpadded_buflen_p, const unsigned char *buf, size_t padded_buflen, size_t blocksize) {
    return ready() ? api.sodium_unpad(unpadded_buflen_p, buf, padded_buflen, blocksize) : -1;
}

size_t sodium_base64_encoded_len(const size_t bin_len, const int variant) {
    require();
    return api.sodium_base64_encoded_len(bin_len, variant);
}

char *sodium_bin2base64(char *const b64, const size_t b64_maxlen, const unsigned char *const bin,
                        const size_t bin_len, const int variant) {
    return ready() ? api.sodium_bin2base64(b64, b64_maxlen, bin, bin_len, variant) : NULL;
}

int sodium_base642bin(unsigned char *const bin, const size_t bin_maxlen, const char *const b64,
                      const size_t b64_len, const char *const ignore, size_t *const bin_len,
                      const char **const b64_end, const int variant) {
    return ready() ? api.sodium_base642bin(bin, bin_maxlen, b64, b64_len, ignore, bin_len, b64_end, variant) : -1;
}

void randombytes_buf(void *const buf, const size_t size) {
    require();
    api.randombytes_buf(buf, size);
}

uint32_t randombytes_uniform(const uint32_t upper_bound) {
    require();
    return api.randombytes_uniform(upper_bound);
}

int crypto_generichash(unsigned char *out, size_t outlen, const unsigned char *in, unsigned long long inlen,
                       const unsigned char *key, size_t keylen) {
    return ready() ? api.crypto_generichash(out, outlen, in, inlen, key, keylen) : -1;
}

int crypto_generichash_blake2b_salt_personal(unsigned char *out, size_t outlen, const unsigned char *in,
                                             unsigned long long inlen, const unsigned char *key, size_t keylen,
                                             const unsigned char *salt, const unsigned char *personal) {
    return ready() ? api.crypto_generichash_blake2b_salt_personal(out, outlen, in, inlen, key, keylen, salt, personal)
                   : -1;
}

int crypto_kdf_derive_from_key(unsigned char *subkey, size_t subkey_len, uint64_t subkey_id,
                               const char ctx[crypto_kdf_CONTEXTBYTES], const unsigned char key[crypto_kdf_KEYBYTES]) {
    return ready() ? api.crypto_kdf_derive_from_key(subkey, subkey_len, subkey_id, ctx, key) : -1;
}

int crypto_hash_sha256(unsigned char *out, const unsigned char *in, unsigned long long inlen) {
    return ready() ? api.crypto_hash_sha256(out, in, inlen) : -1;
}

int crypto_pwhash(unsigned char *const out, unsigned long long outlen, const char *const passwd,
                  unsigned long long passwdlen, const unsigned char *const salt, unsigned long long opslimit,
                  size_t memlimit, int alg) {
    return ready() ? api.crypto_pwhash(out, outlen, passwd, passwdlen, salt, opslimit, memlimit, alg) : -1;
}

int crypto_aead_xchacha20poly1305_ietf_encrypt(unsigned char *c, unsigned long long *clen_p, const unsigned char *m,
                                               unsigned long long mlen, const unsigned char *ad,
                                               unsigned long long adlen, const unsigned char *nsec,
                                               const unsigned char *npub, const unsigned char *k) {
    return ready() ? api.crypto_aead_xchacha20poly1305_ietf_encrypt(c, clen_p, m, mlen, ad, adlen, nsec, npub, k) : -1;
}

int crypto_aead_xchacha20poly1305_ietf_decrypt(unsigned char *m, unsigned long long *mlen_p, unsigned char *nsec,
                                               const unsigned char *c, unsigned long long clen,
                                               const unsigned char *ad, unsigned long long adlen,
                                               const unsigned char *npub, const unsigned char *k) {
    return ready() ? api.crypto_aead_xchacha20poly1305_ietf_decrypt(m, mlen_p, nsec, c, clen, ad, adlen, npub, k) : -1;
}

int crypto_sign_seed_keypair(unsigned char *pk, unsigned char *sk, const unsigned char *seed) {
    return ready() ? api.crypto_sign_seed_keypair(pk, sk, seed) : -1;
}

int crypto_sign_detached(unsigned char *sig, unsigned long long *siglen_p, const unsigned char *m,
                         unsigned long long mlen, const unsigned char *sk) {
    return ready() ? api.crypto_sign_detached(sig, siglen_p, m, mlen, sk) : -1;
}

#pragma GCC visibility pop
