#!/usr/bin/env bash
# Loom model checks of the lock-free and ordering-sensitive code: library tests with `loom` in
# their names, built with --cfg loom (only the `tempora` crate: the CLI's peers, tokio among
# them, do not build under that cfg).
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}" \
  cargo test --release -p tempora --lib loom
