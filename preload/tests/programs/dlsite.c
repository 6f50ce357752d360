/* A library sites.c loads with dlopen after the profiler's first samples: its frames must be
 * unwound and named like the program's. */
#include <malloc.h>
#include <stdlib.h>

#define N_DLOPENED 20000
static void *blocks[N_DLOPENED];

/* Allocates 20,000 blocks of 128 bytes and keeps them; returns their usable bytes. */
__attribute__((noinline)) size_t site_dlopened(void) {
    size_t usable = 0;
    for (int i = 0; i < N_DLOPENED; i++) {
        blocks[i] = malloc(128);
        if (!blocks[i]) abort();
        usable += malloc_usable_size(blocks[i]);
    }
    return usable;
}
