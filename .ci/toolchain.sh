#!/usr/bin/env bash
# Makes sure cargo, rustfmt and clippy exist; installs the missing ones through rustup.
set -euo pipefail
if ! command -v cargo >/dev/null 2>&1; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then export PATH="$HOME/.cargo/bin:$PATH"; else
    echo "cargo not found: install Rust (rustup) first" >&2; exit 1; fi
fi
for c in rustfmt clippy; do
  if ! cargo "${c/rustfmt/fmt}" --version >/dev/null 2>&1; then rustup component add "$c"; fi
done
cargo --version
