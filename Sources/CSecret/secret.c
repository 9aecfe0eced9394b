#include "CSecret.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

/* The few libsecret and GLib types used here, with their stable C layout. */
typedef struct {
    const char *name;
    int type; /* SECRET_SCHEMA_ATTRIBUTE_STRING = 0 */
} SchemaAttribute;

typedef struct {
    const char *name;
    int flags; /* SECRET_SCHEMA_NONE = 0 */
    SchemaAttribute attributes[32];
    int reserved;
    void *reserved1, *reserved2, *reserved3, *reserved4, *reserved5, *reserved6, *reserved7;
} Schema;

typedef struct {
    unsigned int domain;
    int code;
    char *message;
} GErrorLayout;

static const Schema schema = {
    "vault.Keyslot", 0, {{"vault-id", 0}, {"slot", 0}, {NULL, 0}}, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL};

static struct {
    int (*store)(const Schema *, const char *, const char *, const char *, void *, GErrorLayout **, ...);
    char *(*lookup)(const Schema *, void *, GErrorLayout **, ...);
    int (*clear)(const Schema *, void *, GErrorLayout **, ...);
    void (*password_free)(char *);
    void (*error_free)(GErrorLayout *);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_status = -1;
static char load_error[200] = "libsecret was not loaded";

#define RESOLVE(field, symbol)                                                      \
    do {                                                                            \
        *(void **)(&api.field) = dlsym(library, symbol);                            \
        if (!api.field) {                                                           \
            snprintf(load_error, sizeof load_error, "libsecret lacks %s", symbol);  \
            return;                                                                 \
        }                                                                           \
    } while (0)

static void load(void) {
    void *library = dlopen("libsecret-1.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        snprintf(load_error, sizeof load_error, "libsecret is not installed (libsecret-1-0)");
        return;
    }
    RESOLVE(store, "secret_password_store_sync");
    RESOLVE(lookup, "secret_password_lookup_sync");
    RESOLVE(clear, "secret_password_clear_sync");
    RESOLVE(password_free, "secret_password_free");
    RESOLVE(error_free, "g_error_free");
    load_status = 0;
}

int vault_secret_load(char *err, size_t errlen) {
    pthread_once(&once, load);
    if (load_status != 0) snprintf(err, errlen, "%s", load_error);
    return load_status;
}

static int failed(GErrorLayout *error, char *err, size_t errlen, const char *what) {
    snprintf(err, errlen, "%s: %s", what, error && error->message ? error->message : "unknown error");
    if (error) api.error_free(error);
    return -1;
}

int vault_secret_store(
    const char *vault_id, const char *slot, const char *label, const char *secret, char *err, size_t errlen) {
    if (vault_secret_load(err, errlen) != 0) return -1;
    GErrorLayout *error = NULL;
    int ok = api.store(&schema, "default", label, secret, NULL, &error, "vault-id", vault_id, "slot", slot, NULL);
    if (!ok || error) return failed(error, err, errlen, "the Secret Service did not store the key");
    return 0;
}

int vault_secret_lookup(const char *vault_id, const char *slot, char *out, size_t outlen, char *err, size_t errlen) {
    if (vault_secret_load(err, errlen) != 0) return -1;
    GErrorLayout *error = NULL;
    /* A NULL slot ends the attribute list early: any item of the vault. */
    char *secret = api.lookup(&schema, NULL, &error, "vault-id", vault_id, slot ? "slot" : NULL, slot, NULL);
    if (error) {
        if (secret) api.password_free(secret);
        return failed(error, err, errlen, "the Secret Service failed");
    }
    if (!secret) return 0;
    size_t n = strlen(secret);
    int rc;
    if (n == 0 || n > outlen) {
        snprintf(err, errlen, "the Secret Service item is not a vault key");
        rc = -1;
    } else {
        memcpy(out, secret, n);
        rc = (int)n;
    }
    api.password_free(secret); /* wipes it */
    return rc;
}

int vault_secret_clear(const char *vault_id, const char *slot, char *err, size_t errlen) {
    if (vault_secret_load(err, errlen) != 0) return -1;
    GErrorLayout *error = NULL;
    int removed = api.clear(&schema, NULL, &error, "vault-id", vault_id, slot ? "slot" : NULL, slot, NULL);
    if (error) return failed(error, err, errlen, "the Secret Service did not remove the key");
    return removed ? 1 : 0;
}
