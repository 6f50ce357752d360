#!/usr/bin/env bash
# Instructions each realistic workload executes under callgrind, in every mode the service goal
# compares (issue 38 item 1): plain jemalloc, the shim with sampling off, the shim at R = 512 KiB,
# and jemalloc's own profiler at the same R. Then bench/callgrind-whole.py cuts the shim's addition
# into its parts (fast path per call, slow paths, samples, first sightings, start-up, the rest).
#
#   cargo build --release -p jeprof-bench --features tantivy --bins
#   bench/service-callgrind.sh [WORKLOAD...]        (default: kv-store log-index search-service)
#
# JEMALLOC (default below) is given to jemalloc in every mode (`_RJEM_MALLOC_CONF`; jemalloc's
# profiler's mode adds its own settings before it). The default makes jemalloc's work a function of
# the program's allocations alone: this jemalloc (5.3.1 as tikv-jemalloc-sys builds it) collects
# its thread caches at most every 10 ms of wall time (`experimental_tcache_gc`) and purges by
# elapsed time (`dirty_decay_ms`, `muzzy_decay_ms`), so under callgrind, whose wall time stretches
# with the machine's load, the same binary's count moved by up to 12 M between runs (2026-12-06).
# Collection by allocated bytes and no purging are deterministic. JEMALLOC= runs jemalloc's defaults.
#
# RUNS (default 2) runs of plain, the shim and jemalloc's profiler, one with sampling off; files in
# $OUT/WORKLOAD/MODE-RUN.out (OUT defaults to /tmp/service-callgrind); JOBS (default 2) runs at a
# time. Every run prints the workload's checksum; a run whose checksum differs from plain's fails
# the script. Instruction counts do not depend on the machine's load; only how long this takes does.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${BIN:-$here/../target/release}
out=${OUT:-/tmp/service-callgrind}
runs=${RUNS:-2}
jobs=${JOBS:-2}
jemalloc=${JEMALLOC-experimental_tcache_gc:false,dirty_decay_ms:-1,muzzy_decay_ms:-1}
conf=()
[[ -n $jemalloc ]] && conf=("_RJEM_MALLOC_CONF=$jemalloc")
workloads=("$@")
[[ ${#workloads[@]} -gt 0 ]] || workloads=(kv-store log-index search-service)
for w in "${workloads[@]}"; do
  "$bin/churn-plain" "$w" --help >/dev/null 2>&1 || {
    echo "$bin/churn-plain has no workload '$w' (search-service needs --features tantivy)" >&2
    exit 2
  }
done

# One line per run: "WORKLOAD MODE RUN ENV..." (ENV may be empty).
plan=$(mktemp)
trap 'rm -f "$plan"' EXIT
for w in "${workloads[@]}"; do
  mkdir -p "$out/$w"
  for r in $(seq "$runs"); do
    echo "$w plain $r churn-plain ${conf[*]}"
    echo "$w shim $r churn-shim JEPROF_SHIM=sample_rate:524288,unwinder:eh_frame ${conf[*]}"
    echo "$w jemalloc-prof $r churn-plain _RJEM_MALLOC_CONF=prof:true,lg_prof_sample:19${jemalloc:+,$jemalloc}"
  done
  echo "$w off 1 churn-shim JEPROF_SHIM=sample_rate:0 ${conf[*]}"
done >"$plan"

run() {
  local w=$1 mode=$2 r=$3 child=$4
  shift 4
  env "$@" valgrind --tool=callgrind --callgrind-out-file="$out/$w/$mode-$r.out" \
    "$bin/$child" "$w" >"$out/$w/$mode-$r.log" 2>"$out/$w/$mode-$r.err"
  echo "$w $mode $r $(sed -n 's/^summary: //p' "$out/$w/$mode-$r.out") $(sed -n 's/^checksum //p' "$out/$w/$mode-$r.log")"
}
export -f run
export bin out
xargs -P "$jobs" -L 1 bash -c 'run "$@"' _ <"$plan"

status=0
for w in "${workloads[@]}"; do
  want=$(sed -n 's/^checksum //p' "$out/$w/plain-1.log")
  for log in "$out/$w"/*.log; do
    got=$(sed -n 's/^checksum //p' "$log")
    [[ $got == "$want" ]] || { echo "$log: checksum '$got', plain's '$want'" >&2; status=1; }
  done
  python3 "$here/callgrind-whole.py" "$out/$w"
done
exit $status
