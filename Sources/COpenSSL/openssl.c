#include "COpenSSL.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

/* Opaque OpenSSL types: only pointers cross this file. */
typedef struct evp_md_st EVP_MD;
typedef struct evp_md_ctx_st EVP_MD_CTX;
typedef struct evp_pkey_st EVP_PKEY;
typedef struct bio_st BIO;
typedef struct engine_st ENGINE;

static struct {
    const EVP_MD *(*sha1)(void);
    const EVP_MD *(*sha256)(void);
    unsigned char *(*hmac)(const EVP_MD *, const void *, int, const unsigned char *, size_t, unsigned char *,
                           unsigned int *);
    BIO *(*bio_new_mem_buf)(const void *, int);
    void (*bio_free_all)(BIO *);
    EVP_PKEY *(*pem_read_bio_private_key)(BIO *, EVP_PKEY **, void *, void *);
    void (*pkey_free)(EVP_PKEY *);
    EVP_MD_CTX *(*md_ctx_new)(void);
    void (*md_ctx_free)(EVP_MD_CTX *);
    int (*digest_sign_init)(EVP_MD_CTX *, void **, const EVP_MD *, ENGINE *, EVP_PKEY *);
    int (*digest_sign)(EVP_MD_CTX *, unsigned char *, size_t *, const unsigned char *, size_t);
    int (*pkey_base_id)(const EVP_PKEY *);
    int (*pkey_bits)(const EVP_PKEY *);
} api;

/* EVP_PKEY_RSA in OpenSSL's headers. */
#define VAULT_EVP_PKEY_RSA 6

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_status = -1;
static char load_error[256] = "libcrypto was not loaded";

#define RESOLVE(field, symbol)                                                   \
    do {                                                                         \
        *(void **)(&api.field) = dlsym(library, symbol);                         \
        if (!api.field) {                                                        \
            snprintf(load_error, sizeof load_error, "libcrypto lacks %s", symbol); \
            return;                                                              \
        }                                                                        \
    } while (0)

static void load(void) {
    void *library = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "cannot load libcrypto.so.3 (%s)", why ? why : "unknown error");
        return;
    }
    RESOLVE(sha1, "EVP_sha1");
    RESOLVE(sha256, "EVP_sha256");
    RESOLVE(hmac, "HMAC");
    RESOLVE(bio_new_mem_buf, "BIO_new_mem_buf");
    RESOLVE(bio_free_all, "BIO_free_all");
    RESOLVE(pem_read_bio_private_key, "PEM_read_bio_PrivateKey");
    RESOLVE(pkey_free, "EVP_PKEY_free");
    RESOLVE(md_ctx_new, "EVP_MD_CTX_new");
    RESOLVE(md_ctx_free, "EVP_MD_CTX_free");
    RESOLVE(digest_sign_init, "EVP_DigestSignInit");
    RESOLVE(digest_sign, "EVP_DigestSign");
    RESOLVE(pkey_base_id, "EVP_PKEY_get_base_id");
    RESOLVE(pkey_bits, "EVP_PKEY_get_bits");
    load_status = 0;
}

int vault_openssl_load(const char **error) {
    pthread_once(&once, load);
    if (load_status != 0 && error) *error = load_error;
    return load_status;
}

int vault_hmac_sha1(const unsigned char *key, size_t key_len, const unsigned char *data, size_t data_len,
                    unsigned char out[20]) {
    if (vault_openssl_load(NULL) != 0 || key_len > 0x7fffffff) return -1;
    unsigned int len = 0;
    if (!api.hmac(api.sha1(), key, (int)key_len, data, data_len, out, &len) || len != 20) return -1;
    return 0;
}

/* A password callback that gives none: an encrypted key fails to load
   instead of OpenSSL's default callback asking on the terminal. */
static int no_password(char *buf, int size, int rwflag, void *u) {
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return 0;
}

static EVP_PKEY *read_key(const char *pem, size_t pem_len, BIO **bio) {
    *bio = api.bio_new_mem_buf(pem, (int)pem_len);
    return *bio ? api.pem_read_bio_private_key(*bio, NULL, (void *)no_password, NULL) : NULL;
}

static int rsa_sign(const EVP_MD *md, const char *pem, size_t pem_len, const unsigned char *data, size_t data_len,
                    unsigned char *out, size_t out_cap, size_t *out_len) {
    int rc = -1;
    BIO *bio = NULL;
    EVP_PKEY *key = read_key(pem, pem_len, &bio);
    EVP_MD_CTX *ctx = key && api.pkey_base_id(key) == VAULT_EVP_PKEY_RSA ? api.md_ctx_new() : NULL;
    size_t len = out_cap;
    if (ctx && api.digest_sign_init(ctx, NULL, md, NULL, key) == 1 &&
        api.digest_sign(ctx, out, &len, data, data_len) == 1) {
        *out_len = len;
        rc = 0;
    }
    if (ctx) api.md_ctx_free(ctx);
    if (key) api.pkey_free(key);
    if (bio) api.bio_free_all(bio);
    return rc;
}

int vault_rsa_sha1_sign(const char *pem, size_t pem_len, const unsigned char *data, size_t data_len,
                        unsigned char *out, size_t out_cap, size_t *out_len) {
    if (vault_openssl_load(NULL) != 0 || pem_len > 0x7fffffff) return -1;
    return rsa_sign(api.sha1(), pem, pem_len, data, data_len, out, out_cap, out_len);
}

int vault_rsa_sha256_sign(const char *pem, size_t pem_len, const unsigned char *data, size_t data_len,
                          unsigned char *out, size_t out_cap, size_t *out_len) {
    if (vault_openssl_load(NULL) != 0 || pem_len > 0x7fffffff) return -1;
    return rsa_sign(api.sha256(), pem, pem_len, data, data_len, out, out_cap, out_len);
}

int vault_private_key_info(const char *pem, size_t pem_len, int *bits) {
    if (vault_openssl_load(NULL) != 0 || pem_len > 0x7fffffff) return -1;
    BIO *bio = NULL;
    EVP_PKEY *key = read_key(pem, pem_len, &bio);
    int rc = -1;
    if (key) {
        rc = api.pkey_base_id(key) == VAULT_EVP_PKEY_RSA ? 1 : 0;
        *bits = api.pkey_bits(key);
    }
    if (key) api.pkey_free(key);
    if (bio) api.bio_free_all(bio);
    return rc;
}
