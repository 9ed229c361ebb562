#!/usr/bin/env bash
# Which rows the wasm decode GEMV reads side by side, one thread, GB/s of bf16 weights from
# memory (docs/BENCHMARKS.md, "Rows from far apart"):
#   tools/bench/gemv-order/run.sh
# `neighbours`: rows 4i … 4i+3 per dot (webmamba before 2026-12-05); `quarters`: rows i, q+i,
# 2q+i, 3q+i (native webmamba); `eighths`: eight rows, one from each eighth. Two f32x4 of
# accumulators per row, or one (`_one`: both halves of each eight columns added into it;
# `eighths_one` is src/cpu/simd128.rs's dot now, DOT_ROWS = 8 in wasm).
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
RUSTFLAGS="-C target-feature=+simd128" cargo build -q --release --target wasm32-unknown-unknown
node run.mjs "$CARGO_TARGET_DIR/wasm32-unknown-unknown/release/gemv_order.wasm"
