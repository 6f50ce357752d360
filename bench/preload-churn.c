/* An alloc/free/realloc churn through the C malloc family, for measuring what a preloaded allocator
 * adds per call (bench/preload-churn.sh runs it under callgrind).
 *
 *   preload-churn plain  STEPS   malloc, realloc and free only
 *   preload-churn usable STEPS   the same, with malloc_usable_size on each block after it is
 *                                allocated or resized and before it is freed or resized, as a server
 *                                that keeps its own memory counters does (redis's zmalloc)
 *
 * Each step picks one of 4,096 slots: an empty slot gets malloc(16..4,096 bytes); a full one is
 * reallocated to a new such size one time in four, freed otherwise. The sizes and slots come from a
 * fixed generator, so every run makes the same calls. Prints the bytes the counters saw. */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS 4096

static void *blocks[SLOTS];

static uint64_t next(uint64_t *state) {
    *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
    return *state >> 16;
}

__attribute__((noinline)) static size_t churn(unsigned long steps, int usable) {
    uint64_t state = 42;
    size_t counted = 0;
    for (unsigned long i = 0; i < steps; i++) {
        uint64_t r = next(&state);
        unsigned slot = r % SLOTS;
        size_t size = 16 + (r >> 12) % 4081;
        void *p = blocks[slot];
        if (!p) {
            p = malloc(size);
            if (!p) abort();
            if (usable) counted += malloc_usable_size(p);
            blocks[slot] = p;
        } else if (((r >> 24) & 3) == 0) {
            if (usable) counted -= malloc_usable_size(p);
            p = realloc(p, size);
            if (!p) abort();
            if (usable) counted += malloc_usable_size(p);
            blocks[slot] = p;
        } else {
            if (usable) counted -= malloc_usable_size(p);
            free(p);
            blocks[slot] = NULL;
        }
    }
    return counted;
}

int main(int argc, char **argv) {
    if (argc != 3 || (strcmp(argv[1], "plain") != 0 && strcmp(argv[1], "usable") != 0)) {
        fprintf(stderr, "usage: preload-churn plain|usable STEPS\n");
        return 2;
    }
    int usable = strcmp(argv[1], "usable") == 0;
    unsigned long steps = strtoul(argv[2], NULL, 10);
    printf("%zu\n", churn(steps, usable));
    return 0;
}
