/* Grows at about 400 MB/s from grow_site (1 MiB blocks, each touched) until the OOM killer ends
 * it; steady_site holds 16 MiB from the start. Exits 3 after 30 s if nothing killed it. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK (1 << 20)
#define RATE 400e6

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

__attribute__((noinline)) void *grow_site(void) {
    void *block = malloc(BLOCK);
    if (block)
        memset(block, 7, BLOCK);
    return block;
}

__attribute__((noinline)) void **steady_site(void) {
    void **blocks = malloc(16 * sizeof(void *));
    for (int i = 0; i < 16; i++) {
        blocks[i] = malloc(BLOCK);
        memset(blocks[i], 1, BLOCK);
    }
    return blocks;
}

int main(void) {
    void **steady = steady_site();
    size_t capacity = 1 << 16, held = 0;
    void **blocks = malloc(capacity * sizeof(void *));
    double start = now();
    while (now() - start < 30.0) {
        size_t due = (size_t)((now() - start) * RATE / BLOCK);
        while (held < due && held < capacity)
            blocks[held++] = grow_site();
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    /* Keeps both alive to the end. */
    return steady[0] && blocks[0] ? 3 : 4;
}
