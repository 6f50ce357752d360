/* Known live memory per function, for the preload tests (preload/tests/c_program.rs).
 *
 * `sites <dlopen-library>`: every site_* function allocates and keeps (or frees) blocks; at the end
 * the program prints one `truth <site> <bytes>` line per site, the bytes being the sum of
 * malloc_usable_size over the blocks it still holds (what the profile estimates), and exits with
 * them live so that dump_on_exit sees them. Sites run on the main thread, on a thread created
 * with pthread_create, and in a library loaded with dlopen after the first samples. A destructor
 * and a thread-specific-data destructor allocate after main returns / as the thread exits.
 *
 * `semantics`: checks the malloc family's C semantics (run it with every allocation sampled and
 * with none); exits 1 with a message naming the first failed check.
 *
 * Built without frame pointers (-O2 -fomit-frame-pointer): the unwinders must use .eh_frame. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_SMALL 200000
#define N_FREED 100000
#define N_CALLOC 3000
#define N_REALLOC 2000
#define N_ALIGNED 2000
#define N_THREAD 50000

static void *small_blocks[N_SMALL];
static void *calloc_blocks[N_CALLOC];
static void *realloc_blocks[N_REALLOC];
static void *aligned_blocks[2 * N_ALIGNED];
static void *thread_blocks[N_THREAD];
static void *huge_block;
static size_t truth_small, truth_calloc, truth_realloc, truth_aligned, truth_thread, truth_huge;

/* Transient allocations of 16-4096 bytes between the sites: they move the sampler, keep nothing. */
__attribute__((noinline)) static void churn(unsigned n, unsigned seed) {
    for (unsigned i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        char *p = malloc(16 + (seed >> 8) % 4081);
        if (!p) abort();
        p[0] = (char)i;
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
}

__attribute__((noinline)) void site_small(void) {
    for (int i = 0; i < N_SMALL; i++) {
        small_blocks[i] = malloc(24);
        if (!small_blocks[i]) abort();
        truth_small += malloc_usable_size(small_blocks[i]);
        if (i % 20000 == 0) churn(200, (unsigned)i);
    }
}

__attribute__((noinline)) void site_freed(void) {
    static void *blocks[N_FREED];
    for (int i = 0; i < N_FREED; i++) {
        blocks[i] = malloc(100);
        if (!blocks[i]) abort();
    }
    for (int i = 0; i < N_FREED; i++) free(blocks[i]);
}

__attribute__((noinline)) void site_calloc(void) {
    for (int i = 0; i < N_CALLOC; i++) {
        calloc_blocks[i] = calloc(4, 1024);
        if (!calloc_blocks[i]) abort();
        truth_calloc += malloc_usable_size(calloc_blocks[i]);
    }
}

__attribute__((noinline)) void site_realloc(void) {
    for (int i = 0; i < N_REALLOC; i++) {
        void *p = NULL;
        for (size_t size = 64; size <= 6400; size += 64) {
            p = realloc(p, size);
            if (!p) abort();
        }
        realloc_blocks[i] = p;
        truth_realloc += malloc_usable_size(p);
    }
}

__attribute__((noinline)) void site_aligned(void) {
    for (int i = 0; i < N_ALIGNED; i++) {
        if (posix_memalign(&aligned_blocks[2 * i], 64, 1000) != 0) abort();
        aligned_blocks[2 * i + 1] = aligned_alloc(256, 4096);
        if (!aligned_blocks[2 * i + 1]) abort();
        if ((uintptr_t)aligned_blocks[2 * i] % 64 || (uintptr_t)aligned_blocks[2 * i + 1] % 256) abort();
        truth_aligned += malloc_usable_size(aligned_blocks[2 * i]);
        truth_aligned += malloc_usable_size(aligned_blocks[2 * i + 1]);
    }
}

__attribute__((noinline)) void site_huge(void) {
    huge_block = malloc(8 << 20);
    if (!huge_block) abort();
    memset(huge_block, 1, 8 << 20);
    truth_huge = malloc_usable_size(huge_block);
}

static pthread_key_t exit_key;

/* Runs as the thread exits, after its thread-local storage began to be torn down. */
static void allocate_at_thread_exit(void *value) {
    void *p = malloc(4000);
    if (!p) abort();
    free(p);
    free(value);
}

__attribute__((noinline)) void site_thread(void) {
    for (int i = 0; i < N_THREAD; i++) {
        thread_blocks[i] = malloc(64);
        if (!thread_blocks[i]) abort();
        truth_thread += malloc_usable_size(thread_blocks[i]);
    }
}

static void *thread_main(void *arg) {
    (void)arg;
    pthread_setspecific(exit_key, malloc(10));
    site_thread();
    churn(2000, 7);
    return NULL;
}

__attribute__((destructor)) static void allocate_in_destructor(void) {
    void *p = malloc(100000);
    if (!p) abort();
    free(p);
}

static int fail(const char *what) {
    fprintf(stderr, "semantics: %s\n", what);
    return 1;
}

/* The malloc family's C semantics, on whichever path (sampled or not) the settings choose. */
static int semantics(void) {
    long page = sysconf(_SC_PAGESIZE);
    /* Volatile, so the compiler cannot see (and warn about) the overflowing requests below. */
    volatile size_t half = SIZE_MAX / 2, huge = SIZE_MAX - 4096;
    for (size_t size = 1; size <= (1u << 22); size = size * 3 + 1) {
        unsigned char *p = malloc(size);
        if (!p || malloc_usable_size(p) < size) return fail("malloc: usable size below the request");
        if ((uintptr_t)p % (size >= 16 ? 16 : 8)) return fail("malloc: misaligned");
        memset(p, 0xab, size);
        unsigned char *q = realloc(p, size * 2 + 5);
        if (!q) return fail("realloc: grow failed");
        for (size_t i = 0; i < size; i++)
            if (q[i] != 0xab) return fail("realloc: contents lost");
        q = realloc(q, size / 2 + 1);
        if (!q || q[0] != 0xab) return fail("realloc: shrink lost the contents");
        free(q);
        unsigned char *z = calloc(size, 3);
        if (!z) return fail("calloc failed");
        for (size_t i = 0; i < size * 3; i++)
            if (z[i]) return fail("calloc: not zeroed");
        free(z);
        void *a = NULL;
        if (posix_memalign(&a, 4096, size) != 0 || (uintptr_t)a % 4096) return fail("posix_memalign");
        free(a);
        a = aligned_alloc(128, size);
        if (!a || (uintptr_t)a % 128) return fail("aligned_alloc");
        free(a);
        a = memalign(32, size);
        if (!a || (uintptr_t)a % 32) return fail("memalign");
        free(a);
        a = valloc(size);
        if (!a || (uintptr_t)a % page) return fail("valloc");
        free(a);
        a = pvalloc(size);
        if (!a || (uintptr_t)a % page || malloc_usable_size(a) < (size + page - 1) / page * page)
            return fail("pvalloc");
        free(a);
        a = reallocarray(NULL, size, 2);
        if (!a || malloc_usable_size(a) < size * 2) return fail("reallocarray");
        free(a);
    }
    void *p = malloc(0);
    if (!p) return fail("malloc(0) returned NULL");
    free(p);
    free(NULL);
    if (malloc_usable_size(NULL) != 0) return fail("malloc_usable_size(NULL) is not 0");
    p = malloc(100);
    errno = 0;
    if (realloc(p, 0) != NULL) return fail("realloc(p, 0) did not return NULL");
    p = realloc(NULL, 100);
    if (!p) return fail("realloc(NULL, n) returned NULL");
    errno = 0;
    if (reallocarray(p, half, 3) != NULL || errno != ENOMEM) return fail("reallocarray overflow");
    free(p);
    errno = 0;
    if (calloc(half, 3) != NULL || errno != ENOMEM) return fail("calloc overflow: not NULL with ENOMEM");
    errno = 0;
    if (malloc(huge) != NULL || errno != ENOMEM) return fail("huge malloc: not NULL with ENOMEM");
    void *out = (void *)1;
    if (posix_memalign(&out, 24, 10) != EINVAL || out != (void *)1) return fail("posix_memalign: alignment 24 accepted");
    if (posix_memalign(&out, 4, 10) != EINVAL) return fail("posix_memalign: alignment below sizeof(void *) accepted");
    /* glibc before 2.38 serves alignments that are not powers of two; later ones refuse them. */
    errno = 0;
    p = aligned_alloc(24, 48);
    if (p ? (uintptr_t)p % 8 != 0 : errno != EINVAL) return fail("aligned_alloc: alignment 24");
    free(p);
    p = memalign(24, 100);
    if (!p || (uintptr_t)p % 32) return fail("memalign: alignment 24 not rounded up to 32");
    free(p);
    printf("semantics: ok\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "semantics") == 0) return semantics();
    if (argc < 3 || strcmp(argv[1], "sites") != 0) {
        fprintf(stderr, "usage: %s semantics | sites <libdlsite.so>\n", argv[0]);
        return 2;
    }
    if (pthread_key_create(&exit_key, allocate_at_thread_exit) != 0) abort();
    site_small();
    churn(5000, 1);
    site_freed();
    site_calloc();
    churn(5000, 2);
    site_realloc();
    site_aligned();
    site_huge();
    pthread_t thread;
    if (pthread_create(&thread, NULL, thread_main, NULL) != 0) abort();
    pthread_join(thread, NULL);

    void *library = dlopen(argv[2], RTLD_NOW);
    if (!library) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    size_t (*site_dlopened)(void) = (size_t (*)(void))dlsym(library, "site_dlopened");
    if (!site_dlopened) return 2;
    size_t truth_dlopened = site_dlopened();
    churn(5000, 3);

    printf("truth site_small %zu\n", truth_small);
    printf("truth site_freed 0\n");
    printf("truth site_calloc %zu\n", truth_calloc);
    printf("truth site_realloc %zu\n", truth_realloc);
    printf("truth site_aligned %zu\n", truth_aligned);
    printf("truth site_huge %zu\n", truth_huge);
    printf("truth site_thread %zu\n", truth_thread);
    printf("truth site_dlopened %zu\n", truth_dlopened);
    return 0;
}
