#!/usr/bin/env bash
# Instructions redis-server executes for a fixed redis-benchmark load, under callgrind: the repeatable
# figure behind the server table's throughput ratios (bench/RESULTS.md). One variant per call:
#   bench/redis-callgrind.sh NAME [ENV=VALUE...]
# e.g.
#   bench/redis-callgrind.sh plain LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
#   bench/redis-callgrind.sh ours  LD_PRELOAD=$PWD/target/release/libjeprof_preload.so JEPROF_SHIM=sample_rate:524288
#   bench/redis-callgrind.sh jeprof LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 MALLOC_CONF=prof:true,lg_prof_sample:19
# Prints "NAME <instructions>" and leaves callgrind's file in $OUT/NAME/cg.out (OUT defaults to
# /tmp/redis-callgrind). Needs redis-server, redis-tools and valgrind (Debian). Loopback only.
set -euo pipefail
name=$1
shift
out=${OUT:-/tmp/redis-callgrind}/$name
rm -rf "$out"
mkdir -p "$out"
port=$((20000 + RANDOM % 10000))
env "$@" valgrind --tool=callgrind --callgrind-out-file="$out/cg.out" \
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --dir "$out" \
  >"$out/server.log" 2>&1 &
server=$!
for _ in $(seq 1 240); do
  redis-cli -p "$port" ping >/dev/null 2>&1 && break
  sleep 0.5
done
# 20,000 requests of each: SET, GET, LPUSH, the LPUSH that fills LRANGE's list, LRANGE_100.
timeout 600 redis-benchmark -p "$port" -n 20000 -c 10 -r 100000 -d 64 \
  -t set,get,lpush,lrange_100 -q >"$out/benchmark.txt" 2>&1
redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true
wait "$server" || true
echo "$name $(sed -n 's/^summary: //p' "$out/cg.out")"
