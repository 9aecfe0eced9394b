#ifndef VAULT_CCURL_H
#define VAULT_CCURL_H

/* libcurl's types and constants come from its header; its code is loaded
   with dlopen on the first request, so commands that never touch the
   network do not pay for loading libcurl and its dependencies (OpenSSL,
   LDAP, SSH, ...). curl_easy_setopt and curl_easy_getinfo are variadic,
   which Swift cannot call: these typed wrappers can. */
#include <curl/curl.h>

/// Loads libcurl once. Returns 0, or -1 with a static message in *error.
int vault_curl_load(const char **error);

CURL *vault_curl_easy_init(void);
void vault_curl_easy_cleanup(CURL *handle);
CURLcode vault_curl_perform(CURL *handle);
const char *vault_curl_strerror(CURLcode code);

CURLcode vault_curl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode vault_curl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode vault_curl_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode vault_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
CURLcode vault_curl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);

typedef size_t (*vault_curl_data_callback)(char *data, size_t size, size_t count, void *context);
CURLcode vault_curl_setopt_callback(CURL *handle, CURLoption option, vault_curl_data_callback callback);

CURLcode vault_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode vault_curl_getinfo_string(CURL *handle, CURLINFO info, const char **value);
CURLcode vault_curl_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value);

struct curl_slist *vault_curl_slist_append(struct curl_slist *list, const char *line);
void vault_curl_slist_free_all(struct curl_slist *list);

#endif
