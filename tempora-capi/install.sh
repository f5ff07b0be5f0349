#!/usr/bin/env bash
# Installs tempora's C library as C libraries are installed:
#   $DESTDIR$prefix/include/tempora.h, tempora_posix.h
#   $DESTDIR$prefix/$libdir/libtempora.so.0.1.0        SONAME libtempora.so.0, symbols @TEMPORA_0
#   $DESTDIR$prefix/$libdir/libtempora.so.0 -> libtempora.so.0.1.0, libtempora.so -> libtempora.so.0
#   $DESTDIR$prefix/$libdir/libtempora.a
#   $DESTDIR$prefix/$libdir/libtempora-posix.so.0.1.0 (and its links, .a, .pc): the drop-in,
#                        timer_create & co. with the C library's ABI, exported unversioned
#   $DESTDIR$prefix/$libdir/pkgconfig/tempora.pc      relocatable: paths from ${pcfiledir}
#   $DESTDIR$prefix/share/man/man3/tempora*.3          man 3 tempora, man 3 tempora_timer_create ...
#   $DESTDIR$prefix/share/doc/tempora/LICENSE-MIT, LICENSE-APACHE
#
#   tempora-capi/install.sh [--prefix DIR] [--libdir DIR] [--profile release|debug]
#                           [--no-build] [--no-strip] [--destdir DIR]
#
# --prefix defaults to /usr/local; --libdir (relative to the prefix, or absolute inside it) to
# lib/<multiarch> where the compiler has one (`cc -print-multiarch`: lib/x86_64-linux-gnu on
# Debian), else lib. DESTDIR (the environment's, or --destdir) is prepended to every path
# written and appears in none (a package's staging root). Release files are stripped (the
# debug info stays in target/); --no-strip keeps it. --no-build installs what cargo already
# built (the C test suite does this from inside `cargo test`). Then, for a C program:
#   cc prog.c $(pkg-config --cflags --libs tempora)                     # libtempora.so.0
#   cc -static prog.c $(pkg-config --static --cflags --libs tempora)    # libtempora.a
# (PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig if pkg-config does not search there.)
#
# Not cargo-c (`cargo cinstall`, the usual route): Debian's cargo-c 0.9.14 carries a cargo too
# old for this workspace (it cannot read Cargo.lock version 4, and ignores [lints]), and
# building a current cargo-c from crates.io compiles all of cargo, minutes that CI would spend
# on every clean machine. This script does its part: the .so, the .pc, the layout.
#
# The shared library is linked here from cargo's static library, not taken from a cargo
# cdylib: rustc gives a cdylib a version script of its own, and the linker lets that one win
# over tempora.map (rust-lld refuses to move a symbol from its unversioned node), so a cdylib
# cannot carry symbol versions.
#
# More libraries: each line of `libraries` below is NAME PACKAGE CRATE MAP: cargo builds
# PACKAGE, libNAME.so.$version is linked from its static library libCRATE.a with the version
# script MAP (relative to the repository), and libNAME.a, the links and NAME.pc are installed
# beside libtempora's. A header of its own goes in `headers`, a man page in tempora-capi/man/.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

libraries=(
  "tempora tempora-capi tempora_capi tempora-capi/tempora.map"
  "tempora-posix tempora-posix tempora_posix tempora-posix/posix.map"
)
headers=(tempora-capi/include/tempora.h tempora-capi/include/tempora_posix.h)

profile=release build=1 strip=1 prefix=/usr/local libdir="" destdir=${DESTDIR:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --libdir) libdir=$2; shift 2 ;;
    --destdir) destdir=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --no-build) build=0; shift ;;
    --no-strip) strip=0; shift ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
case "$prefix" in /*) ;; *) echo "install.sh: --prefix must be absolute: $prefix" >&2; exit 2 ;; esac
prefix=${prefix%/}
cc=${CC:-cc}
if [ -z "$libdir" ]; then
  multiarch=$("$cc" -print-multiarch 2>/dev/null || true)
  libdir=lib${multiarch:+/$multiarch}
fi
case "$libdir" in
  "$prefix"/*) libdir=${libdir#"$prefix"/} ;;
  /*) echo "install.sh: --libdir $libdir is not inside --prefix $prefix" >&2; exit 2 ;;
esac
libdir=${libdir%/}

version=$(sed -n 's/^version = "\(.*\)"/\1/p' "$root/Cargo.toml" | head -1)
major=${version%%.*}

target=${CARGO_TARGET_DIR:-$root/target}
# The profile's directory in target/ (dev's is debug; --profile debug means dev).
case "$profile" in dev|debug) profile=dev dir=debug ;; *) dir=$profile ;; esac
if [ "$build" = 1 ]; then
  packages=(); for l in "${libraries[@]}"; do set -- $l; packages+=(-p "$2"); done
  (cd "$root" && cargo build -q --profile "$profile" "${packages[@]}")
fi
# `cargo build` puts the libraries in $target/$dir; built only for a test they stay in its
# deps/.
built=$target/$dir
[ "$profile" = release ] || strip=0

# What a Rust static library needs from the C library: rustc's own answer (--print
# native-static-libs), asked of an empty static library, since cargo prints it only when the
# library is rebuilt with the flag (a rebuild of the crate, and of every later build). The
# crates linked here link no native library of their own, so the two lists are one.
# -lgcc_s, the shared unwinder, is left to the compiler driver: it links libgcc_s for a
# dynamic program and libgcc_eh for a -static one, where -lgcc_s would fail.
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
: > "$probe/empty.rs"
native=$(rustc --crate-type staticlib --crate-name probe --print native-static-libs \
  -o "$probe/libprobe.a" "$probe/empty.rs" 2>&1 | sed -n 's/^note: native-static-libs: //p')
[ -n "$native" ] || { echo "install.sh: rustc printed no native-static-libs" >&2; exit 1; }
native=$(printf '%s\n' $native | grep -vx -- -lgcc_s | tr '\n' ' ')
native=${native% }

inc=$destdir$prefix/include lib=$destdir$prefix/$libdir
man=$destdir$prefix/share/man/man3 doc=$destdir$prefix/share/doc/tempora
mkdir -p "$inc" "$lib/pkgconfig" "$man" "$doc"
for h in "${headers[@]}"; do install -m 644 "$root/$h" "$inc/"; done

# Into place by rename: a program running from an earlier install keeps its mapped file.
put() { install -m "$1" "$2" "$3.tmp$$" && mv -f "$3.tmp$$" "$3"; }

# From the libdir's pkgconfig/ up to the prefix: ../.. for lib, ../../.. for lib/<multiarch>.
up=..; rest=$libdir; while [ -n "$rest" ]; do up=$up/..; case "$rest" in */*) rest=${rest#*/} ;; *) rest="" ;; esac; done

for l in "${libraries[@]}"; do
  set -- $l
  name=$1 crate=$3 map=$root/$4
  # `cargo build` leaves the archive in $built; built only as another package's dependency
  # (a test run), it carries cargo's metadata hash in deps/. The newest of them: a test run
  # after an older `cargo build` must not install that build's archive.
  # shellcheck disable=SC2012
  archive=$( (ls -t "$built/lib$crate.a" "$built/deps/lib$crate.a" "$built/deps/lib$crate"-*.a \
    2>/dev/null || true) | head -1)
  [ -n "$archive" ] && [ -f "$archive" ] || { echo "install.sh: lib$crate.a is missing in $built (build first)" >&2; exit 1; }
  so=lib$name.so.$version
  # --gc-sections drops what no exported call reaches (the archive holds all of std).
  "$cc" -shared -o "$probe/$so" -Wl,-soname,"lib$name.so.$major" \
    -Wl,--version-script="$map" -Wl,--gc-sections -Wl,-z,relro,-z,now \
    -Wl,--whole-archive "$archive" -Wl,--no-whole-archive $native
  cp "$archive" "$probe/lib$name.a"
  if [ "$strip" = 1 ]; then
    strip --strip-unneeded "$probe/$so"
    strip --strip-debug "$probe/lib$name.a"
  fi
  put 755 "$probe/$so" "$lib/$so"
  put 644 "$probe/lib$name.a" "$lib/lib$name.a"
  ln -sfn "$so" "$lib/lib$name.so.$major"
  ln -sfn "lib$name.so.$major" "$lib/lib$name.so"
  cat > "$probe/$name.pc" <<PC
prefix=\${pcfiledir}/$up
libdir=\${prefix}/$libdir
includedir=\${prefix}/include

Name: $name
Description: POSIX-style interval timers by the million: the Linux kernel's timer wheel in user space
Version: $version
Cflags: -I\${includedir}
Libs: -L\${libdir} -l$name
Libs.private: $native
PC
  put 644 "$probe/$name.pc" "$lib/pkgconfig/$name.pc"
done

# One page per family of calls; every other call's page is a `.so` link to its family's.
for page in "$here"/man/*.3; do install -m 644 "$page" "$man/"; done
for page in "$here"/man/*.3; do
  sed -n 's/^\.\\" *names: *//p' "$page" | tr ' ' '\n' | while read -r call; do
    [ -n "$call" ] && [ ! -e "$here/man/$call.3" ] && echo ".so man3/$(basename "$page")" > "$man/$call.3"
  done
done
install -m 644 "$root/LICENSE-MIT" "$root/LICENSE-APACHE" "$doc/"
echo "$destdir$prefix"
