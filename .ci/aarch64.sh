#!/usr/bin/env bash
# The shim and the preload library on aarch64 Linux, cross-built on x86_64 and run under qemu
# (`bash .ci/aarch64.sh`, alone or from .ci/run). Installs what it needs when missing, with apt (as
# root or with sudo): the arm64 architecture, Debian's rustc-web and cargo-web (1.96) with the
# aarch64 standard library (libstd-rust-web-dev:arm64: rustup cannot fetch targets here), the
# cross C compiler and C library (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross) and qemu-user.
#
# Builds into target/aarch64 (its own directory: another compiler than the host builds') only the
# test binaries it runs, and runs them under `qemu-aarch64 -cpu max` (`-cpu max` emulates pointer
# authentication, so `-mbranch-protection=standard` code really signs its return addresses). A
# test that starts a binary of the target (its own, re-run as a child; a C test program) starts it
# under the same runner (jeprof_conformance::target_command); host tools (perl for the real
# jeprof, go, curl, chromium) run as they are.
#
# What runs: the shim's unit tests and every integration test below; the preload library's C
# program (preload/tests/c_program.rs: built -O2 -fomit-frame-pointer -mbranch-protection=standard
# with aarch64-linux-gnu-gcc; its stacks equal libgcc's, its figures cover the truth, its dump says
# `shim_unwinder: eh_frame`); the sampled arena's memory per sample (demo/tests/
# sampled_arena_pages.rs) with jemalloc's 64 KiB pages (its default on aarch64 Linux; 4 KiB pages
# are tested natively). The shim's other tests are left to .ci/run where their subject is the same
# Rust on every architecture (the list below says which run here).
#
# What cannot run under qemu here, and why (the script prints this list too):
#   - preload/tests/fork_exec.rs: the test program execs itself (/proc/self/exe); qemu-user passes
#     an exec to the host kernel, which runs an aarch64 image only through a binfmt_misc
#     registration for qemu, and a CI container can neither rely on nor make one.
#   - preload/tests/redis_server.rs: it preloads the library into Debian's redis-server, which is
#     the host's (x86_64); an arm64 redis-server cannot be installed beside it.
#   - preload/tests/cxx_program.rs: it needs a C++ cross compiler (g++-aarch64-linux-gnu), not among
#     the packages above; its unwinding is the C program's, its demangling is the host's code.
#   - shim/tests/stress_fork.rs, scopes_fork.rs, sequenced_dumps.rs: they fork while other threads
#     run, and qemu 7.2 aborts in such a child (`qemu_plugin_vcpu_init_hook: assertion failed`,
#     then `cpu_exec: assertion failed: (cpu == current_cpu)`), which exits with status 127.
#   - shim/tests/arena_unavailable.rs, arena_fallback.rs: they lower RLIMIT_AS so that the arena's
#     reservation fails; qemu-user does not pass that limit to the host (it would limit the
#     emulator's own memory), so the reservation succeeds.
#   - shim/tests/http_go_pprof.rs: go tool pprof asks the listener's /debug/pprof/symbol (which
#     answers 404) for any frame the profile does not name, and arm64's glibc has no symbols here
#     (x86_64's are named through libc6-dbg, which valgrind installs).
#   - shim/tests/http_robustness.rs, otlp_push.rs: their clients' and pusher's timeouts are
#     sized for native speed; emulated, the 100 concurrent requests and the pushes to the test's
#     collector outlast them.
#   - shim/tests/near_limit_oom.rs, preload/tests/near_limit_oom.rs: they grow a process at 400 MB/s
#     into a cgroup limit until the OOM killer ends it; emulated, the growth is far slower and the
#     process's memory is qemu's as much as its own, so the dump's timing says nothing of aarch64.
set -euo pipefail
cd "$(dirname "$0")/.."
step() { echo "==> aarch64: $* [$(date -u +%H:%M:%S), ${SECONDS} s in]"; }

TARGET=aarch64-unknown-linux-gnu
missing=()
dpkg --print-foreign-architectures | grep -qx arm64 || missing+=(arch:arm64)
[ -x /usr/bin/cargo ] || missing+=(cargo-web)
[ -x /usr/bin/rustc ] || missing+=(rustc-web)
{ [ -d /usr/lib/rustlib/$TARGET/lib ] && [ -e /lib/ld-linux-aarch64.so.1 ]; } || missing+=(libstd-rust-web-dev:arm64)
command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
[ -e /usr/aarch64-linux-gnu/lib/libc.so ] || missing+=(libc6-dev-arm64-cross)
command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
if [ "${#missing[@]}" -gt 0 ]; then
  step "installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO dpkg --add-architecture arm64
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    rustc-web cargo-web libstd-rust-web-dev:arm64 gcc-aarch64-linux-gnu libc6-dev-arm64-cross \
    qemu-user >/dev/null
fi

# Debian's toolchain, not rustup's (which has no aarch64 standard library here).
export PATH="/usr/bin:$PATH"
export CARGO_TARGET_DIR="$PWD/target/aarch64"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
# The runner stays in the environment: the tests read it to start their own aarch64 children.
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -cpu max"
# The emulated programs load the arm64 C library that libstd-rust-web-1.96:arm64 depends on
# (libc6:arm64, in /lib/aarch64-linux-gnu), loader included. Not /usr/aarch64-linux-gnu (the cross
# C library, for linking): its loader reads the host's ld.so.cache, which lists the arm64
# libraries, and would start a program on another build of libc.so.6 than its own; glibc's
# private interfaces between the two differ, and the first pthread_create spins forever.
export QEMU_LD_PREFIX=/
# A fresh build gains nothing from incremental compilation's bookkeeping.
export CARGO_INCREMENTAL=0

echo "not run under qemu (the header of .ci/aarch64.sh says more):"
echo "  preload fork_exec: execs its own aarch64 image, which needs a binfmt_misc registration"
echo "  preload redis_server: preloads into the host's (x86_64) redis-server"
echo "  preload cxx_program: needs g++-aarch64-linux-gnu, not installed by this step"
echo "  shim stress_fork, scopes_fork, sequenced_dumps: qemu 7.2 aborts in a child forked while"
echo "    other threads run"
echo "  shim arena_unavailable, arena_fallback: qemu-user does not apply RLIMIT_AS to the program"
echo "  shim http_go_pprof: go tool pprof asks a symbol server for glibc's frames (no arm64 symbols)"
echo "  shim http_robustness, otlp_push: timeouts sized for native speed"
echo "  shim and preload near_limit_oom: 400 MB/s into a cgroup limit; emulated, qemu's memory too"
echo "  the shim's other integration tests: the same Rust on every architecture, run natively by"
echo "    .ci/run; under emulation they would take this step past its 15 minutes"

# The shim's integration tests that run here: those whose subject depends on the architecture (the
# unwinders and signed return addresses, the sampled arena and its size classes, the stacks jeprof
# reads, the symbolizer over aarch64 DWARF, build ids, thread exit and thread caches, the profiler
# beside another allocator, dumps from the writer thread, the listener's jeprof path). The rest
# (leak history and suspects, scopes' accounting, windows, the page, the flood test, the seed loops
# over other allocators) is the same Rust on every architecture, runs natively in .ci/run, and
# would take this step past its 15 minutes under emulation (leak_suspects alone took 10 minutes).
SHIM_TESTS=(
  accuracy allocator_figures arena_exhaustion auto_dumps build_ids coexistence eh_frame_unwinder
  http_jeprof jeprof_agrees scopes_exact symbolize_bounded tcache_threads thread_exit
)
shim=(-p jeprof-shim --features jeprof-shim/http,jeprof-shim/otlp --lib)
for t in "${SHIM_TESTS[@]}"; do shim+=(--test "$t"); done
# One cargo invocation per package would build the shim once per feature set; one for all three
# builds it once.
all=(--locked --target "$TARGET" "${shim[@]}" -p jeprof-preload --test c_program
  -p jeprof-demo --test sampled_arena_pages)

step "build (cargo $(cargo --version | cut -d' ' -f2), target/aarch64)"
nice cargo test "${all[@]}" --no-run
step "run under qemu-aarch64 -cpu max"
cargo test "${all[@]}" --no-fail-fast

# The sampled arena's figures (the test prints them). jemalloc's configure gives aarch64 Linux
# 64 KiB pages unless told otherwise (`LG_PAGE=16` for `aarch64-unknown-linux-*`), so the build
# above has them (the shim as built above, with the same features: nothing is rebuilt). Memory per
# sample must stay its objects' size classes, not a page each (jemalloc#2358). 4 KiB pages are
# x86_64's, where .ci/run runs the same test natively; a second jemalloc build for 4 KiB pages here
# (JEMALLOC_SYS_WITH_LG_PAGE=12) would cost the step about 5 more minutes for the same code path.
step "sampled arena with 64 KiB pages (jemalloc's default on aarch64 Linux)"
cargo test --locked --target "$TARGET" -p jeprof-shim --features jeprof-shim/http,jeprof-shim/otlp \
  -p jeprof-demo --test sampled_arena_pages -- --nocapture
step "passed"
