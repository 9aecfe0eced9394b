#include "CCurl.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

static struct {
    CURLcode (*global_init)(long);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
    CURLcode (*easy_perform)(CURL *);
    CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
    const char *(*easy_strerror)(CURLcode);
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int load_status = -1;
static char load_error[256] = "libcurl was not loaded";

#define RESOLVE(field, symbol)                                                         \
    do {                                                                               \
        *(void **)(&api.field) = dlsym(library, symbol);                               \
        if (!api.field) {                                                              \
            snprintf(load_error, sizeof load_error, "libcurl lacks %s", symbol);       \
            return;                                                                    \
        }                                                                              \
    } while (0)

static void load(void) {
    void *library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "cannot load libcurl.so.4 (%s)", why ? why : "unknown error");
        return;
    }
    RESOLVE(global_init, "curl_global_init");
    RESOLVE(easy_init, "curl_easy_init");
    RESOLVE(easy_cleanup, "curl_easy_cleanup");
    RESOLVE(easy_setopt, "curl_easy_setopt");
    RESOLVE(easy_perform, "curl_easy_perform");
    RESOLVE(easy_getinfo, "curl_easy_getinfo");
    RESOLVE(easy_strerror, "curl_easy_strerror");
    RESOLVE(slist_append, "curl_slist_append");
    RESOLVE(slist_free_all, "curl_slist_free_all");
    if (api.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(load_error, sizeof load_error, "libcurl failed to initialize");
        return;
    }
    load_status = 0;
}

int vault_curl_load(const char **error) {
    pthread_once(&once, load);
    if (load_status != 0 && error) *error = load_error;
    return load_status;
}

CURL *vault_curl_easy_init(void) { return api.easy_init(); }
void vault_curl_easy_cleanup(CURL *handle) { api.easy_cleanup(handle); }
CURLcode vault_curl_perform(CURL *handle) { return api.easy_perform(handle); }
const char *vault_curl_strerror(CURLcode code) { return api.easy_strerror(code); }

CURLcode vault_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return api.easy_setopt(handle, option, value);
}
CURLcode vault_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return api.easy_setopt(handle, option, value);
}
CURLcode vault_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return api.easy_setopt(handle, option, value);
}
CURLcode vault_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return api.easy_setopt(handle, option, value);
}
CURLcode vault_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return api.easy_setopt(handle, option, value);
}
CURLcode vault_curl_setopt_callback(CURL *handle, CURLoption option, vault_curl_data_callback callback) {
    return api.easy_setopt(handle, option, callback);
}
CURLcode vault_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return api.easy_getinfo(handle, info, value);
}
CURLcode vault_curl_getinfo_string(CURL *handle, CURLINFO info, const char **value) {
    return api.easy_getinfo(handle, info, value);
}
CURLcode vault_curl_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return api.easy_getinfo(handle, info, value);
}
struct curl_slist *vault_curl_slist_append(struct curl_slist *list, const char *line) {
    return api.slist_append(list, line);
}
void vault_curl_slist_free_all(struct curl_slist *list) { api.slist_free_all(list); }
