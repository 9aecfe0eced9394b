/* Small pieces of secure memory, carved out of a few locked regions.

   sodium_malloc gives every allocation pages of its own: an mmap, guard
   pages, mprotect, mlock, and the reverse on free, about ten system calls
   and a page fault or two per key, token or scratch buffer. A command
   makes dozens, a sync hundreds. Here each size class (64 bytes to 32 KiB)
   takes slots from regions of at least 16 KiB and eight slots, mapped
   once, with a guard page on each side, locked against swapping where the
   limit allows, and kept out of core dumps, as sodium_malloc's pages are.
   A slot is zeroed when it is let go and handed out zeroed again; regions
   are never unmapped, so a slot only ever holds secrets of this process.

   What is given up is a guard page between two slots: a write past the end
   of one lands in the next instead of faulting. Every length vault passes
   to C comes from the buffer's own count, and larger or unusual buffers
   still come from sodium_malloc. */
#include "CSodium.h"
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CLASSES 10
#define SMALLEST 64
/* At most 1024 regions; beyond, sodium_malloc. */
#define MAX_REGIONS 1024

struct region {
    unsigned char *start;
    size_t length;
};

struct slot {
    struct slot *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *free_slots[CLASSES];
static struct region regions[MAX_REGIONS];
static int region_count;

static int class_of(size_t size) {
    size_t bytes = SMALLEST;
    for (int c = 0; c < CLASSES; c++, bytes *= 2)
        if (size <= bytes) return c;
    return -1;
}

/* Maps a region for class c and threads its slots onto the free list. */
static int grow(int c) {
    long page = sysconf(_SC_PAGESIZE);
    size_t size = (size_t)SMALLEST << c;
    size_t length = size * 8 > 16384 ? size * 8 : 16384;
    if (page <= 0 || length % (size_t)page != 0 || region_count == MAX_REGIONS) return -1;
    size_t total = length + 2 * (size_t)page;
    unsigned char *base = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return -1;
    unsigned char *usable = base + page;
    if (mprotect(usable, length, PROT_READ | PROT_WRITE) != 0) {
        munmap(base, total);
        return -1;
    }
    /* As sodium_malloc: locking may fail under a low RLIMIT_MEMLOCK, and
       the memory is still used; core dumps never include it. */
    (void)mlock(usable, length);
#ifdef MADV_DONTDUMP
    (void)madvise(usable, length, MADV_DONTDUMP);
#endif
    regions[region_count++] = (struct region){usable, length};
    for (size_t offset = length; offset >= size; offset -= size) {
        struct slot *s = (struct slot *)(usable + offset - size);
        s->next = free_slots[c];
        free_slots[c] = s;
    }
    return 0;
}

void *vault_secure_pool_alloc(size_t size) {
    int c = class_of(size == 0 ? 1 : size);
    if (c < 0) return NULL;
    pthread_mutex_lock(&lock);
    if (!free_slots[c] && grow(c) != 0) {
        pthread_mutex_unlock(&lock);
        return NULL;
    }
    struct slot *s = free_slots[c];
    free_slots[c] = s->next;
    pthread_mutex_unlock(&lock);
    s->next = NULL;
    return s;
}

static int owned(const unsigned char *p) {
    for (int i = 0; i < region_count; i++)
        if (p >= regions[i].start && p < regions[i].start + regions[i].length) return 1;
    return 0;
}

int vault_secure_pool_free(void *pointer, size_t size) {
    int c = class_of(size == 0 ? 1 : size);
    if (!pointer || c < 0) return -1;
    pthread_mutex_lock(&lock);
    if (!owned(pointer)) {
        pthread_mutex_unlock(&lock);
        return -1;
    }
    /* The whole slot: what was written past `size` within it too. */
    explicit_bzero(pointer, (size_t)SMALLEST << c);
    struct slot *s = pointer;
    s->next = free_slots[c];
    free_slots[c] = s;
    pthread_mutex_unlock(&lock);
    return 0;
}
