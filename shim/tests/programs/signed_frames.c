/* C frames between two Rust frames, for the unwinders' tests (shim/src/parts/capture/mod.rs).
 *
 * Built -O2 -fomit-frame-pointer (as distributions build C), and on aarch64 with
 * -mbranch-protection=standard: every function here that saves x30 signs it first (paciasp), so
 * the return addresses the unwinders read from these frames carry a pointer-authentication code.
 * The test calls signed_frames_call, whose frames call back into the test, which captures. */
#include <alloca.h>
#include <stdint.h>

typedef void (*capture_fn)(void);

/* x30 as the deepest `level_a` saved it in its frame: its return address, signed where the build
 * signs return addresses. */
uintptr_t signed_frames_raw_lr;

static int level_b(capture_fn capture, int depth);

/* Keeps its return address as saved: on aarch64 x30 copied into a stack slot, which needs the
 * frame, so the prologue (which signs x30) has run by then, wherever the compiler places it. */
__attribute__((noinline, noclone)) static int level_a(capture_fn capture, int depth) {
    volatile uintptr_t lr = 0;
#if defined(__aarch64__)
    /* Not __builtin_return_address, which GCC strips of the authentication code. */
    __asm__ volatile("str x30, %0" : "=m"(lr));
#else
    lr = (uintptr_t)__builtin_return_address(0);
#endif
    signed_frames_raw_lr = lr;
    int r = depth > 0 ? level_b(capture, depth - 1) : (capture(), 0);
    /* Not a tail call: the frame stays. */
    return r + (int)(lr & 1) + 1;
}

/* A frame whose size is known only at run time: GCC then keeps x29 and computes the CFA from it
 * rather than from sp, even with -fomit-frame-pointer. */
__attribute__((noinline, noclone)) static int level_b(capture_fn capture, int depth) {
    volatile char *pad = alloca(16 + (unsigned)(depth & 3) * 32);
    pad[0] = (char)depth;
    int r = level_a(capture, depth);
    return r + pad[0] + 1;
}

int signed_frames_call(capture_fn capture, int depth) {
    return level_b(capture, depth) + 1;
}
