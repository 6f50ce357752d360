#!/usr/bin/env bash
# What every process pays for a preloaded allocator (issue 38 item 2): threads started (strace's
# clone calls), instructions (callgrind) and peak RSS (VmHWM and RssAnon from /proc, three runs) of
# `true` and `ls /usr`.
#   bench/startup.sh LIBRARY [JEPROF_SHIM settings]
# e.g.
#   bench/startup.sh /usr/lib/x86_64-linux-gnu/libjemalloc.so.2
#   bench/startup.sh $PWD/target/release/libjeprof_preload.so
#   bench/startup.sh $PWD/target/release/libjeprof_preload.so leak_interval:60
# Needs gcc, strace and valgrind.
set -euo pipefail
lib=$1
settings=${2-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
gcc -O2 -shared -fPIC -o "$out/libhwm.so" "$(dirname "$0")/startup-hwm.c"
for program in "/usr/bin/true" "/usr/bin/ls /usr"; do
  # shellcheck disable=SC2086 # the program's words
  JEPROF_SHIM=$settings strace -f -e trace=clone,clone3 -o "$out/strace" \
    env LD_PRELOAD="$lib" $program >/dev/null 2>&1
  threads=$(grep -c clone "$out/strace" || true)
  # shellcheck disable=SC2086
  instructions=$(JEPROF_SHIM=$settings LD_PRELOAD=$lib valgrind --tool=callgrind \
    --callgrind-out-file="$out/cg" $program 2>&1 >/dev/null | sed -n 's/.*Collected : //p')
  memory=""
  for _ in 1 2 3; do
    # shellcheck disable=SC2086
    memory="$memory $(JEPROF_SHIM=$settings LD_PRELOAD=$out/libhwm.so:$lib $program 2>&1 \
      >/dev/null | awk '/VmHWM|RssAnon/ {print $2}' | paste -sd/)"
  done
  echo "$program | $(basename "$lib") ${settings:+($settings) }| threads started $threads |" \
    "instructions $instructions | VmHWM/RssAnon kB:$memory"
done
