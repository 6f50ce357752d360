#!/usr/bin/env bash
# Peak RssAnon / RssFile growth and time of one dump, with and without in-process symbolization, on
# tantivy built with `debug = 1` (profile release, ~70 MB of DWARF), and tantivy with DataFusion
# built with `debug = 2` (profile fulldebug, feature datafusion, over 0.5 GB). One line per process; the cost of symbolizing is a
# line `mode=on` less its `mode=off` neighbour.
#
#   bench/symbolize/run.sh [OLD_CHECKOUT]
#
# With OLD_CHECKOUT (a checkout of an older commit, e.g. `git worktree add ../symold 6b682ca`), the
# same program is also built against that checkout's shim (a copy of this crate in
# $CARGO_TARGET_DIR/old-crate whose path dependency points there) and measured side by side.
# Builds under `nice -n 19` into CARGO_TARGET_DIR (default: the workspace's target/symbench; both
# builds, old and new, took 9.6 GB there); never run by CI.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$here/../../target/symbench}
# Documents indexed by each build.
docs_release=${DOCS_RELEASE:-100000}
docs_fulldebug=${DOCS_FULLDEBUG:-100000}
runs=${RUNS:-3}
old=${1:-}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

crates=("new:$here")
if [[ -n $old ]]; then
    copy=$CARGO_TARGET_DIR/old-crate
    mkdir -p "$copy/src"
    cp "$here/src/main.rs" "$copy/src/"
    cp "$here/Cargo.lock" "$copy/"
    sed -e "s|path = \"../../shim\"|path = \"$(cd "$old" && pwd)/shim\"|" \
        -e 's|^name = "jeprof-symbench"|name = "jeprof-symbench-old"|' \
        "$here/Cargo.toml" > "$copy/Cargo.toml"
    crates+=("old:$copy")
fi

for profile in release fulldebug; do
    for entry in "${crates[@]}"; do
        name=${entry%%:*}
        dir=${entry#*:}
        features=()
        [[ $profile == fulldebug ]] && features=(--features datafusion)
        nice -n 19 cargo build --quiet --profile "$profile" "${features[@]}" --manifest-path "$dir/Cargo.toml"
        bin=$CARGO_TARGET_DIR/$profile/jeprof-symbench
        [[ $name == old ]] && bin=$bin-old
        debug=$(size -A "$bin" | awk '/^\.debug_/ {s += $2} END {print s}')
        docs=$docs_release
        [[ $profile == fulldebug ]] && docs=$docs_fulldebug
        for run in $(seq "$runs"); do
            for mode in off on; do
                line=$("$bin" "$mode" "$out/dump.heap" "$docs")
                echo "code=$name profile=$profile debug_bytes=$debug run=$run $line"
            done
        done
    done
done
