#!/bin/sh
# Builds the churn bench's two binaries (the shim's `churn` and plain jemalloc's `churn_plain`)
# once per code layout, for `CHURN_LAYOUTS`:
#
#   shim/benches/build-layouts.sh 8 target/layouts
#   CHURN_LAYOUTS=target/layouts CHURN_WARMUP=200000 CHURN_MODES=again,off,fp CHURN_ROUNDS=200 \
#     CHURN_ALLOCATIONS=2000000 RUSTFLAGS="-C force-frame-pointers=yes" \
#     cargo bench -p jeprof-shim --bench churn --bench churn_plain
#
# Why: where a function lands (its address bits, which branch-predictor and cache sets it shares
# with others) moves a churn this tight by a few percent, in plain jemalloc as much as in the shim,
# and an unrelated change moves it. One pair of binaries gives one draw of that; the bench's
# layout table averages the ratio over the draws. Layout N is linked with lld's
# `--shuffle-sections` and seed N (shuffle-link.sh); the first build compiles everything once
# (a few minutes, in CARGO_TARGET_DIR or target/, under layouts/), later ones only relink.
# RUSTFLAGS is passed on (add `-C force-frame-pointers=yes` as for the bench itself).
set -eu
count=${1:?usage: build-layouts.sh COUNT OUTPUT_DIR}
out=${2:?usage: build-layouts.sh COUNT OUTPUT_DIR}
case $count in
    '' | *[!0-9]*) echo "build-layouts.sh: COUNT must be a whole number, not '$count'" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/../.." && pwd)
wrapper="$root/shim/benches/shuffle-link.sh"
target="${CARGO_TARGET_DIR:-$root/target}/layouts"
flags="${RUSTFLAGS:-} -C linker=$wrapper"
cd "$root"
seed=1
while [ "$seed" -le "$count" ]; do
    echo "layout $seed/$count" >&2
    # Touching the bench sources makes cargo relink them (with this seed) and nothing else.
    touch shim/benches/churn.rs shim/benches/churn_plain.rs
    built=$(SHUFFLE_SEED=$seed RUSTFLAGS="$flags" CARGO_TARGET_DIR="$target" \
        cargo bench -p jeprof-shim --bench churn --bench churn_plain --no-run 2>&1) || {
        echo "$built" >&2
        exit 1
    }
    dir="$out/layout-$seed"
    mkdir -p "$dir"
    for bench in churn churn_plain; do
        exe=$(echo "$built" | sed -n "s|.*Executable benches/$bench.rs (\(.*\))|\1|p")
        [ -n "$exe" ] || { echo "build-layouts.sh: no $bench binary in cargo's output" >&2; exit 1; }
        name=$bench
        [ "$bench" = churn_plain ] && name=plain
        cp "$exe" "$dir/$name.tmp" && mv "$dir/$name.tmp" "$dir/$name"
    done
    seed=$((seed + 1))
done
echo "$count layouts in $out" >&2
