#ifndef VAULT_CSQLITE_H
#define VAULT_CSQLITE_H

/* SQLite's API, loaded with dlopen on first use (see sqlite.c): a process
   that never opens the vault file never maps libsqlite3. */
#include <sqlite3.h>

/// Loads libsqlite3 once. Returns 0, or -1 with a static message in *error.
int vault_sqlite_load(const char **error);

/* SQLITE_TRANSIENT is a macro casting -1 to a function pointer, which Swift
   cannot import: these bind a copy that SQLite owns. */
int vault_sqlite3_bind_blob_copy(sqlite3_stmt *statement, int index, const void *bytes, int count);
int vault_sqlite3_bind_text_copy(sqlite3_stmt *statement, int index, const char *text, int count);

#endif
