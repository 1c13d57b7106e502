#!/usr/bin/env bash
# Builds the three Lambda packages — materializer, committer, compactor — as arm64
# (Graviton) zips, each holding one `bootstrap`, from one cargo build:
#
#   scripts/package.sh [extra `cargo lambda build` options]
#
# Needs cargo-lambda and Zig (`pip install cargo-lambda==1.9.2`, which brings the `ziglang`
# package) and the Rust target aarch64-unknown-linux-gnu
# (`rustup target add aarch64-unknown-linux-gnu`); it says which is missing before
# building. Honours CARGO_TARGET_DIR. The zips land in <target dir>/lambda/<function>/
# bootstrap.zip; the script prints each one's path and size. How long a cold build
# takes, and the sizes: BENCHMARKS.md, "Lambda packages". What they hold and how SAM
# builds the same binaries: docs/lambdas.md, "Building".
set -euo pipefail
cd "$(dirname "$0")/.."

FUNCTIONS=(materializer committer compactor)
TARGET=aarch64-unknown-linux-gnu
missing=0

need() {
    echo "scripts/package.sh: $1" >&2
    missing=1
}

command -v cargo >/dev/null || need "cargo not found: install Rust with rustup (https://rustup.rs)."
if ! cargo lambda --version >/dev/null 2>&1; then
    need "cargo-lambda not found: pip install cargo-lambda==1.9.2 (in a virtualenv on your PATH), or see https://www.cargo-lambda.info/guide/installation.html"
fi
# cargo-lambda cross-links with Zig: a `zig` on the PATH, or Python's `ziglang` package
# (what `pip install cargo-lambda` brings along) for the `python3` on the PATH.
if ! command -v zig >/dev/null && ! python3 -c "import ziglang" 2>/dev/null; then
    need "Zig not found: pip install ziglang (into the same virtualenv as cargo-lambda), or put zig 0.13+ on the PATH."
fi
if command -v rustup >/dev/null; then
    if ! rustup target list --installed | grep -qx "$TARGET"; then
        need "the Rust target $TARGET is not installed: rustup target add $TARGET"
    fi
else
    echo "scripts/package.sh: no rustup; assuming your Rust toolchain has the $TARGET standard library." >&2
fi
if [ "$missing" = 1 ]; then
    exit 1
fi

# `--bin`, as `sam build` selects each function: the same features (cargo resolves the whole
# workspace's), so the zips hold what SAM would build and a later `sam build` finds the
# cargo build done.
bins=()
for f in "${FUNCTIONS[@]}"; do
    bins+=(--bin "$f")
done
started=$(date +%s)
cargo lambda build --release --arm64 --output-format zip "${bins[@]}" "$@"
elapsed=$(($(date +%s) - started))

target_dir=$(cargo metadata --no-deps --format-version 1 | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
echo "Built in ${elapsed} s:"
for f in "${FUNCTIONS[@]}"; do
    zip="$target_dir/lambda/$f/bootstrap.zip"
    if [ ! -f "$zip" ]; then
        echo "scripts/package.sh: $zip is missing after the build" >&2
        exit 1
    fi
    zipped=$(stat -c %s "$zip")
    # The bootstrap's own size, as Lambda unpacks it (`unzip` lists it without extracting).
    unzipped=$(unzip -Zt "$zip" 2>/dev/null | awk '{print $3}' || true)
    awk -v zip="$zip" -v z="$zipped" -v u="${unzipped:-0}" 'BEGIN {
        printf "  %s  %.1f MiB", zip, z / 1048576
        if (u > 0) printf " (bootstrap %.1f MiB unzipped)", u / 1048576
        printf "\n"
    }'
done
