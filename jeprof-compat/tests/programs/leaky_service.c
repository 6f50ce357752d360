/* A service with one steady leak among memory that comes and goes, for `leaks` on the interval
 * dumps Debian's libjemalloc writes of it (jeprof-compat/tests/jemalloc_series.rs).
 *
 * Each of STEPS steps: `leak_session` keeps 64 blocks of 64 KiB (4 MiB) it never frees; the
 * decoys are `cache_fill` (a cache that fills over four steps, 2 MiB a step, then empties),
 * `warmup_store` (32 MiB kept from the first two steps on, never more), `burst_parse` (24 MiB
 * held from step 8 to step 10, then freed) and `churn` (8 MiB a step, freed at once), which with
 * the rest drives jemalloc's interval dumps (`lg_prof_interval`). At the end everything is freed,
 * as a well-behaved server does at shutdown, so the exit dump (`prof_final`) holds next to
 * nothing. Every function is `noinline`, so each is a frame of its own. */
#include <stdlib.h>
#include <string.h>

#define STEPS 24
#define BLOCK (64 << 10)

static void *leaked[STEPS * 64];
static int leaked_count;
static void *cache[4 * 32];
static int cache_count;
static void *store[512];
static int store_count;
static void *burst[384];
static int burst_count;

/* Touches a block so that the allocation cannot be optimised away. */
static void *touched(void *p) {
    if (p == NULL)
        abort();
    memset(p, 1, 64);
    return p;
}

__attribute__((noinline)) void leak_session(void) {
    for (int i = 0; i < 64; i++)
        leaked[leaked_count++] = touched(malloc(BLOCK));
}

__attribute__((noinline)) void cache_fill(int step) {
    if (step % 4 == 0) {
        for (int i = 0; i < cache_count; i++)
            free(cache[i]);
        cache_count = 0;
    }
    for (int i = 0; i < 32; i++)
        cache[cache_count++] = touched(malloc(BLOCK));
}

__attribute__((noinline)) void warmup_store(int step) {
    if (step >= 2)
        return;
    for (int i = 0; i < 256; i++)
        store[store_count++] = touched(malloc(BLOCK));
}

__attribute__((noinline)) void burst_parse(int step) {
    if (step == 8) {
        for (int i = 0; i < 384; i++)
            burst[burst_count++] = touched(malloc(BLOCK));
    } else if (step == 10) {
        for (int i = 0; i < burst_count; i++)
            free(burst[i]);
        burst_count = 0;
    }
}

__attribute__((noinline)) void churn(void) {
    for (int i = 0; i < 128; i++)
        free(touched(malloc(BLOCK)));
}

__attribute__((noinline)) void serve_step(int step) {
    leak_session();
    cache_fill(step);
    warmup_store(step);
    burst_parse(step);
    churn();
}

__attribute__((noinline)) void shut_down(void) {
    for (int i = 0; i < leaked_count; i++)
        free(leaked[i]);
    for (int i = 0; i < cache_count; i++)
        free(cache[i]);
    for (int i = 0; i < store_count; i++)
        free(store[i]);
    for (int i = 0; i < burst_count; i++)
        free(burst[i]);
}

int main(void) {
    for (int step = 0; step < STEPS; step++)
        serve_step(step);
    shut_down();
    return 0;
}
