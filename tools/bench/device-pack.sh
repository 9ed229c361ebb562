#!/usr/bin/env bash
# Packs what a GPU device machine runs — it has no Rust and reaches no registry — into .dev/
# (git-ignored; name it, and .gl/ with the Vulkan loader packages, in the device call's `carry`):
# .dev/pack.tar.xz holds the CLI (`webmamba`, for device.sh) and every integration test binary
# that opens a GPU (for device-tests.sh), and .dev/manifest_dir the path they were built at
# (tests read fixtures from it). Built in release without LTO, stripped: one build of the crate
# serves the CLI and the tests (fat LTO would link each test binary for minutes on 2 cores), and
# one solid xz archive shares the binaries' common code (30 MB for the CLI and 24 test binaries,
# 2026-12-04). .gl/: `apt-get download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0
# libgles2` (amd64) for machines without a Vulkan loader; device-env.sh unpacks them there.
#
#   tools/bench/device-pack.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR=target/device CARGO_PROFILE_RELEASE_LTO=false \
  CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 CARGO_PROFILE_RELEASE_STRIP=symbols
cargo build --release --features cli --bin webmamba
args=()
for t in $(grep -l 'common::gpu\|gpu(' tests/*.rs); do args+=(--test "$(basename "$t" .rs)"); done
stage=target/device/pack
rm -rf "$stage" && mkdir -p "$stage/tests" .dev
cargo test --release --features cli --no-run "${args[@]}" --message-format=json |
  python3 -c '
import json, os, shutil, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        shutil.copy(m["executable"], os.path.join(sys.argv[1], m["target"]["name"]))
' "$stage/tests"
cp target/device/release/webmamba "$stage/"
XZ_OPT=-9 tar -cJf .dev/pack.tar.xz -C "$stage" .
pwd >.dev/manifest_dir
ls -l .dev/pack.tar.xz
