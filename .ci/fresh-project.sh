#!/usr/bin/env bash
# A new user's first five minutes: a fresh Cargo project that depends on tempora by path (and
# on tokio, for the second program) builds and runs the README's two programs unchanged (the
# examples `readme_blocking.rs` and `readme_tokio.rs`, which tempora/tests/readme.rs checks are
# the README's code verbatim). Nothing of the workspace is visible to it but the crate itself.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
target=${CARGO_TARGET_DIR:-$root/target}/fresh-project
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for program in readme_blocking readme_tokio; do
  printf -- '--- a fresh project: %s\n' "$program"
  cargo new --quiet --vcs none --name first-steps "$dir/$program"
  cd "$dir/$program"
  cargo add --quiet --path "$root/tempora"
  if [ "$program" = readme_tokio ]; then
    cargo add --quiet tokio --features macros,rt-multi-thread
  fi
  cp "$root/tempora/examples/$program.rs" src/main.rs
  cargo run --quiet --release --target-dir "$target"
  cd "$root"
done
