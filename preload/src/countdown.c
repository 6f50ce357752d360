/* The calling thread's sample countdown, in initial-exec thread-local storage.
 *
 * A shared library built by stable Rust gets the general-dynamic TLS model for its thread-locals:
 * every access calls the loader's __tls_get_addr. This word is declared initial-exec (and the file
 * is built with -ftls-model=initial-exec), so the exported malloc family reaches it with one load
 * of its offset from the GOT plus the thread pointer (src/countdown.rs reads it inline).
 * The library is loaded with the program (LD_PRELOAD), so its TLS is in the static block; jemalloc
 * inside it is built the same way (its tsd is initial-exec, JEMALLOC_TLS_MODEL). A dlopen of the
 * library needs the loader's surplus static TLS, as jemalloc already does.
 *
 * Zero-initialised, no destructor: usable before any constructor ran, in exiting threads and in
 * a forked child (which copies its thread's word). 0 sends a thread's first allocation to the
 * slow path, which draws its first countdown. */
#include <stdint.h>

__attribute__((tls_model("initial-exec"), visibility("hidden")))
__thread uint64_t jeprof_preload_countdown;

/* The calling thread's countdown word, for the profiler's slow path (and for the fast path on
 * architectures src/countdown.rs has no inline read for). */
__attribute__((visibility("hidden")))
uint64_t *jeprof_preload_countdown_word(void) {
    return &jeprof_preload_countdown;
}
