#!/usr/bin/env bash
# The CPU backend's GEMM per instruction set, one thread, GMAC/s (multiply-adds per second) on
# the 130M model's prefill shapes — what bounds the wasm CPU fallback's prefill against native
# (docs/BENCHMARKS.md, "Relaxed SIMD"):
#   tools/bench/gemm/run.sh
# Natively matrixmultiply picks its kernel at run time (AVX-512 where the CPU has it); its
# compile-time MMTEST_FEATURE restricts the choice (avx,avx2,fma: a CPU without AVX-512, as
# most laptops; sse2: 128-bit vectors without FMA, the width of wasm SIMD128). In wasm: the
# plain SIMD128 kernel and the relaxed-SIMD one (fused multiply-adds), run by node.
set -euo pipefail
cd "$(dirname "$0")"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
echo "| kernel | in_proj 256×768×3072 | out_proj 256×1536×768 | x_proj 256×1536×80 |"
echo "|---|---|---|---|"
for features in "" avx,avx2,fma sse2; do
  # a separate folder per feature set: MMTEST_FEATURE is read when matrixmultiply compiles
  out=$(MMTEST_FEATURE=$features CARGO_TARGET_DIR="$CARGO_TARGET_DIR/native-${features:-all}" \
    cargo run -q --release 2>/dev/null)
  echo "| native ${features:-(as picked at run time)} | $out |"
done
for flags in +simd128 +simd128,+relaxed-simd; do
  RUSTFLAGS="-C target-feature=$flags" CARGO_TARGET_DIR="$CARGO_TARGET_DIR/wasm-$flags" \
    cargo build -q --release --target wasm32-unknown-unknown
  module="$CARGO_TARGET_DIR/wasm-$flags/wasm32-unknown-unknown/release/gemm_bench.wasm"
  node_flags=()
  # node before 22 (V8 before 11.4) has relaxed SIMD behind a flag
  if [[ $flags == *relaxed* ]] && node --v8-options | grep -q -- --experimental-wasm-relaxed-simd; then
    node_flags=(--experimental-wasm-relaxed-simd)
  fi
  echo "| wasm $flags (node $(node --version)) | $(node "${node_flags[@]}" run.mjs "$module") |"
done
