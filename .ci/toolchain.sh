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
# The C ABI's tests and examples compile C (and one C++ program): C and C++ compilers, make
# and pkg-config.
if ! command -v cc >/dev/null 2>&1 || ! command -v c++ >/dev/null 2>&1 \
   || ! command -v make >/dev/null 2>&1 || ! command -v pkg-config >/dev/null 2>&1; then
  sudo=""; if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq gcc g++ make pkg-config libc6-dev >/dev/null
fi
cc --version | head -1
# `tempora top`'s test drives it in a terminal multiplexer.
if ! command -v tmux >/dev/null 2>&1; then
  sudo=""; if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq tmux >/dev/null
fi
tmux -V
