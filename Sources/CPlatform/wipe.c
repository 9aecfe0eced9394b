// Zeroing freed heap memory, for the agent.
//
// Swift strings and arrays that carried a token (a decoded grant, a
// response being written) are freed, not wiped: their bytes stay in the
// heap until something reuses them. The agent serves tokens for hours, so
// after `vault lock` such leftovers would outlive the keys. With wiping on,
// every block freed through free() or moved by realloc() is zeroed first,
// so a token lives in the agent only as long as the request that used it.
// Off by default: other processes of vault end within a command.
#include "CPlatform.h"
#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>
#include <string.h>

// Sanitizer builds (the fuzz targets, `swift build --sanitize`) bring an
// allocator of their own; glibc's free must never see its blocks there.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define VAULT_NO_FREE_WIPE 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define VAULT_NO_FREE_WIPE 1
#endif

static atomic_int wipe_freed;

void vault_wipe_freed_memory(void) { atomic_store(&wipe_freed, 1); }

int vault_wiping_freed_memory(void) { return atomic_load(&wipe_freed); }

void vault_release_free_memory(void) { malloc_trim(0); }

#ifndef VAULT_NO_FREE_WIPE
extern void __libc_free(void *);
extern void *__libc_malloc(size_t);
extern void *__libc_realloc(void *, size_t);

void free(void *pointer) {
    if (pointer != NULL && atomic_load_explicit(&wipe_freed, memory_order_relaxed)) {
        explicit_bzero(pointer, malloc_usable_size(pointer));
    }
    __libc_free(pointer);
}

void *realloc(void *pointer, size_t size) {
    if (pointer == NULL || !atomic_load_explicit(&wipe_freed, memory_order_relaxed)) {
        return __libc_realloc(pointer, size);
    }
    if (size == 0) {
        free(pointer);
        return NULL;
    }
    // Always move, so the old block is wiped rather than shrunk in place
    // with its tail left behind.
    size_t old = malloc_usable_size(pointer);
    void *moved = __libc_malloc(size);
    if (moved == NULL) return NULL;
    memcpy(moved, pointer, old < size ? old : size);
    free(pointer);
    return moved;
}
#endif
