#!/usr/bin/env bash
# The library as crates.io would take it: `cargo publish --dry-run -p tempora` packages it (the
# files its manifest lists, the README and licences it names, a lock) and builds the package
# alone, from crates.io's index, uploading nothing. Needs crates.io. Then the packaged crate's
# own tests build, without the workspace: the kernel differential tests are off there (their
# tempora-kernel is not published; tempora/Cargo.toml says why). About 20 s after the test step.
set -euo pipefail
cd "$(dirname "$0")/.."
# No CI scripts, no target directories, no other crate: the package is tempora/ alone, with
# the README and licences its manifest names and the ARCHITECTURE.md its unit tests read.
list=$(cargo package -p tempora --list)
if grep -E '^(\.ci/|target/|tempora-(kernel|cli|bench|capi)/)' <<<"$list"; then
  echo "publish-dry-run: the package ships the files above" >&2; exit 1
fi
for f in README.md LICENSE-MIT LICENSE-APACHE ARCHITECTURE.md; do
  grep -qx "$f" <<<"$list" || { echo "publish-dry-run: $f is not in the package" >&2; exit 1; }
done
cargo publish --dry-run -p tempora
# The packaged crate's own tests, built where the dry run unpacked and verified it, with the
# package's lock and the workspace's target directory (the dependencies already built are
# reused): the test targets and the dev-dependencies are all this adds.
target=${CARGO_TARGET_DIR:-target}
version=$(cargo pkgid -p tempora | sed 's/.*[@#]//')
cargo test --locked --no-run --manifest-path "$target/package/tempora-$version/Cargo.toml" \
  --target-dir "$target"
