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
# defaults ("130m 790m 2.8b granite-h-1b", 3); FORMATS the weight formats (f16); SHAPE_TIMEOUT
# the seconds one shape may take (600); AB_SHAPES the shapes of the closing A/B of the GEMV
# kernels' subgroup sums ("130m 2.8b"). device-pack.sh builds a binary for it without LTO.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${1:-target/release/webmamba}
OUT=${OUT:-target/bench/device}
SHAPES=${SHAPES:-130m 790m 2.8b granite-h-1b}
RUNS=${RUNS:-3}
mkdir -p "$OUT"

source tools/bench/device-env.sh

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
  echo "== $shape (${FORMATS:-f16} weights, wgpu backend $WGPU_BACKEND, $RUNS runs)"
  timeout "${SHAPE_TIMEOUT:-600}" "$BIN" bench --suite --json --shape "$shape" --backends gpu --formats "${FORMATS:-f16}" --runs "$RUNS" \
    >"$OUT/suite-$shape.json" || { echo "$shape: bench failed (rc $?)"; continue; }
  python3 - "$OUT/suite-$shape.json" "${BANDWIDTH_GBS:-0}" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
bw = float(sys.argv[2]) * 1e9
print(f"adapter: {d['adapter']}")
for label, g in d["backends"].items():
    if not label.startswith("gpu-"):
        continue
    weights = d["gpu_memory_bytes"][label]["weights"]
    dec = g["decode_tok_s"]
    print(f"-- {label}")
    print("prefill tok/s  128: {:.0f}  512: {:.0f}  2048: {:.0f}".format(*(g["prefill_tok_s"][n]["median"] for n in ("128", "512", "2048"))))
    line = f"decode {dec['median']:.1f} tok/s ({dec['min']:.1f}–{dec['max']:.1f}); {weights / 1e9:.2f} GB of weights per token"
    if bw:
        limit = bw / weights
        line += f"; bandwidth limit {limit:.0f} tok/s: {dec['median'] / limit:.1%} of it"
    print(line)
    per = g["decode_per_token_tok_s"]
    print(f"decode, one submit and a V-float readback per token: {per['median']:.1f} tok/s ({per['min']:.1f}–{per['max']:.1f})")
    gemm = d["gemm_gflop_s"][label]
    shape = d["gemm_shape"]
    print(f"GEMM {gemm['median']:.0f} GFLOP/s ({gemm['min']:.0f}–{gemm['max']:.0f}) at {shape['rows']} × {shape['k']} × {shape['n']}")
    print(f"dispatches per token: {d['dispatches_per_token'][label]:.0f} ({d['model']['n_layer']} layers); GEMV sums with subgroups: {d.get('subgroups', {}).get(label)}")
    rec, share = d.get("record_us_per_dispatch", {}).get(label), d.get("record_share_of_decode", {}).get(label)
    if rec and share:
        print(f"recording a greedy batch on the CPU: {rec['median']:.2f} µs per dispatch, {share['median']:.0%} of the decode's time per step")
    dt = d.get("dispatch_times", {}).get(label)
    if dt:
        busy = sum(k["busy_us"] for k in dt["kernels"])
        gaps = sum(k["gap_us"] for k in dt["kernels"])
        print(f"one decode step stamped per dispatch: {dt['span_us']:.1f} µs first to last stamp, {busy:.1f} µs in kernels, {gaps:.1f} µs between them")
        for k in sorted(dt["kernels"], key=lambda k: -(k["busy_us"] + k["gap_us"])):
            print(f"  {k['kernel']:<24} {k['dispatches']:>4} dispatches  {k['busy_us']:8.1f} µs running  {k['gap_us']:8.1f} µs before")
    print(f"scan_speedup_512 {g['scan_speedup_512']['median']:.1f}  resume_speedup_2048 {g['resume_speedup_2048']['median']:.1f}  capture_overhead_512 {g['capture_overhead_512']['median']:.3f}")
EOF
done

# Subgroup sums against the workgroup-memory tree (the GEMV kernels' last step,
# src/kernels/lanes.rs), side by side in one suite run per shape: gpu-f16 vs gpu-f16-no-subgroups.
for shape in ${AB_SHAPES:-130m 2.8b}; do
  echo "== $shape: GEMV sums with subgroups vs without (bench --suite --compare-subgroups, $RUNS runs)"
  timeout "${SHAPE_TIMEOUT:-600}" "$BIN" bench --suite --json --compare-subgroups --shape "$shape" --backends gpu --formats f16 --runs "$RUNS" \
    >"$OUT/subgroups-$shape.json" || { echo "$shape: bench failed (rc $?)"; continue; }
  python3 - "$OUT/subgroups-$shape.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
on, off = "gpu-f16", "gpu-f16-no-subgroups"
print(f"subgroups used: {d['subgroups'][on]} / {d['subgroups'][off]}")
for key in ("decode_tok_s", "decode_per_token_tok_s"):
    a, b = d[key][on]["median"], d[key][off]["median"]
    print(f"{key}: {a:.1f} with, {b:.1f} without: {a / b:.3f}x")
a, b = d["prefill_tok_s"][on]["512"]["median"], d["prefill_tok_s"][off]["512"]["median"]
print(f"prefill 512 tok/s: {a:.0f} with, {b:.0f} without: {a / b:.3f}x")
for label in (on, off):
    dt = d["dispatch_times"].get(label)
    if dt:
        gemv = [k for k in dt["kernels"] if k["kernel"] in ("gemv_coalesced", "decode_in_proj", "decode_out_proj")]
        print(f"{label}: " + ", ".join(f"{k['kernel']} {k['busy_us'] / k['dispatches']:.2f} µs" for k in gemv) + " per dispatch")
EOF
done
