#ifndef VAULT_CSQLITE_SHIM_H
#define VAULT_CSQLITE_SHIM_H
#include <sqlite3.h>

/* SQLITE_TRANSIENT is a macro casting -1 to a function pointer, which Swift
   cannot import: these wrappers bind a copy SQLite owns. */
static inline int vault_sqlite3_bind_blob_copy(sqlite3_stmt *s, int i, const void *p, int n) {
    return sqlite3_bind_blob(s, i, p, n, SQLITE_TRANSIENT);
}
static inline int vault_sqlite3_bind_text_copy(sqlite3_stmt *s, int i, const char *p, int n) {
    return sqlite3_bind_text(s, i, p, n, SQLITE_TRANSIENT);
}
/* sqlite3_config is variadic: typed wrappers for the options we use. */
static inline int vault_sqlite3_config_single_thread_off(void) {
    return sqlite3_config(SQLITE_CONFIG_MULTITHREAD);
}
#endif
