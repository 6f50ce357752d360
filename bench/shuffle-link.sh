#!/bin/sh
# Linker wrapper for bench/build-layouts.sh: links as rustc asked (with `cc`), and with
# SHUFFLE_SEED set, shuffles the order of the .text input sections with that seed, so every seed
# gives the same code in a different layout. Needs lld, which rustc uses by default on x86_64 Linux
# (Rust 1.90 and later); GNU ld has no --shuffle-sections.
if [ -n "${SHUFFLE_SEED:-}" ]; then
    exec cc "$@" -Wl,--shuffle-sections=".text*=$SHUFFLE_SEED"
fi
exec cc "$@"
