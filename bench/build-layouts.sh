#!/bin/sh
# Builds the churn's two child binaries (`churn-shim` and `churn-plain`) once per code layout, for
# the churn's `--layouts`:
#
#   RUSTFLAGS="-C force-frame-pointers=yes" bench/build-layouts.sh 8 target/layouts
#   RUSTFLAGS="-C force-frame-pointers=yes" cargo bench -p jeprof-bench --bench churn -- \
#     --layouts target/layouts --warmup 200000 --modes again,off,fp --rounds 200 --allocations 2000000
#
# Why: where a function lands (its address bits, which branch-predictor and cache sets it shares
# with others) moves a churn this tight by a few percent, in plain jemalloc as much as in the shim,
# and an unrelated change moves it. One pair of binaries gives one draw of that; the churn's
# layout table averages the ratio over the draws. Layout N is linked with lld's
# `--shuffle-sections` and seed N (shuffle-link.sh); the first build compiles everything once
# (a few minutes, in CARGO_TARGET_DIR or target/, under layouts/), later ones only relink.
# The binaries are built with the bench profile, as `cargo bench` builds them. RUSTFLAGS is passed
# on (use the same as for the run, e.g. `-C force-frame-pointers=yes`).
set -eu
count=${1:?usage: build-layouts.sh COUNT OUTPUT_DIR}
out=${2:?usage: build-layouts.sh COUNT OUTPUT_DIR}
case $count in
    '' | *[!0-9]*) echo "build-layouts.sh: COUNT must be a whole number, not '$count'" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
wrapper="$root/bench/shuffle-link.sh"
target="${CARGO_TARGET_DIR:-$root/target}/layouts"
flags="${RUSTFLAGS:-} -C linker=$wrapper"
cd "$root"
seed=1
while [ "$seed" -le "$count" ]; do
    echo "layout $seed/$count" >&2
    # Touching the binaries' sources makes cargo relink them (with this seed) and nothing else.
    touch bench/src/bin/churn-shim.rs bench/src/bin/churn-plain.rs
    built=$(SHUFFLE_SEED=$seed RUSTFLAGS="$flags" CARGO_TARGET_DIR="$target" \
        cargo build --profile bench -p jeprof-bench --bin churn-shim --bin churn-plain 2>&1) || {
        echo "$built" >&2
        exit 1
    }
    dir="$out/layout-$seed"
    mkdir -p "$dir"
    for bin in churn-shim churn-plain; do
        # The bench profile builds into release/ (it inherits from release).
        exe="$target/release/$bin"
        [ -x "$exe" ] || { echo "build-layouts.sh: no $exe after the build" >&2; exit 1; }
        cp "$exe" "$dir/$bin.tmp" && mv "$dir/$bin.tmp" "$dir/$bin"
    done
    seed=$((seed + 1))
done
echo "$count layouts in $out" >&2
