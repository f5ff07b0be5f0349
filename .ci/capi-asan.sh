#!/usr/bin/env bash
# The C test suite (tempora-capi/tests/c_suite.rs) once more with every C program built with
# AddressSanitizer: a C program's heap misuse around tempora's calls, or memory tempora
# allocates for the program and never frees (LeakSanitizer), fails the run. Installs gcc's
# ASan runtime from Debian's packages if the compiler cannot link it.
set -euo pipefail
cd "$(dirname "$0")/.."
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int main(void) { return 0; }' > "$probe/p.c"
if ! cc -fsanitize=address "$probe/p.c" -o "$probe/p" 2>/dev/null; then
  sudo=""; if [ "$(id -u)" != 0 ]; then sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libasan8 >/dev/null
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
TEMPORA_C_SANITIZE=address cargo test -p tempora-capi --test c_suite
