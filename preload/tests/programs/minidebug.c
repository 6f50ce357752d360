/* A program whose allocating function is static: in .symtab only, not in .dynsym. Stripped, it has
 * no name of its own unless the program carries MiniDebugInfo (tests/mini_debug_info.rs). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __attribute__((noinline)) char *hidden_site(size_t n) {
    char *p = malloc(n);
    memset(p, 1, n);
    return p;
}

int main(void) {
    static char *keep[4096];
    for (int i = 0; i < 4096; i++)
        keep[i] = hidden_site(4096);
    printf("%d\n", keep[100][0]);
    return 0;
}
