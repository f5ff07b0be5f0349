#!/usr/bin/env bash
# Runs the tempora crate's examples as a user would (release build). Each checks what it
# demonstrates and exits non-zero, saying what went wrong, if that did not happen.
set -euo pipefail
cd "$(dirname "$0")/.."
for example in epoll tokio_timeouts; do
  printf -- '--- example %s\n' "$example"
  cargo run --release -p tempora --example "$example"
done
