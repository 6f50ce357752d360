#!/usr/bin/env bash
# The preload library without its profiler (issue 38 item 4): bench/plain-preload.c, whose exports
# are libjeprof_preload.so's C names each forwarded to the very jemalloc that library links (the
# libjemalloc_pic.a tikv-jemalloc-sys built in the same release build, same configure, `_rjem_`
# names), so that the preload library's cost over it is the profiler's alone (bench/RESULTS.md).
#   bench/plain-preload.sh
# Builds the release libjeprof_preload.so (cargo), then libplain_preload.so beside it (gcc -O2),
# checks that both export the same functions and that malloc, free, calloc, realloc,
# posix_memalign, aligned_alloc and malloc_usable_size are one `jmp` each, and prints its path:
#   L=$(bench/plain-preload.sh | tail -1)
#   bench/preload-churn.sh same usable 1000000 LD_PRELOAD=$L
#   bench/redis-callgrind.sh same LD_PRELOAD=$L
# Needs cargo, gcc, binutils (nm, objdump) and jq.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cargo build --release -p jeprof-preload --message-format=json-render-diagnostics >"$out/build.json"
# The jemalloc build this build of the library linked: tikv-jemalloc-sys's build-script output.
jemalloc=$(jq -r 'select(.reason == "build-script-executed" and
  (.package_id | test("tikv-jemalloc-sys"))) | .out_dir' "$out/build.json" | sort -u)
preload=$(jq -r 'select(.reason == "compiler-artifact" and .target.name == "jeprof_preload")
  | .filenames[] | select(endswith(".so"))' "$out/build.json")
if [ "$(printf '%s\n' "$jemalloc" | grep -c .)" != 1 ] || [ -z "$preload" ]; then
  echo "plain-preload.sh: expected one tikv-jemalloc-sys build and libjeprof_preload.so in the" \
    "build's messages, got: '$jemalloc' and '$preload'" >&2
  exit 1
fi
archive=$jemalloc/lib/libjemalloc_pic.a
library=$(dirname "$preload")/libplain_preload.so
# -z now: the loader binds everything at start-up, as it does for the Rust cdylib.
gcc -O2 -fPIC -shared -fno-builtin -fvisibility=hidden -o "$library" bench/plain-preload.c \
  "$archive" -pthread -Wl,--exclude-libs,ALL -Wl,-z,relro,-z,now
exports() { nm -D --defined-only "$1" | awk '$2 == "T" {print $3}' | sort; }
if ! diff <(exports "$preload") <(exports "$library") >&2; then
  echo "plain-preload.sh: $library does not export what $preload does (diff above)" >&2
  exit 1
fi
for f in malloc free calloc realloc posix_memalign aligned_alloc malloc_usable_size; do
  body=$(objdump -d --no-show-raw-insn --disassemble="$f" "$library" |
    awk '/^ +[0-9a-f]+:/ {$1 = ""; print}')
  if [ "$(printf '%s\n' "$body" | grep -c .)" != 1 ] || ! [[ $body == *jmp* ]]; then
    echo "plain-preload.sh: $f is not one jmp:" "$body" >&2
    exit 1
  fi
done
echo "jemalloc $(sed -n 's/^#define JEMALLOC_VERSION "\(.*\)"/\1/p' "$jemalloc/include/jemalloc/jemalloc.h")" \
  "from $archive"
echo "$library"
