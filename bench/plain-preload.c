/* The preload library without its profiler: the C names libjeprof_preload.so exports, each
 * forwarded to the very jemalloc that library links (tikv-jemalloc-sys's libjemalloc_pic.a, its
 * `_rjem_` names), with nothing in between. Built and checked by bench/plain-preload.sh; measured
 * against the preload library by bench/preload-churn.sh and bench/redis-callgrind.sh
 * (bench/RESULTS.md, "The preload's calls at the floor"), so that their difference is the
 * profiler's own cost and not jemalloc 5.3.1's against Debian's 5.3.0.
 *
 * malloc, free, calloc, realloc, posix_memalign, aligned_alloc, malloc_usable_size and jemalloc's
 * introspection calls compile to one `jmp` each (the script checks). The rest keep glibc's
 * semantics as jeprof_shim::c_api does: reallocarray checks its product, memalign rounds its
 * alignment up to a power of two, valloc and pvalloc align to the page (pvalloc rounds the size up
 * to whole pages), each through jemalloc's aligned_alloc as the preload library's are.
 * jemalloc's own realloc(p, 0) frees p and returns NULL on Linux (opt.zero_realloc "free"), as
 * glibc's does and the preload library's. */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

/* The archive's symbols, hidden: the calls are direct, and the linker (--exclude-libs) keeps them
 * out of the dynamic symbol table, so only the names below are exported. */
#define HIDDEN __attribute__((visibility("hidden")))
HIDDEN void *_rjem_malloc(size_t size);
HIDDEN void _rjem_free(void *ptr);
HIDDEN void *_rjem_calloc(size_t count, size_t size);
HIDDEN void *_rjem_realloc(void *ptr, size_t size);
HIDDEN int _rjem_posix_memalign(void **out, size_t align, size_t size);
HIDDEN void *_rjem_aligned_alloc(size_t align, size_t size);
HIDDEN size_t _rjem_malloc_usable_size(const void *ptr);
HIDDEN int _rjem_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
                         size_t newlen);
HIDDEN int _rjem_mallctlnametomib(const char *name, size_t *mibp, size_t *miblenp);
HIDDEN int _rjem_mallctlbymib(const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp,
                              void *newp, size_t newlen);
HIDDEN void _rjem_malloc_stats_print(void (*write_cb)(void *, const char *), void *cbopaque,
                                     const char *opts);
HIDDEN size_t _rjem_nallocx(size_t size, int flags);

#define EXPORT __attribute__((visibility("default")))

EXPORT void *malloc(size_t size) { return _rjem_malloc(size); }
EXPORT void free(void *ptr) { _rjem_free(ptr); }
EXPORT void *calloc(size_t count, size_t size) { return _rjem_calloc(count, size); }
EXPORT void *realloc(void *ptr, size_t size) { return _rjem_realloc(ptr, size); }
EXPORT int posix_memalign(void **out, size_t align, size_t size) {
  return _rjem_posix_memalign(out, align, size);
}
EXPORT void *aligned_alloc(size_t align, size_t size) { return _rjem_aligned_alloc(align, size); }
EXPORT size_t malloc_usable_size(void *ptr) { return _rjem_malloc_usable_size(ptr); }

EXPORT void *reallocarray(void *ptr, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return _rjem_realloc(ptr, total);
}

EXPORT void *memalign(size_t align, size_t size) {
  size_t rounded = 1;
  while (rounded < align) {
    if (rounded > SIZE_MAX / 2) {
      errno = EINVAL;
      return NULL;
    }
    rounded *= 2;
  }
  return _rjem_aligned_alloc(rounded, size);
}

static size_t page_size(void) {
  long page = sysconf(_SC_PAGESIZE);
  return page > 0 && (page & (page - 1)) == 0 ? (size_t)page : 4096;
}

EXPORT void *valloc(size_t size) { return _rjem_aligned_alloc(page_size(), size); }

EXPORT void *pvalloc(size_t size) {
  size_t page = page_size();
  size_t rounded = size == 0 ? 1 : size;
  if (rounded > SIZE_MAX - (page - 1)) {
    errno = ENOMEM;
    return NULL;
  }
  rounded = (rounded + page - 1) & ~(page - 1);
  return _rjem_aligned_alloc(page, rounded);
}

EXPORT int mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) {
  return _rjem_mallctl(name, oldp, oldlenp, newp, newlen);
}
EXPORT int mallctlnametomib(const char *name, size_t *mibp, size_t *miblenp) {
  return _rjem_mallctlnametomib(name, mibp, miblenp);
}
EXPORT int mallctlbymib(const size_t *mib, size_t miblen, void *oldp, size_t *oldlenp, void *newp,
                        size_t newlen) {
  return _rjem_mallctlbymib(mib, miblen, oldp, oldlenp, newp, newlen);
}
EXPORT void malloc_stats_print(void (*write_cb)(void *, const char *), void *cbopaque,
                               const char *opts) {
  _rjem_malloc_stats_print(write_cb, cbopaque, opts);
}
EXPORT size_t nallocx(size_t size, int flags) { return _rjem_nallocx(size, flags); }
