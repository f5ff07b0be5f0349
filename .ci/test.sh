#!/usr/bin/env bash
# The README's test command.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace
