#!/usr/bin/env bash
# Instructions bench/preload-churn.c executes for a fixed churn through the C malloc family, under
# callgrind: what a preloaded allocator adds per call (bench/RESULTS.md). One variant per call:
#   bench/preload-churn.sh NAME MODE STEPS [ENV=VALUE...]      (MODE: plain or usable)
# e.g.
#   J=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
#   bench/preload-churn.sh plain  usable 1000000 LD_PRELOAD=$J
#   bench/preload-churn.sh ours   usable 1000000 LD_PRELOAD=$PWD/target/release/libjeprof_preload.so JEPROF_SHIM=sample_rate:524288
#   bench/preload-churn.sh jeprof usable 1000000 LD_PRELOAD=$J MALLOC_CONF=prof:true,lg_prof_sample:19
# Prints "NAME MODE <instructions>" and leaves callgrind's file in $OUT/NAME-MODE/cg.out (OUT
# defaults to /tmp/preload-churn). Needs gcc and valgrind.
set -euo pipefail
name=$1
mode=$2
steps=$3
shift 3
root=${OUT:-/tmp/preload-churn}
out=$root/$name-$mode
rm -rf "$out"
mkdir -p "$out"
gcc -O2 -o "$root/preload-churn" "$(dirname "$0")/preload-churn.c"
env "$@" valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" \
  "$root/preload-churn" "$mode" "$steps" >"$out/run.log" 2>&1
echo "$name $mode $(sed -n 's/^summary: //p' "$out/cg.out")"
