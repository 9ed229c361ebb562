#!/usr/bin/env python3
"""Checks the committed default model against HF transformers, independently of training.

1. Loads www/models/shakespeare-mamba-3m with HF `MambaForCausalLM` (f32 math on the bf16
   weights) and re-runs the greedy continuation of hf_reference.json's prompt: it must give
   exactly the recorded `greedy_ids` (so the reference is reproducible from the committed
   folder, not only from the training run).
2. With `--webmamba BIN` (a built `webmamba` CLI), also runs `BIN logits` on the prompt plus
   that continuation, for each `--backend`, and compares every position's logits with HF's
   whole-sequence forward (max abs difference must be below `--tol`) and their argmaxes.

Usage:
    python tools/train/check_hf.py [--model DIR] [--webmamba target/debug/webmamba] [--backend cpu gpu]
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
from transformers import MambaForCausalLM


def main() -> int:
    root = Path(__file__).resolve().parents[2]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(root / "www" / "models" / "shakespeare-mamba-3m"))
    ap.add_argument("--webmamba", help="path of a built webmamba CLI")
    ap.add_argument("--backend", nargs="+", default=["cpu"], choices=["cpu", "gpu"])
    ap.add_argument("--tol", type=float, default=1e-4)
    args = ap.parse_args()

    torch.manual_seed(0)
    model_dir = Path(args.model)
    ref = json.loads((model_dir / "hf_reference.json").read_text())
    model = MambaForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    prompt = ref["prompt_ids"]
    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=len(ref["greedy_ids"]), do_sample=False)
    greedy = out[0].tolist()[len(prompt):]
    ok = greedy == ref["greedy_ids"]
    print(f"HF greedy from the committed folder == hf_reference.json: {ok}")
    if not ok:
        print(f"  recorded {ref['greedy_ids']}\n  now      {greedy}")
        return 1

    if args.webmamba:
        ids = prompt + greedy
        with torch.no_grad():
            hf = model(torch.tensor([ids])).logits[0].numpy()
        for backend in args.backend:
            with tempfile.TemporaryDirectory() as tmp:
                npy = Path(tmp) / "logits.npy"
                subprocess.run([args.webmamba, "logits", "--model", str(model_dir), "--backend", backend,
                                "--ids", ",".join(map(str, ids)), "--out", str(npy)], check=True)
                ours = np.load(npy)
            diff = float(np.abs(ours - hf).max())
            same_argmax = bool((ours.argmax(-1) == hf.argmax(-1)).all())
            good = ours.shape == hf.shape and diff < args.tol and same_argmax
            print(f"webmamba --backend {backend}: {len(ids)} positions, max |logits - HF| = {diff:.2e} "
                  f"(tol {args.tol:g}), argmax equal at every position: {same_argmax}")
            ok = ok and good
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
