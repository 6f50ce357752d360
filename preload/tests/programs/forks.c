/* fork and exec under the preload (preload/tests/fork_exec.rs). The parent keeps memory from
 * parent_site, then starts two children: one that only forks (fork_child_site, then exit) and one
 * that forks and execs this program again (`forks exec-child`: exec_child_site, then return from
 * main). It waits for both and prints `child <pid> <kind>` lines; every process dumps at exit to its
 * own `%p` file. A worker thread allocates in the parent throughout, so the forks happen while
 * another thread may be inside the allocator. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCKS 500
static void *kept[BLOCKS];
static atomic_int stop;

/* Keeps 500 blocks of 4 KiB. */
__attribute__((noinline)) static void keep_blocks(void) {
    for (int i = 0; i < BLOCKS; i++) {
        kept[i] = malloc(4096);
        if (!kept[i]) abort();
        memset(kept[i], i, 4096);
    }
}

__attribute__((noinline)) void parent_site(void) { keep_blocks(); }
__attribute__((noinline)) void fork_child_site(void) { keep_blocks(); }
__attribute__((noinline)) void exec_child_site(void) { keep_blocks(); }

static void *worker(void *arg) {
    (void)arg;
    while (!atomic_load(&stop)) {
        void *p = malloc(64 + (size_t)rand() % 8192);
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "exec-child") == 0) {
        exec_child_site();
        return 0;
    }
    parent_site();
    pthread_t thread;
    if (pthread_create(&thread, NULL, worker, NULL) != 0) abort();
    usleep(10000);

    pid_t forked = fork();
    if (forked < 0) abort();
    if (forked == 0) {
        fork_child_site();
        exit(0);
    }
    pid_t execed = fork();
    if (execed < 0) abort();
    if (execed == 0) {
        execl("/proc/self/exe", argv[0], "exec-child", (char *)NULL);
        perror("execl");
        _exit(127);
    }
    int status;
    if (waitpid(forked, &status, 0) != forked || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "the forked child failed (status %d)\n", status);
        return 1;
    }
    if (waitpid(execed, &status, 0) != execed || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "the exec'd child failed (status %d)\n", status);
        return 1;
    }
    atomic_store(&stop, 1);
    pthread_join(thread, NULL);
    printf("child %d fork\nchild %d exec\nparent %d\n", (int)forked, (int)execed, (int)getpid());
    return 0;
}
