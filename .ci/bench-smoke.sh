#!/usr/bin/env bash
# Runs the quick benchmark as a user would, then checks its JSON: every stdout line parses,
# carries the required fields, and no tempora result is ok:false; then compares the run with
# itself (`bench compare`, which must find no regression) and checks the report was written.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT
cargo run --release -- bench --quick --json >"$out"
cargo run --release -q -- check-json "$out"
cargo run --release -q -- bench compare "$out" "$out" --threshold 1.10 >/dev/null
test -s "${CARGO_TARGET_DIR:-target}"/tempora-bench/report.html
test -s "${CARGO_TARGET_DIR:-target}"/tempora-bench/results.jsonl
