/* Counts the threads a process starts: preloaded before the profiler's library, its
   pthread_create appends one line to the file $COUNT_THREADS_FILE names, then calls the C
   library's. Used by tests/no_thread_unasked.rs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*body)(void *),
                   void *arg) {
    create_fn real = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    const char *path = getenv("COUNT_THREADS_FILE");
    if (path != NULL) {
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0600);
        if (fd >= 0) {
            (void)!write(fd, "pthread_create\n", 15);
            close(fd);
        }
    }
    return real(thread, attr, body, arg);
}
