#!/usr/bin/env bash
# The library's Rust tests under AddressSanitizer with leak checking (LeakSanitizer): a use
# after free, an overflow, or memory still allocated and unreachable when a test binary exits
# fails the run. The leaks tempora makes on purpose are suppressed by name in .ci/lsan.supp;
# every other leak fails. Needs the nightly toolchain (`-Zsanitizer`), whose x86_64 Linux
# build carries the sanitizer runtimes; installs it through rustup if it is missing.
#
# Scope, for CI's time: the library's unit tests and its integration tests that run services
# (async_io, drivers_stress, signals, tokio_parity). Left out: fork (ASan's thread
# interceptors are not fork-safe with a thread-churning parent: 1 of 200 children stuck here,
# as for the C suite's fork.c), the kernel comparisons (a feature CI does not build), the
# tests that read files only (architecture, readme), the loom models, and the other crates
# (the C ABI's memory is checked by .ci/capi-asan.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! cargo +nightly --version >/dev/null 2>&1; then
  rustup toolchain install nightly --profile minimal
fi
target=x86_64-unknown-linux-gnu
export RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
export LSAN_OPTIONS="suppressions=$PWD/.ci/lsan.supp:print_suppressions=1"
# The checkpoint decoder's fuzz is safe code, which the ordinary run covers: a few cases here.
export TEMPORA_FUZZ_CASES="${TEMPORA_FUZZ_CASES:-200}"
# `--target` keeps the sanitizer off build scripts and proc macros; a target dir of its own
# keeps the ordinary build's cache.
cargo +nightly test -p tempora --target "$target" --target-dir target/asan \
  --lib --test async_io --test drivers_stress --test signals --test tokio_parity
