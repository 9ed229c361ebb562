#!/usr/bin/env bash
# The benchmark suite on a real GPU (issue 13, part 8): one prepared command for a machine with
# a GPU and a Vulkan driver. Runs `webmamba bench --suite --json` on Vulkan with f16 weights for
# the 130M, 790M and 2.8B Mamba shapes and the Granite-4.0-H-1B hybrid (seeded random weights of
# the published shapes) and prints, per shape, decode tok/s against the GPU's bandwidth-bound
# limit (f16 weight bytes read per token ÷ memory bandwidth) as a fraction, the dispatches per
# token, the prefill matmul's GFLOP/s (against the GPU's FP32 peak by hand), and the prefill
# figures. JSON per shape under $OUT (or
# target/bench/device/).
#
#   tools/bench/device.sh [WEBMAMBA_BINARY]      (default target/release/webmamba)
#
# The binary is built here (`cargo build --release --features cli`) and carried: device
# machines reach no registry. Bandwidth: BANDWIDTH_GBS, else looked up from nvidia-smi's GPU
# name (the vendor's figure), else the fraction is not printed. SHAPES and RUNS override the
# defaults ("130m 790m 2.8b granite-h-1b", 3).
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-target/release/webmamba}
OUT=${OUT:-target/bench/device}
SHAPES=${SHAPES:-130m 790m 2.8b granite-h-1b}
RUNS=${RUNS:-3}
mkdir -p "$OUT"

# Vulkan loaders carried in .gl/ (see /work/.library/device/README.md), if any.
if ! ldconfig -p 2>/dev/null | grep -q libvulkan && ls .gl/*.deb >/dev/null 2>&1; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
[ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ] &&
  export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 || true)
if [ -z "${BANDWIDTH_GBS:-}" ]; then
  case "$gpu" in
    *H200*) BANDWIDTH_GBS=4800 ;;
    *H100*SXM* | *H100\ 80GB\ HBM3*) BANDWIDTH_GBS=3350 ;;
    *H100*) BANDWIDTH_GBS=2000 ;;
    *A100*80GB*) BANDWIDTH_GBS=2039 ;;
    *A100*) BANDWIDTH_GBS=1555 ;;
    *L40S* | *L40*) BANDWIDTH_GBS=864 ;;
    *L4*) BANDWIDTH_GBS=300 ;;
    *4090*) BANDWIDTH_GBS=1008 ;;
    *) BANDWIDTH_GBS= ;;
  esac
fi
echo "GPU: ${gpu:-unknown} · bandwidth: ${BANDWIDTH_GBS:-unknown} GB/s (vendor figure unless BANDWIDTH_GBS was set)"

for shape in $SHAPES; do
  echo "== $shape (f16 weights, Vulkan, $RUNS runs)"
  WGPU_BACKEND=vulkan "$BIN" bench --suite --json --shape "$shape" --backends gpu --formats f16 --runs "$RUNS" \
    >"$OUT/suite-$shape.json"
  python3 - "$OUT/suite-$shape.json" "${BANDWIDTH_GBS:-0}" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
bw = float(sys.argv[2]) * 1e9
g = d["backends"]["gpu-f16"]
weights = d["gpu_memory_bytes"]["gpu-f16"]["weights"]
dec = g["decode_tok_s"]
print(f"adapter: {d['adapter']}")
print("prefill tok/s  128: {:.0f}  512: {:.0f}  2048: {:.0f}".format(*(g["prefill_tok_s"][n]["median"] for n in ("128", "512", "2048"))))
line = f"decode {dec['median']:.1f} tok/s ({dec['min']:.1f}–{dec['max']:.1f}); {weights / 1e9:.2f} GB of f16 weights per token"
if bw:
    limit = bw / weights
    line += f"; bandwidth limit {limit:.0f} tok/s: {dec['median'] / limit:.1%} of it"
print(line)
gemm = d["gemm_gflop_s"]["gpu-f16"]
shape = d["gemm_shape"]
print(f"GEMM {gemm['median']:.0f} GFLOP/s ({gemm['min']:.0f}–{gemm['max']:.0f}) at {shape['rows']} × {shape['k']} × {shape['n']} (f16 weights)")
print(f"dispatches per token: {d['dispatches_per_token']['gpu-f16']:.0f} ({d['model']['n_layer']} layers)")
print(f"scan_speedup_512 {g['scan_speedup_512']['median']:.1f}  resume_speedup_2048 {g['resume_speedup_2048']['median']:.1f}  capture_overhead_512 {g['capture_overhead_512']['median']:.3f}")
EOF
done
