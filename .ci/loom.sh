#!/usr/bin/env bash
# Loom model checks of the lock-free and ordering-sensitive code: tests with `loom` in their
# names, built with --cfg loom. The wheel is single-threaded, so there are none yet; this runs
# them as soon as the first one exists.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! grep -rqs --include='*.rs' 'cfg(loom)' tempora*/src tempora*/tests 2>/dev/null; then
  echo "no loom tests yet"
  exit 0
fi
RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}" \
  cargo test --release --workspace loom
