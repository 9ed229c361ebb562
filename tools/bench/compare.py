#!/usr/bin/env python3
"""webmamba's CPU backend against the peers, side by side in one run (issue 13, part 3).

The same seeded random weights of a published shape (written by `webmamba random`, f32) run in
webmamba's native CPU backend, in HF transformers (PyTorch CPU, `AutoModelForCausalLM`: Mamba's,
LFM2's or Qwen3.5's torch path; `--shape lfm2-1.2b`, `qwen3.5-0.8b`) and in llama.cpp (built from the source inside PyPI's `llama-cpp-python`, the folder
converted to GGUF by the converter shipped in that source), one after the other, each at every
thread count asked for. The figures, per engine and thread count, as in docs/BENCHMARKS.md:

  prefill_tok_s   one forward pass over 128 / 512 prompt tokens from a fresh state
  decode_tok_s    128 greedy tokens after a 128-token prompt (HF: generate(129) − generate(1))

medians of --runs with min and max, then one table of ratios (webmamba ÷ each peer). Also this
machine's memory bandwidth (a GEMV over a 1 GiB f32 matrix in PyTorch, per thread count) and the
bandwidth-bound decode limit: the weight bytes one decoded token reads ÷ that bandwidth.

Setup once: tools/bench/setup.sh. Then (the venv's python):
  python tools/bench/compare.py [--shape 130m] [--runs 3] [--threads 1,2] [--json]
Needs an otherwise idle machine: a parallel build cuts the peers' figures by up to 10x.
"""

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "target/release/webmamba"
BENCH = ROOT / "target/bench"
LLAMA_SRC = BENCH / "llama-cpp-python-src"  # tools/bench/setup.sh extracts the sdist here
PROMPTS = (128, 512)
DECODE = 128


def ids(n, vocab, salt=0):
    """n token ids spread over the vocabulary, the same for every engine."""
    return [(i * 7919 + salt * 104729 + 1) % vocab for i in range(n)]


def summary(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)}


def model_dir(shape):
    """The f32 random checkpoint of `shape` (written once)."""
    d = BENCH / f"random-{shape}-f32"
    if not (d / "config.json").exists():
        subprocess.run([CLI, "random", "--shape", shape, "--dtype", "f32", "--out", d], check=True)
    return d


def gguf_file(folder):
    """The folder converted to an f32 GGUF (once). The converter is given the weights and config
    only: without tokenizer.json it writes the GPT-NeoX vocabulary it ships (our random folders
    carry a word-level tokenizer its BPE check rejects; token ids are all a benchmark feeds)."""
    out = folder.with_suffix(".gguf")
    if out.exists():
        return out
    bare = BENCH / f"{folder.name}-weights-only"
    bare.mkdir(exist_ok=True)
    for name in ("config.json", "model.safetensors"):
        if not (bare / name).exists():
            (bare / name).symlink_to(folder / name)
    converter = next(LLAMA_SRC.glob("*/vendor/llama.cpp/convert_hf_to_gguf.py"), None)
    if converter is None:
        sys.exit(f"no llama.cpp converter under {LLAMA_SRC}: run tools/bench/setup.sh")
    subprocess.run([sys.executable, converter, bare, "--outtype", "f32", "--outfile", out], check=True)
    return out


def bandwidth(threads, runs):
    """Bytes per second a GEMV over a 1 GiB f32 matrix reads (the best of `runs`)."""
    import torch

    torch.set_num_threads(threads)
    a = torch.randn(1 << 16, 1 << 12)
    x = torch.randn(1 << 12)
    torch.mv(a, x)
    best = min(timed(lambda: torch.mv(a, x)) for _ in range(max(runs, 3)))
    return a.numel() * 4 / best


def timed(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def run_webmamba(folder, threads, runs):
    """The suite's CPU figures (`webmamba bench --suite --json --backends cpu --threads N`)."""
    out = subprocess.run(
        [CLI, "bench", "--suite", "--json", "--backends", "cpu", "--threads", str(threads), "--runs", str(runs),
         "--model", folder],
        check=True, capture_output=True, text=True,
    ).stdout
    cpu = json.loads(out)["backends"][f"cpu-{threads}t"]
    return {
        "prefill_tok_s": {str(n): cpu["prefill_tok_s"][str(n)] for n in PROMPTS},
        "decode_tok_s": cpu["decode_tok_s"],
    }


def run_hf(folder, threads, runs, vocab):
    import torch
    from transformers import AutoModelForCausalLM

    torch.set_num_threads(threads)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    prefill = {str(n): [] for n in PROMPTS}
    decode = []
    with torch.inference_mode():
        model(torch.tensor([ids(8, vocab)]), use_cache=False, logits_to_keep=1)  # warm-up
        for run in range(runs):
            for n in PROMPTS:
                x = torch.tensor([ids(n, vocab, run)])
                prefill[str(n)].append(n / timed(lambda: model(x, use_cache=False, logits_to_keep=1)))
            x = torch.tensor([ids(128, vocab, run)])
            gen = dict(do_sample=False, pad_token_id=0, eos_token_id=None)
            one = timed(lambda: model.generate(x, max_new_tokens=1, min_new_tokens=1, **gen))
            many = timed(lambda: model.generate(x, max_new_tokens=DECODE + 1, min_new_tokens=DECODE + 1, **gen))
            decode.append(DECODE / (many - one))
    return {"prefill_tok_s": {k: summary(v) for k, v in prefill.items()}, "decode_tok_s": summary(decode)}


def run_llama(gguf, threads, runs, vocab):
    import llama_cpp
    import numpy as np

    llm = llama_cpp.Llama(
        model_path=str(gguf), n_ctx=4096, n_batch=512, n_ubatch=512, n_threads=threads,
        n_threads_batch=threads, verbose=False,
    )
    n_vocab = llm.n_vocab()

    def last_logits():
        ptr = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
        return np.ctypeslib.as_array(ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(n_vocab,))

    def fresh(tokens):
        llm.reset()
        llama_cpp.llama_memory_clear(llm._ctx.memory, True)  # the recurrent state too
        llm.eval(tokens)

    fresh(ids(8, vocab))  # warm-up
    prefill = {str(n): [] for n in PROMPTS}
    decode = []
    for run in range(runs):
        for n in PROMPTS:
            prefill[str(n)].append(n / timed(lambda: fresh(ids(n, vocab, run))))
        fresh(ids(128, vocab, run))
        t0 = time.perf_counter()
        for _ in range(DECODE):
            llm.eval([int(last_logits().argmax())])
        decode.append(DECODE / (time.perf_counter() - t0))
    return {"prefill_tok_s": {k: summary(v) for k, v in prefill.items()}, "decode_tok_s": summary(decode)}


def table(results, bw, weight_bytes, meta):
    rows = [
        "| engine | threads | prefill 128 tok/s | prefill 512 tok/s | decode tok/s |",
        "|---|---|---|---|---|",
    ]
    fmt = lambda s: f"{s['median']:.1f} ({s['min']:.1f}–{s['max']:.1f})"
    for r in results:
        p = r["prefill_tok_s"]
        rows.append(f"| {r['engine']} | {r['threads']} | {fmt(p['128'])} | {fmt(p['512'])} | {fmt(r['decode_tok_s'])} |")
    ratio = lambda a, b: f"{a['median'] / b['median']:.2f}x"
    ratios = lambda a, b: (
        f"{ratio(a['prefill_tok_s']['128'], b['prefill_tok_s']['128'])} | "
        f"{ratio(a['prefill_tok_s']['512'], b['prefill_tok_s']['512'])} | {ratio(a['decode_tok_s'], b['decode_tok_s'])} |"
    )
    ours = {r["threads"]: r for r in results if r["engine"] == "webmamba"}
    rows += ["", "| webmamba ÷ (same threads) | threads | prefill 128 | prefill 512 | decode |", "|---|---|---|---|---|"]
    for r in results:
        if r["engine"] != "webmamba" and r["threads"] in ours:
            rows.append(f"| {r['engine']} | {r['threads']} | {ratios(ours[r['threads']], r)}")
    one = ours.get(1)
    for t, r in ours.items():
        if one and t > 1:
            rows.append(f"| webmamba at 1 thread | {t} | {ratios(r, one)}")
    rows += ["", "| threads | memory bandwidth (GEMV read) | bandwidth-bound decode limit |", "|---|---|---|"]
    for t, b in bw.items():
        rows.append(f"| {t} | {b / 1e9:.1f} GB/s | {b / weight_bytes:.1f} tok/s ({weight_bytes / 1e6:.0f} MB of weights per token) |")
    return f"{meta}\n\n" + "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="130m")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", default=f"1,{os.cpu_count()}")
    ap.add_argument("--engines", default="webmamba,hf,llama.cpp")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    threads = sorted({int(t) for t in a.threads.split(",")})
    engines = a.engines.split(",")
    if not CLI.exists():
        subprocess.run(["cargo", "build", "--release", "--features", "cli"], cwd=ROOT, check=True)
    folder = model_dir(a.shape)
    config = json.loads((folder / "config.json").read_text())
    vocab = config.get("vocab_size") or config["text_config"]["vocab_size"]  # Qwen3.5's: its text model's
    weight_bytes = (folder / "model.safetensors").stat().st_size  # f32: every weight is read once per token
    gguf = gguf_file(folder) if "llama.cpp" in engines else None

    results = []
    log = lambda m: print(m, file=sys.stderr, flush=True)
    def measure(engine, threads, run):
        log(f"{engine}, {threads} thread(s)…")
        results.append({"engine": engine, "threads": threads, **run()})
        log(json.dumps(results[-1]))

    for t in threads:
        if "webmamba" in engines:
            measure("webmamba", t, lambda: run_webmamba(folder, t, a.runs))
        if "hf" in engines:
            measure("hf", t, lambda: run_hf(folder, t, a.runs, vocab))
        if "llama.cpp" in engines:
            measure("llama.cpp", t, lambda: run_llama(gguf, t, a.runs, vocab))
    bw = {t: bandwidth(t, a.runs) for t in threads}
    meta = (
        f"{a.shape}-shaped random model (f32, {weight_bytes / 1e6:.0f} MB), {os.cpu_count()} CPUs, "
        f"median (min–max) of {a.runs} runs"
    )
    if a.json:
        print(json.dumps({
            "model": folder.name, "weight_bytes": weight_bytes, "runs": a.runs, "results": results,
            "bandwidth_bytes_s": {str(t): b for t, b in bw.items()},
            "decode_limit_tok_s": {str(t): b / weight_bytes for t, b in bw.items()},
        }, indent=1))
    else:
        print(table(results, bw, weight_bytes, meta))


if __name__ == "__main__":
    main()
