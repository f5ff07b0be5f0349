#!/usr/bin/env bash
# Runs the quick benchmark as a user would, then checks its JSON: every stdout line parses,
# carries the CONVENTIONS.md fields, and no tempora result is ok:false.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cargo run --release -- bench --quick --json >"$out"
cargo run --release -q -- check-json "$out"
