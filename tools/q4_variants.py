#!/usr/bin/env python3
"""Which 4-bit format: perplexity of the default model with its weight matrices rounded to each
candidate, measured by `webmamba perplexity` on the CPU backend (issue 30: "symmetric like Q4_0 or
with a minimum like Q4_1, chosen by measured perplexity").

Independent of webmamba's own quantizer: the rounding is done here in numpy from GGUF's
definitions (ggml-quants.c, quantize_row_q4_0_ref / quantize_row_q4_1_ref; Q4_1's scale and
minimum rounded to f16 before the quants, as webmamba does), written into a copy of the checkpoint
as f32, and the copy is scored on the CPU, which computes in f32 from the file. Groups run along
the row-major data. The matrices rounded are 2-D tensors with rows a multiple of 64 long (the
default model has no others that q4 would take); rows a multiple of 32 only fall back to int8 as
on the GPU (one f32 scale = the group's largest |w| per 32, q = round(127 w / scale)). So the
Q4_1/64 row reproduces `webmamba perplexity --backend gpu --weights q4` (webmamba's q4).

    python3 -m venv /tmp/pyenv && /tmp/pyenv/bin/pip install numpy safetensors
    cargo build --features cli
    /tmp/pyenv/bin/python tools/q4_variants.py [--model www/models/shakespeare-mamba-3m]
        [--text www/models/shakespeare-mamba-3m/heldout-tempest.txt] [--context 1024]
"""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file


def load_f32(path):
    """Every tensor of a safetensors file as f32 (numpy has no bfloat16: its bits are read as the
    top half of an f32's)."""
    raw = Path(path).read_bytes()
    n = int.from_bytes(raw[:8], "little")
    header = json.loads(raw[8:8 + n])
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        data = raw[8 + n + a:8 + n + b]
        if t["dtype"] == "BF16":
            v = (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif t["dtype"] == "F16":
            v = np.frombuffer(data, dtype="<f2").astype(np.float32)
        elif t["dtype"] == "F32":
            v = np.frombuffer(data, dtype="<f4").copy()
        else:
            raise SystemExit(f"{path}: {name} is {t['dtype']}")
        out[name] = v.reshape(t["shape"])
    return out


def f16(x):
    return x.astype(np.float16).astype(np.float32)


def q4_0(w, group):
    """Q4_0 (ggml): d = the largest-magnitude value / -8 (stored f16), q = min(15, trunc(x/d + 8.5))."""
    g = w.reshape(-1, group)
    at = np.argmax(np.abs(g), axis=1)
    mx = g[np.arange(len(g)), at]
    d = f16(mx / -8.0)
    inv = np.where(d != 0, 1.0 / np.where(d != 0, d, 1), 0).astype(np.float32)
    q = np.clip(np.trunc(g * inv[:, None] + 8.5), 0, 15)
    return ((q - 8) * d[:, None]).reshape(w.shape), 4 + 16 / group


def q4_1(w, group):
    """Q4_1 as webmamba stores it (src/gpu_kit/format.rs): m = the minimum and d = (max - m) / 15,
    both rounded to f16 BEFORE the quants are computed (ggml computes them from the f32 values),
    q = clamp(round((x - m) / d), 0, 15), rounding halves up."""
    g = w.reshape(-1, group)
    m = f16(g.min(axis=1))
    d = f16((g.max(axis=1) - m) / np.float32(15.0))
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1), 0).astype(np.float32)
    q = np.clip(np.floor((g - m[:, None]) * inv[:, None] + 0.5), 0, 15)
    return (q * d[:, None] + m[:, None]).reshape(w.shape), 4 + 32 / group


def int8(w):
    """The GPU's int8 fallback: per 32 along a row, scale = max |w| (f32), q = round(127 w / scale)."""
    g = w.reshape(-1, 32)
    scale = np.abs(g).max(axis=1)
    inv = np.where(scale > 0, 127.0 / np.where(scale > 0, scale, 1), 0).astype(np.float32)
    q = np.clip(np.round(g * inv[:, None]), -127, 127)
    return (q / 127.0 * scale[:, None]).astype(np.float32).reshape(w.shape)


VARIANTS = {
    "Q4_0/32": lambda w: q4_0(w, 32),
    "Q4_1/32": lambda w: q4_1(w, 32),
    "Q4_0/64": lambda w: q4_0(w, 64),
    "Q4_1/64": lambda w: q4_1(w, 64),
}


def rounded_copy(model, out, quantize):
    """`model` with its 2-D tensors rounded (rows % 64 == 0: `quantize`; % 32: int8), as f32."""
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(model, out, ignore=shutil.ignore_patterns("*.safetensors", "*.index.json"))
    bits, n = 0.0, 0
    for f in sorted(model.glob("*.safetensors")):
        tensors = load_f32(f)
        for k, v in tensors.items():
            if v.ndim == 2 and v.shape[1] % 64 == 0:
                tensors[k], b = quantize(v)
                bits, n = bits + b * v.size, n + v.size
            elif v.ndim == 2 and v.shape[1] % 32 == 0:
                tensors[k] = int8(v)
        save_file(tensors, str(out / f.name))
    for f in model.glob("*.index.json"):
        shutil.copy(f, out / f.name)
    return bits / max(n, 1)


def perplexity(webmamba, model, text, context):
    got = subprocess.run(
        [webmamba, "perplexity", "--model", str(model), "--text", str(text), "--context", str(context),
         "--backend", "cpu", "--json"],
        check=True, capture_output=True, text=True)
    return json.loads(got.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="www/models/shakespeare-mamba-3m")
    p.add_argument("--text", default="www/models/shakespeare-mamba-3m/heldout-tempest.txt")
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--webmamba", default="target/debug/webmamba")
    p.add_argument("--work", default="target/q4-variants")
    a = p.parse_args()
    model, work = Path(a.model), Path(a.work)
    base = perplexity(a.webmamba, model, a.text, a.context)
    rows = [("as stored (f32 on the CPU)", None, base)]
    for name, quantize in VARIANTS.items():
        copy = work / name.replace("/", "-")
        bits = rounded_copy(model, copy, quantize)
        rows.append((name, bits, perplexity(a.webmamba, copy, a.text, a.context)))
    print(f"| format | bits/weight | perplexity (context {a.context}, {base['scored_tokens']} tokens scored) | vs f32 |")
    print("|---|---|---|---|")
    for name, bits, r in rows:
        delta = 100 * (r["perplexity"] / base["perplexity"] - 1)
        b = f"{bits:.3g}" if bits else "32"
        print(f"| {name} | {b} | {r['perplexity']:.4f} ± {r['uncertainty']:.4f} | {delta:+.2f}% |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
