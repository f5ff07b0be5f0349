#!/usr/bin/env bash
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
# The library as users build it: without the `hyper` and `tower` features, which the
# workspace build above turns on through tempora-bench.
cargo clippy -p tempora --all-targets -- -D warnings
# And with its `serde` feature (no workspace crate turns it on, so neither command above
# sees the code it gates), whose one test is run here too: `cargo test --workspace` builds
# without the feature.
cargo clippy -p tempora --all-targets --features serde -- -D warnings
cargo test -q -p tempora --features serde --lib -- timers::tests::stats::json
# And with `hyper` and `tower` alone (the workspace build turns them on through tempora-bench):
# the compat module as a user builds it, its tests, the example.
cargo clippy -p tempora --all-targets --features hyper,tower -- -D warnings
cargo test -q -p tempora --features hyper,tower --lib -- compat::
cargo test -q -p tempora --features hyper --test hyper_timer
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
# The library's private docs carry its invariants and their arguments: their links must hold.
RUSTDOCFLAGS="-D warnings" cargo doc -p tempora --no-deps --document-private-items
# The import graph of the library's files runs only down the layers and has no circle
# (tests/architecture.rs reads it).
cargo test -q -p tempora --test architecture
