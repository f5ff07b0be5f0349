#!/usr/bin/env bash
# The workspace's tests on a busy machine: `.ci/test.sh` (`cargo test --workspace`, with the
# caller's environment, e.g. TEMPORA_REQUIRE_BROWSER) run TEMPORA_BUSY_RUNS times (default 3)
# with TEMPORA_BUSY_LOOPS busy loops (default 2, one per core of CI's machine) spinning beside
# it the whole time. Every run must pass: a test that holds only on a quiet machine fails
# here. The tests are built before the loops start, so the loops load the runs alone.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${TEMPORA_BUSY_RUNS:-3}
loops=${TEMPORA_BUSY_LOOPS:-2}
cargo test --workspace --no-run -q
pids=()
stop() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
}
trap stop EXIT
for _ in $(seq "$loops"); do
  sh -c 'while :; do :; done' &
  pids+=("$!")
done
for run in $(seq "$runs"); do
  printf -- '--- busy run %s of %s (%s busy loops; load %s)\n' "$run" "$runs" "$loops" "$(cut -d' ' -f1-3 /proc/loadavg)"
  start=$(date +%s)
  .ci/test.sh
  printf -- '--- busy run %s of %s passed in %s s\n' "$run" "$runs" "$(($(date +%s) - start))"
done
