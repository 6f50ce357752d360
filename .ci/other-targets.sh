#!/usr/bin/env bash
# jeprof-shim builds off Linux: `cargo check` of the shim (and the workspace crates under it) for
# macOS (aarch64) and Windows (x86_64), where the crate is a pass-through with the same API
# (shim/README.md, "On other systems"). Nothing runs there: these are checks, not tests.
#
# rustup cannot fetch other targets' standard libraries here, so the standard library is checked
# from source with Debian's toolchain (rustc-web, cargo-web: /usr/bin/rustc, /usr/bin/cargo) under
# `-Z build-std` (RUSTC_BOOTSTRAP=1), reading Debian's copy of its source (rust-web-src); all three
# are installed when missing. No C compiler is needed: jemalloc is a Linux-only dependency.
#
# One target per system: the shim's code off Linux has no architecture-specific part (the capture
# and its assembly are Linux-only), and each target's standard library is checked from source once
# (most of this script's CPU), so a second macOS architecture would add that and compile the same
# code.
# The feature sets are split between them: the `http` and `otlp` gates (elsewhere/http.rs, the
# optional dependencies) do not depend on the target, and the targets differ in their standard
# library and in the dependencies' own cfgs (mio's kqueue or Windows backend, dumpfmt's Unix-only
# file opening), which any feature set compiles. So: Windows with every feature, macOS with every
# feature and with none (the second check reuses its standard library). The shim's own warnings
# fail the check (`cargo rustc -- -D warnings` applies to it only, not to the standard library).
#
# Into target/other-targets (its own directory: another compiler than rustup's, whose artefacts it
# would otherwise evict). Run alone: `bash .ci/other-targets.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
[ -x /usr/bin/rustc ] || missing+=(rustc-web)
[ -x /usr/bin/cargo ] || missing+=(cargo-web)
if [ -x /usr/bin/rustc ]; then
  [ -d "$(/usr/bin/rustc --print sysroot)/lib/rustlib/src/rust/library/std" ] || missing+=(rust-web-src)
else
  missing+=(rust-web-src)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  echo "other targets: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

export RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc CARGO_TARGET_DIR="$PWD/target/other-targets"
check() {
  local target=$1 features=$2 started=$SECONDS
  /usr/bin/cargo rustc -q -p jeprof-shim --lib --profile check --locked --target "$target" \
    -Z build-std=std,panic_abort ${features:+--features "$features"} -- -D warnings
  echo "other targets: jeprof-shim checked for $target, features: ${features:-none} ($((SECONDS - started)) s)"
}
check x86_64-pc-windows-msvc http,otlp
check aarch64-apple-darwin http,otlp
check aarch64-apple-darwin ""
echo "other targets: all checked in ${SECONDS} s ($(/usr/bin/rustc --version))"
