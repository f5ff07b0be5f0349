#!/usr/bin/env bash
# Runs the examples as a user would (release build): the tempora crate's Rust examples, then
# the C examples (`make -C examples/c`: the C library staged, each example built against
# libtempora.a and run). Each checks what it demonstrates and exits non-zero, saying what went
# wrong, if that did not happen.
set -euo pipefail
cd "$(dirname "$0")/.."
for example in epoll tokio_timeouts readme_blocking readme_tokio; do
  printf -- '--- example %s\n' "$example"
  cargo run --release -p tempora --example "$example"
done
# hyper's header-read timeout and a tower request timeout on tempora (features hyper, tower).
printf -- '--- example hyper_server\n'
cargo run --release -p tempora --example hyper_server --features hyper,tower
printf -- '--- examples/c (make)\n'
make -C examples/c
