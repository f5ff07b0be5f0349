#!/usr/bin/env bash
# The C library as a packager installs it and a C user builds against it, on this machine:
# tempora-capi/install.sh into a fresh prefix (its default libdir), and into a DESTDIR for
# /usr/local; in each, every C example (examples/c/*.c) built with pkg-config alone, shared
# and -static, and run; readelf shows the SONAME, the links, the symbol versions (the
# library's and the ones a program binds to), no debug info; the man pages and licences are
# there, and the DESTDIR install names no path of its staging root. Reuses the release build
# of the examples step (cargo finds it fresh).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
start=$(date +%s)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "install: $*" >&2; exit 1; }
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
major=${version%%.*}

# Everything a C user of the installed tree sees: $1 the tree as files lie on disk.
check_tree() {
  local tree=$1 pc libdir so out name
  pc=$(find "$tree" -name tempora.pc)
  [ "$(echo "$pc" | wc -l)" = 1 ] && [ -n "$pc" ] || fail "one tempora.pc under $tree: $pc"
  libdir=$(dirname "$(dirname "$pc")")
  so=$libdir/libtempora.so.$version
  [ "$(readlink "$libdir/libtempora.so")" = "libtempora.so.$major" ] || fail "libtempora.so is not the dev link"
  [ "$(readlink "$libdir/libtempora.so.$major")" = "libtempora.so.$version" ] || fail "libtempora.so.$major is not a link to $so"
  readelf -d "$so" | grep -q "SONAME.*\[libtempora.so.$major\]" || fail "SONAME of $so"
  readelf -d "$so" | grep SONAME
  # Every symbol the library defines for others is a tempora_ call at TEMPORA_0, or one of
  # tempora_posix.h's at TEMPORA_0.2.
  readelf --dyn-syms -W "$so" | awk '$7 != "UND" && $8 != "" && $4 != "SECTION" && NR > 3 {print $8}' > "$work/exports"
  grep -v '^TEMPORA_0\(\.2\)\?$' "$work/exports" | grep -v '^tempora_[a-z_]*@@TEMPORA_0$' \
    | grep -v '^tempora_posix_timer_[a-z]*@@TEMPORA_0\.2$' && fail "exports other than tempora_*@@TEMPORA_0 (above)"
  echo "$(grep -c '@@TEMPORA_0$' "$work/exports") calls exported at TEMPORA_0, e.g. $(grep -m1 tempora_new@@ "$work/exports"), $(grep -c '@@TEMPORA_0\.2$' "$work/exports") at TEMPORA_0.2"
  readelf -S -W "$so" | grep -q '\.debug_info' && fail "$so is not stripped"
  for licence in LICENSE-MIT LICENSE-APACHE; do
    [ -n "$(find "$tree" -path "*share/doc/tempora/$licence")" ] || fail "no $licence"
  done
  # A page for every call, most of them `.so` links to their family's.
  for call in $(grep -oE '\btempora_[a-z_]+\(' "$(find "$tree" -name tempora.h)" | tr -d '(' | sort -u); do
    [ -n "$(find "$tree" -path "*share/man/man3/$call.3")" ] || fail "no man page for $call"
  done
  if command -v man >/dev/null; then
    MANPATH=$(dirname "$(dirname "$(find "$tree" -path '*man3/tempora.3')")") man 3 tempora_timer_delete | grep -q 'tempora_timer_create, tempora_timer_delete' \
      || fail "man 3 tempora_timer_delete"
  fi

  export PKG_CONFIG_PATH=$libdir/pkgconfig
  for ex in examples/c/*.c; do
    name=$(basename "$ex" .c)
    # The README's command, then its -static twin.
    # shellcheck disable=SC2046
    cc -std=c11 -Wall -Wextra -Werror -O2 "$ex" $(pkg-config --cflags --libs tempora) -o "$work/$name-shared"
    # glibc warns, for each -static program, that std's getpwuid_r and getaddrinfo (which
    # tempora never calls) need glibc's shared libraries at run time: shown only on failure.
    # shellcheck disable=SC2046
    cc -static -std=c11 -Wall -Wextra -Werror -O2 "$ex" $(pkg-config --static --cflags --libs tempora) \
      -o "$work/$name-static" 2> "$work/static.log" || { cat "$work/static.log"; fail "-static $name"; }
    readelf -d "$work/$name-shared" | grep -q "NEEDED.*\[libtempora.so.$major\]" || fail "$name-shared does not need libtempora.so.$major"
    readelf --dyn-syms -W "$work/$name-shared" | grep -q 'tempora_new@TEMPORA_0' || fail "$name-shared does not bind tempora_new@TEMPORA_0"
    readelf -d "$work/$name-static" 2>&1 | grep -q 'no dynamic section' || fail "$name-static is not static"
    out=$(LD_LIBRARY_PATH=$libdir "$work/$name-shared") || fail "$name-shared failed: $out"
    out=$("$work/$name-static") || fail "$name-static failed: $out"
    echo "examples/c/$name.c: shared and -static built with pkg-config, ran"
  done
  # The drop-in: the five timer calls and the three signal waits alone, unversioned; a
  # program built against the C library alone runs on tempora under LD_PRELOAD (its timer_t
  # carries the drop-in's tag).
  so=$libdir/libtempora-posix.so.$version
  readelf -d "$so" | grep -q "SONAME.*\[libtempora-posix.so.$major\]" || fail "SONAME of $so"
  readelf --dyn-syms -W "$so" | awk '$7 != "UND" && $4 == "FUNC" {print $8}' | sort > "$work/posix-exports"
  printf '%s\n' sigtimedwait sigwait sigwaitinfo timer_create timer_delete timer_getoverrun timer_gettime timer_settime > "$work/posix-want"
  diff "$work/posix-want" "$work/posix-exports" || fail "libtempora-posix.so exports more or less than its eight calls"
  printf '%s\n' '#define _POSIX_C_SOURCE 200809L' '#include <signal.h>' '#include <stdint.h>' '#include <stdio.h>' '#include <time.h>' \
    'int main(void) { timer_t t; struct sigevent sev = {.sigev_notify = SIGEV_NONE};' \
    '  struct itimerspec its = {{0, 0}, {1, 0}};' \
    '  if (timer_create(CLOCK_MONOTONIC, &sev, &t) || timer_settime(t, 0, &its, NULL)) return 1;' \
    '  printf("%s\n", (uintptr_t)t >> 32 == 0x74706f73 ? "tempora" : "kernel"); return timer_delete(t); }' \
    > "$work/plain.c"
  cc -std=c11 -Wall -Werror "$work/plain.c" -o "$work/plain"
  [ "$("$work/plain")" = kernel ] || fail "a plain program's timer is not the kernel's"
  [ "$(LD_PRELOAD=$so "$work/plain")" = tempora ] || fail "LD_PRELOAD=libtempora-posix.so did not serve the timer"
  echo "libtempora-posix.so: the eight calls, unversioned; LD_PRELOAD serves a plain program's timer"
  unset PKG_CONFIG_PATH
}

echo "--- a fresh prefix: install.sh --prefix $work/prefix"
tempora-capi/install.sh --prefix "$work/prefix" >/dev/null
check_tree "$work/prefix"
pkg=$(PKG_CONFIG_PATH=$(dirname "$(find "$work/prefix" -name tempora.pc)") pkg-config --variable=prefix tempora)
[ "$(cd "$pkg" && pwd -P)" = "$(cd "$work/prefix" && pwd -P)" ] || fail "tempora.pc's prefix $pkg is not the install's"

echo "--- a DESTDIR: DESTDIR=$work/dest install.sh --prefix /usr/local --no-build"
DESTDIR=$work/dest tempora-capi/install.sh --prefix /usr/local --no-build >/dev/null
[ "$(ls "$work/dest")" = usr ] && [ "$(ls "$work/dest/usr")" = local ] || fail "DESTDIR holds more than usr/local"
grep -rl "$work" "$work/dest" && fail "files above name the staging root"
check_tree "$work/dest"
echo "install: $(( $(date +%s) - start )) s"
