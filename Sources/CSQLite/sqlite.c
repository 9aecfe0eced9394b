/* Trampolines into libsqlite3, which is loaded with dlopen on first use.

   Each function has SQLite's own name and prototype (checked against
   <sqlite3.h>) and forwards to the library. The definitions are hidden, so
   the loaded library never sees them. Only sqlite3_open_v2 can be reached
   before the library is loaded (every other call needs a connection or a
   statement it made), so it alone checks; the rest forward directly. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

/* Only SQLite's declarations are hidden: a hidden reference to a libc
   function would have to be defined inside vault. */
#pragma GCC visibility push(hidden)
#include "CSQLite.h"

#define SQLITE_FUNCTIONS(X)                                                                                            \
    X(sqlite3_open_v2)                                                                                                 \
    X(sqlite3_close_v2)                                                                                                \
    X(sqlite3_busy_timeout)                                                                                            \
    X(sqlite3_extended_result_codes)                                                                                   \
    X(sqlite3_exec)                                                                                                    \
    X(sqlite3_free)                                                                                                    \
    X(sqlite3_errmsg)                                                                                                  \
    X(sqlite3_errstr)                                                                                                  \
    X(sqlite3_system_errno)                                                                                            \
    X(sqlite3_prepare_v2)                                                                                              \
    X(sqlite3_step)                                                                                                    \
    X(sqlite3_reset)                                                                                                   \
    X(sqlite3_clear_bindings)                                                                                          \
    X(sqlite3_finalize)                                                                                                \
    X(sqlite3_bind_blob)                                                                                               \
    X(sqlite3_bind_text)                                                                                               \
    X(sqlite3_bind_int64)                                                                                              \
    X(sqlite3_bind_null)                                                                                               \
    X(sqlite3_column_type)                                                                                             \
    X(sqlite3_column_blob)                                                                                             \
    X(sqlite3_column_text)                                                                                             \
    X(sqlite3_column_bytes)                                                                                            \
    X(sqlite3_column_int64)                                                                                            \
    X(sqlite3_changes)                                                                                                 \
    X(sqlite3_total_changes)                                                                                           \
    X(sqlite3_last_insert_rowid)                                                                                       \
    X(sqlite3_get_autocommit)                                                                                          \
    X(sqlite3_stmt_status)

static struct {
#define FIELD(name) __typeof__(name) *name;
    SQLITE_FUNCTIONS(FIELD)
#undef FIELD
} api;

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int loaded;
static char load_error[256] = "libsqlite3 was not loaded";

static void load(void) {
    void *library = dlopen("libsqlite3.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        const char *why = dlerror();
        snprintf(load_error, sizeof load_error, "cannot load libsqlite3.so.0 (%s)", why ? why : "unknown error");
        return;
    }
#define RESOLVE(name)                                                                                                  \
    *(void **)(&api.name) = dlsym(library, #name);                                                                     \
    if (!api.name) {                                                                                                   \
        snprintf(load_error, sizeof load_error, "libsqlite3.so.0 lacks %s", #name);                                    \
        return;                                                                                                        \
    }
    SQLITE_FUNCTIONS(RESOLVE)
#undef RESOLVE
    loaded = 1;
}

static int ready(void) {
    pthread_once(&once, load);
    return loaded;
}

int vault_sqlite_load(const char **error) {
    if (ready()) return 0;
    if (error) *error = load_error;
    return -1;
}

int sqlite3_open_v2(const char *filename, sqlite3 **ppDb, int flags, const char *zVfs) {
    if (!ready()) {
        if (ppDb) *ppDb = NULL;
        return SQLITE_CANTOPEN;
    }
    return api.sqlite3_open_v2(filename, ppDb, flags, zVfs);
}

int sqlite3_close_v2(sqlite3 *db) { return db ? api.sqlite3_close_v2(db) : SQLITE_OK; }
int sqlite3_busy_timeout(sqlite3 *db, int ms) { return api.sqlite3_busy_timeout(db, ms); }
int sqlite3_extended_result_codes(sqlite3 *db, int onoff) { return api.sqlite3_extended_result_codes(db, onoff); }

int sqlite3_exec(sqlite3 *db, const char *sql, int (*callback)(void *, int, char **, char **), void *arg,
                 char **errmsg) {
    return api.sqlite3_exec(db, sql, callback, arg, errmsg);
}

void sqlite3_free(void *p) {
    if (p) api.sqlite3_free(p);
}

const char *sqlite3_errmsg(sqlite3 *db) { return api.sqlite3_errmsg(db); }
const char *sqlite3_errstr(int rc) { return ready() ? api.sqlite3_errstr(rc) : load_error; }
int sqlite3_system_errno(sqlite3 *db) { return api.sqlite3_system_errno(db); }

int sqlite3_prepare_v2(sqlite3 *db, const char *zSql, int nByte, sqlite3_stmt **ppStmt, const char **pzTail) {
    return api.sqlite3_prepare_v2(db, zSql, nByte, ppStmt, pzTail);
}

int sqlite3_step(sqlite3_stmt *statement) { return api.sqlite3_step(statement); }
int sqlite3_reset(sqlite3_stmt *statement) { return api.sqlite3_reset(statement); }
int sqlite3_clear_bindings(sqlite3_stmt *statement) { return api.sqlite3_clear_bindings(statement); }
int sqlite3_finalize(sqlite3_stmt *statement) { return statement ? api.sqlite3_finalize(statement) : SQLITE_OK; }

int sqlite3_bind_blob(sqlite3_stmt *statement, int index, const void *bytes, int count, void (*destructor)(void *)) {
    return api.sqlite3_bind_blob(statement, index, bytes, count, destructor);
}
int sqlite3_bind_text(sqlite3_stmt *statement, int index, const char *text, int count, void (*destructor)(void *)) {
    return api.sqlite3_bind_text(statement, index, text, count, destructor);
}
int sqlite3_bind_int64(sqlite3_stmt *statement, int index, sqlite3_int64 value) {
    return api.sqlite3_bind_int64(statement, index, value);
}
int sqlite3_bind_null(sqlite3_stmt *statement, int index) { return api.sqlite3_bind_null(statement, index); }

int vault_sqlite3_bind_blob_copy(sqlite3_stmt *statement, int index, const void *bytes, int count) {
    return api.sqlite3_bind_blob(statement, index, bytes, count, SQLITE_TRANSIENT);
}
int vault_sqlite3_bind_text_copy(sqlite3_stmt *statement, int index, const char *text, int count) {
    return api.sqlite3_bind_text(statement, index, text, count, SQLITE_TRANSIENT);
}

int sqlite3_column_type(sqlite3_stmt *statement, int column) { return api.sqlite3_column_type(statement, column); }
const void *sqlite3_column_blob(sqlite3_stmt *statement, int column) {
    return api.sqlite3_column_blob(statement, column);
}
const unsigned char *sqlite3_column_text(sqlite3_stmt *statement, int column) {
    return api.sqlite3_column_text(statement, column);
}
int sqlite3_column_bytes(sqlite3_stmt *statement, int column) { return api.sqlite3_column_bytes(statement, column); }
sqlite3_int64 sqlite3_column_int64(sqlite3_stmt *statement, int column) {
    return api.sqlite3_column_int64(statement, column);
}
int sqlite3_changes(sqlite3 *db) { return api.sqlite3_changes(db); }
int sqlite3_total_changes(sqlite3 *db) { return api.sqlite3_total_changes(db); }
sqlite3_int64 sqlite3_last_insert_rowid(sqlite3 *db) { return api.sqlite3_last_insert_rowid(db); }
int sqlite3_get_autocommit(sqlite3 *db) { return api.sqlite3_get_autocommit(db); }
int sqlite3_stmt_status(sqlite3_stmt *statement, int op, int reset) {
    return api.sqlite3_stmt_status(statement, op, reset);
}

#pragma GCC visibility pop
