#include "COpenSSL.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* Opaque OpenSSL types: only pointers cross this file. */
typedef struct evp_md_st EVP_MD;
typedef struct evp_md_ctx_st EVP_MD_CTX;
typedef struct evp_pkey_st EVP_PKEY;
typedef struct bio_st BIO;
typedef struct engine_st ENGINE;
typedef struct evp_pkey_ctx_st EVP_PKEY_CTX;
typedef struct ossl_lib_ctx_st OSSL_LIB_CTX;
typedef struct ECDSA_SIG_st ECDSA_SIG;
typedef struct bignum_st BIGNUM;

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
    EVP_PKEY_CTX *(*pkey_ctx_new_from_name)(OSSL_LIB_CTX *, const char *, const char *);
    void (*pkey_ctx_free)(EVP_PKEY_CTX *);
    int (*pkey_keygen_init)(EVP_PKEY_CTX *);
    int (*pkey_ctx_set_group_name)(EVP_PKEY_CTX *, const char *);
    int (*pkey_generate)(EVP_PKEY_CTX *, EVP_PKEY **);
    int (*i2d_private_key)(const EVP_PKEY *, unsigned char **);
    EVP_PKEY *(*d2i_private_key)(int, EVP_PKEY **, const unsigned char **, long);
    int (*pkey_get_octet_string_param)(const EVP_PKEY *, const char *, unsigned char *, size_t, size_t *);
    int (*pkey_get_utf8_string_param)(const EVP_PKEY *, const char *, char *, size_t, size_t *);
    ECDSA_SIG *(*d2i_ecdsa_sig)(ECDSA_SIG **, const unsigned char **, long);
    void (*ecdsa_sig_get0)(const ECDSA_SIG *, const BIGNUM **, const BIGNUM **);
    void (*ecdsa_sig_free)(ECDSA_SIG *);
    int (*bn_bn2binpad)(const BIGNUM *, unsigned char *, int);
    void (*crypto_free)(void *, const char *, int);
    void (*cleanse)(void *, size_t);
} api;

/* EVP_PKEY_RSA in OpenSSL's headers. */
#define VAULT_EVP_PKEY_RSA 6
/* EVP_PKEY_EC in OpenSSL's headers. */
#define VAULT_EVP_PKEY_EC 408

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
    RESOLVE(pkey_ctx_new_from_name, "EVP_PKEY_CTX_new_from_name");
    RESOLVE(pkey_ctx_free, "EVP_PKEY_CTX_free");
    RESOLVE(pkey_keygen_init, "EVP_PKEY_keygen_init");
    RESOLVE(pkey_ctx_set_group_name, "EVP_PKEY_CTX_set_group_name");
    RESOLVE(pkey_generate, "EVP_PKEY_generate");
    RESOLVE(i2d_private_key, "i2d_PrivateKey");
    RESOLVE(d2i_private_key, "d2i_PrivateKey");
    RESOLVE(pkey_get_octet_string_param, "EVP_PKEY_get_octet_string_param");
    RESOLVE(pkey_get_utf8_string_param, "EVP_PKEY_get_utf8_string_param");
    RESOLVE(d2i_ecdsa_sig, "d2i_ECDSA_SIG");
    RESOLVE(ecdsa_sig_get0, "ECDSA_SIG_get0");
    RESOLVE(ecdsa_sig_free, "ECDSA_SIG_free");
    RESOLVE(bn_bn2binpad, "BN_bn2binpad");
    RESOLVE(crypto_free, "CRYPTO_free");
    RESOLVE(cleanse, "OPENSSL_cleanse");
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

int vault_p256_generate(unsigned char *out, size_t out_cap, size_t *out_len) {
    if (vault_openssl_load(NULL) != 0) return -1;
    int rc = -1;
    EVP_PKEY *key = NULL;
    unsigned char *der = NULL;
    EVP_PKEY_CTX *ctx = api.pkey_ctx_new_from_name(NULL, "EC", NULL);
    if (ctx && api.pkey_keygen_init(ctx) == 1 && api.pkey_ctx_set_group_name(ctx, "P-256") == 1 &&
        api.pkey_generate(ctx, &key) == 1) {
        int len = api.i2d_private_key(key, &der);
        if (len > 0 && (size_t)len <= out_cap) {
            for (int i = 0; i < len; i++) out[i] = der[i];
            *out_len = (size_t)len;
            rc = 0;
        }
        if (der) {
            if (len > 0) api.cleanse(der, (size_t)len);
            api.crypto_free(der, __FILE__, __LINE__);
        }
    }
    if (key) api.pkey_free(key);
    if (ctx) api.pkey_ctx_free(ctx);
    return rc;
}

/* The P-256 key in der, or NULL when it is not one. */
/* A P-256 key from the whole of a DER ECPrivateKey: another curve of the
   same size (secp256k1, brainpoolP256r1) or bytes after the key are
   refused, never signed with under a jwk that says P-256. */
static EVP_PKEY *read_p256(const unsigned char *der, size_t der_len) {
    if (der_len > 0x7fffffff) return NULL;
    const unsigned char *p = der;
    EVP_PKEY *key = api.d2i_private_key(VAULT_EVP_PKEY_EC, NULL, &p, (long)der_len);
    if (!key) return NULL;
    char group[32];
    size_t group_len = 0;
    if (p != der + der_len || api.pkey_bits(key) != 256 ||
        api.pkey_get_utf8_string_param(key, "group", group, sizeof group, &group_len) != 1 ||
        strcmp(group, "prime256v1") != 0) {
        api.pkey_free(key);
        return NULL;
    }
    return key;
}

int vault_p256_public(const unsigned char *der, size_t der_len, unsigned char x[32], unsigned char y[32]) {
    if (vault_openssl_load(NULL) != 0) return -1;
    EVP_PKEY *key = read_p256(der, der_len);
    if (!key) return -1;
    unsigned char point[65];
    size_t len = 0;
    int rc = -1;
    if (api.pkey_get_octet_string_param(key, "encoded-pub-key", point, sizeof point, &len) == 1 && len == 65 &&
        point[0] == 0x04) {
        for (int i = 0; i < 32; i++) {
            x[i] = point[1 + i];
            y[i] = point[33 + i];
        }
        rc = 0;
    }
    api.pkey_free(key);
    return rc;
}

int vault_p256_sign(const unsigned char *der, size_t der_len, const unsigned char *data, size_t data_len,
                    unsigned char out[64]) {
    if (vault_openssl_load(NULL) != 0) return -1;
    EVP_PKEY *key = read_p256(der, der_len);
    if (!key) return -1;
    int rc = -1;
    unsigned char signature[80];
    size_t len = sizeof signature;
    EVP_MD_CTX *ctx = api.md_ctx_new();
    if (ctx && api.digest_sign_init(ctx, NULL, api.sha256(), NULL, key) == 1 &&
        api.digest_sign(ctx, signature, &len, data, data_len) == 1) {
        const unsigned char *p = signature;
        ECDSA_SIG *sig = api.d2i_ecdsa_sig(NULL, &p, (long)len);
        if (sig) {
            const BIGNUM *r = NULL, *s = NULL;
            api.ecdsa_sig_get0(sig, &r, &s);
            if (r && s && api.bn_bn2binpad(r, out, 32) == 32 && api.bn_bn2binpad(s, out + 32, 32) == 32) rc = 0;
            api.ecdsa_sig_free(sig);
        }
    }
    if (ctx) api.md_ctx_free(ctx);
    api.pkey_free(key);
    return rc;
}
