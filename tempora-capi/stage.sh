#!/usr/bin/env bash
# Lays out tempora's C library as a C build expects it:
#   PREFIX/include/tempora.h, tempora_posix.h
#   PREFIX/lib/libtempora.so, libtempora.a
#   PREFIX/lib/pkgconfig/tempora.pc
# from cargo's build of this crate (whose files are libtempora_capi.*: see Cargo.toml).
#
#   tempora-capi/stage.sh [--profile release|debug] [--no-build] [PREFIX]
#
# PREFIX defaults to target/tempora-capi. --no-build stages what cargo already built (the C
# test suite does this from inside `cargo test`). Then:
#   cc prog.c $(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig pkg-config --cflags --libs tempora)
#   cc prog.c PREFIX/lib/libtempora.a $(PKG_CONFIG_PATH=... pkg-config --libs-only-l \
#      --static tempora | sed 's/-ltempora//')            # static: name the archive itself
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
profile=release build=1 prefix=""
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "stage.sh: unknown option $1" >&2; exit 2 ;;
    *) prefix=$1; shift ;;
  esac
done
target=${CARGO_TARGET_DIR:-$root/target}
prefix=${prefix:-$target/tempora-capi}
if [ "$build" = 1 ]; then
  flag=(); [ "$profile" = release ] && flag=(--release)
  (cd "$root" && cargo build "${flag[@]}" -q -p tempora-capi)
fi
# `cargo build` puts the libraries in $target/$profile; when they were built only for a test
# they stay in its deps/.
built=$target/$profile
[ -f "$built/libtempora_capi.a" ] || built=$built/deps
for f in libtempora_capi.so libtempora_capi.a; do
  [ -f "$built/$f" ] || { echo "stage.sh: $built/$f is missing (build tempora-capi first)" >&2; exit 1; }
done
mkdir -p "$prefix/include" "$prefix/lib/pkgconfig"
prefix=$(cd "$prefix" && pwd)
cp "$here/include/tempora.h" "$here/include/tempora_posix.h" "$prefix/include/"
# Copied, not linked: a staged prefix stays valid while cargo rebuilds.
cp "$built/libtempora_capi.so" "$prefix/lib/libtempora.so.tmp" && mv -f "$prefix/lib/libtempora.so.tmp" "$prefix/lib/libtempora.so"
cp "$built/libtempora_capi.a" "$prefix/lib/libtempora.a.tmp" && mv -f "$prefix/lib/libtempora.a.tmp" "$prefix/lib/libtempora.a"
version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
# Libs.private: what a Rust static library needs from the C library (rustc
# --print native-static-libs on Linux/glibc).
cat > "$prefix/lib/pkgconfig/tempora.pc" <<PC
prefix=$prefix
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: tempora
Description: POSIX-style interval timers by the million: the Linux kernel's timer wheel in user space
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -ltempora
Libs.private: -lgcc_s -lutil -lrt -lpthread -lm -ldl -lc
PC
echo "$prefix"
