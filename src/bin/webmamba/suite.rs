//! `webmamba bench --suite`: the benchmark suite. For each backend (the CPU, and the GPU in each
//! weight format) on one model, measured one after the other in one run, each figure the median
//! of `--runs` runs with its min and max:
//! - prefill tok/s at 128, 512 and 2,048 tokens (from a zero state, logits of the last token);
//! - decode tok/s: 128 greedy steps after a 128-token prompt, as `generate` runs them (on the
//!   GPU: batches of `GREEDY_BATCH` steps picked and fed on the GPU, one submit and a few bytes
//!   read back per batch); on the GPU also `decode_per_token_tok_s`, one submit per token and
//!   its V logits read back for a CPU argmax (the path before GPU-side picking), and
//!   `dispatches_per_token`: the compute dispatches that path records per token (counted, not
//!   timed: `webmamba::gpu::dispatches_recorded`);
//! - `scan_speedup_512`: 512 tokens in one forward pass (the chunked parallel scan; the median
//!   of the plain prefills timed for `capture_overhead_512`) vs the same tokens one forward pass
//!   each (the decode path);
//! - `resume_speedup_2048`: time to the first token of a 16-token follow-up after a 2,048-token
//!   history, resumed from its cached checkpoint, vs re-reading the 2,064 tokens;
//! - `capture_overhead_512`: extra time of a 512-token prefill that writes a checkpoint every 64
//!   tokens (8 states, the cache's dense default) over one that writes none, as a fraction (the
//!   medians of 5 of each, alternated, per run);
//! - on the GPU, `record_us_per_dispatch`: the CPU time to record one greedy batch (its
//!   commands built and dropped unsubmitted, after the timed decode) per dispatch, and
//!   `record_share_of_decode`: that time per step over the batched decode's time per step — near
//!   1, decode waits on the CPU's recording, not on the GPU;
//! - on the GPU where the device stamps inside passes (native Vulkan, Metal, DX12),
//!   `dispatch_times`: `TIMED_STEPS` decode steps (the per-token path) with every dispatch
//!   stamped on the GPU ([`webmamba::gpu::start_dispatch_timing`]), per kernel: dispatches,
//!   µs between each one's two stamps (the kernel with the barrier before it and its launch)
//!   and µs from the previous dispatch's end stamp (near zero on Vulkan), per step, and the
//!   step's span from its first stamp to its last;
//! - GPU memory by category (a hybrid's key/value caches and the cache's key/value pages too);
//! - on the GPU, `subgroups`: whether its GEMV kernels summed across workgroups with subgroup
//!   operations (`webmamba::kernels::lanes`; `bench --compare-subgroups` runs both);
//! - on the GPU, `gemm_gflop_s`: the prefill matmul kernel alone on the model's largest layer
//!   matrix (`gemm_shape`: `GEMM_ROWS` rows), `GEMM_REPS` products per run, timed on the host
//!   (`webmamba::gpu_model::gemm_gflop_s`).
//!
//! A table goes to stdout, or with `--json` one JSON object. Ratios are measured side by side
//! in one run; no figure here is asserted by a test.

use std::time::Instant;

use anyhow::Result;
use serde_json::{Value, json};
use webmamba::{CacheConfig, Checkpoint, Engine, GREEDY_BATCH, Logits, Matmul, Retention, Runtime};

use crate::bench::cpu_runs;
use crate::setup::{Backend, ContextArgs, Weights, engine};
use dispatch_times::{DispatchTimes, measure_dispatch_times};

mod dispatch_times;
mod report;

/// Median, min and max of a figure over the runs.
struct Stat {
    median: f64,
    min: f64,
    max: f64,
}

impl Stat {
    fn of(mut xs: Vec<f64>) -> Stat {
        xs.sort_by(f64::total_cmp);
        let n = xs.len();
        let median = if n % 2 == 1 { xs[n / 2] } else { (xs[n / 2 - 1] + xs[n / 2]) / 2.0 };
        Stat { median, min: xs[0], max: xs[n - 1] }
    }

    fn json(&self) -> Value {
        json!({ "median": self.median, "min": self.min, "max": self.max })
    }

    fn cell(&self, digits: usize) -> String {
        format!("{:.digits$} ({:.digits$}–{:.digits$})", self.median, self.min, self.max)
    }
}

/// Prefill lengths measured.
const PREFILL: [usize; 3] = [128, 512, 2048];
const DECODE_PROMPT: usize = 128;
const DECODE_STEPS: usize = 128;
const SCAN_TOKENS: usize = 512;
const HISTORY: usize = 2048;
const FOLLOW_UP: usize = 16;
const BLOCK: usize = 64;
/// Rows (tokens) of the timed matmul, and products per run.
const GEMM_ROWS: usize = 512;
const GEMM_REPS: usize = 8;
/// Alternated plain and capturing prefills per run for `capture_overhead_512`.
const CAPTURE_PAIRS: usize = 5;

/// One backend's figures.
struct Row {
    label: String,
    prefill: Vec<Stat>,
    decode: Stat,
    decode_per_token: Option<Stat>,
    dispatches_per_token: Option<f64>,
    scan_speedup: Stat,
    resume_speedup: Stat,
    capture_overhead: Stat,
    memory: Value,
    /// The CPU backend's pool size (`None` on the GPU).
    cpu_threads: Option<usize>,
    /// The GPU's prefill matmul alone (`None` on the CPU).
    gemm: Option<Stat>,
    /// Recording a greedy batch on the CPU: µs per dispatch, and per step ÷ decode per step.
    record: Option<(Stat, Stat)>,
    /// One decode step timed per dispatch, where the device can.
    dispatch_times: Option<DispatchTimes>,
    /// Whether the GPU's GEMV kernels summed with subgroup operations (`None` on the CPU).
    subgroups: Option<bool>,
}

/// `n` token ids, different for each `salt`.
fn ids(n: usize, vocab: usize, salt: usize) -> Vec<u32> {
    (0..n).map(|i| ((i * 7919 + salt * 104_729 + 1) % vocab) as u32).collect()
}

/// Seconds `f` takes.
fn timed<T>(f: impl FnOnce() -> Result<T>) -> Result<(f64, T)> {
    let t0 = Instant::now();
    let out = f()?;
    Ok((t0.elapsed().as_secs_f64(), out))
}

fn forward(e: &mut Engine, tokens: &[u32]) -> Result<Vec<f32>> {
    Ok(pollster::block_on(e.forward(tokens, Logits::Last))?)
}

/// `DECODE_STEPS` greedy steps after `logits`: one forward call and a CPU argmax per token.
fn decode_per_token(e: &mut Engine, mut logits: Vec<f32>) -> Result<()> {
    for _ in 0..DECODE_STEPS {
        let next = webmamba::cpu::ops::argmax(&logits).unwrap_or(0) as u32;
        logits = forward(e, &[next])?;
    }
    Ok(())
}

/// `DECODE_STEPS` greedy steps after `logits` in batches picked and fed on the GPU.
fn decode_batched(e: &mut Engine, logits: &[f32]) -> Result<()> {
    let mut next = webmamba::cpu::ops::argmax(logits).unwrap_or(0) as u32;
    for _ in 0..DECODE_STEPS.div_ceil(GREEDY_BATCH) {
        let mut device = e.device_picks().ok_or_else(|| anyhow::anyhow!("no picking on the device"))?;
        let picks = pollster::block_on(device.greedy(next, GREEDY_BATCH))?;
        next = *picks.last().ok_or_else(|| anyhow::anyhow!("NaN logits"))?;
    }
    Ok(())
}

/// Seconds to record (and drop, unsubmitted) the greedy batch after the last one, and its
/// dispatches.
fn time_record(e: &mut Engine) -> Result<(f64, u64)> {
    let device = e.device_picks().ok_or_else(|| anyhow::anyhow!("no picking on the device"))?;
    timed(|| device.record_next_unsubmitted().ok_or_else(|| anyhow::anyhow!("no greedy batch ran")))
}

/// What `measure_engine` measures.
struct EngineFigures {
    prefill: Vec<Stat>,
    decode: Stat,
    decode_per_token: Option<Stat>,
    /// GPU dispatches recorded per token of the token-by-token decode (the CPU: none).
    dispatches_per_token: Option<f64>,
    scan: Stat,
    capture: Stat,
    record: Option<(Stat, Stat)>,
}

/// Everything but the cache figures, on the engine's working state.
fn measure_engine(e: &mut Engine, runs: usize, vocab: usize) -> Result<EngineFigures> {
    e.reset();
    forward(e, &ids(8, vocab, 0))?; // warm-up: first dispatches compile lazily on some drivers
    let slots = e.add_slots(SCAN_TOKENS / BLOCK)?;
    let captures: Vec<(usize, usize)> =
        (1..=SCAN_TOKENS / BLOCK).map(|b| b * BLOCK - 1).zip(slots.clone()).collect();
    let (mut prefill, mut decode, mut per_token, mut scan, mut capture) =
        (vec![Vec::new(); PREFILL.len()], Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut record, mut record_share) = (Vec::new(), Vec::new());
    let batched = e.pick_limits().is_some();
    let mut dispatches = None;
    for run in 0..runs {
        for (i, &n) in PREFILL.iter().enumerate() {
            e.reset();
            let (s, _) = timed(|| forward(e, &ids(n, vocab, run)))?;
            prefill[i].push(n as f64 / s);
        }
        e.reset();
        let logits = forward(e, &ids(DECODE_PROMPT, vocab, run))?;
        if batched {
            e.save_state(slots.start)?; // the same start for both ways
            let seconds = timed(|| decode_batched(e, &logits))?.0;
            decode.push(DECODE_STEPS as f64 / seconds);
            let (recording, n) = time_record(e)?;
            record.push(recording * 1e6 / n.max(1) as f64);
            record_share.push((recording / GREEDY_BATCH as f64) / (seconds / DECODE_STEPS as f64));
            e.load_state(slots.start)?;
            let before = webmamba::gpu::dispatches_recorded();
            per_token.push(DECODE_STEPS as f64 / timed(|| decode_per_token(e, logits))?.0);
            dispatches = Some((webmamba::gpu::dispatches_recorded() - before) as f64 / DECODE_STEPS as f64);
        } else {
            decode.push(DECODE_STEPS as f64 / timed(|| decode_per_token(e, logits))?.0);
        }
        let tokens = ids(SCAN_TOKENS, vocab, run);
        // A few percent is below this machine's run-to-run noise: alternate the two, take medians.
        let (mut plain, mut captured) = (Vec::new(), Vec::new());
        for _ in 0..CAPTURE_PAIRS {
            e.reset();
            plain.push(timed(|| forward(e, &tokens))?.0);
            e.reset();
            captured.push(
                timed(|| Ok(pollster::block_on(e.forward_capturing(&tokens, Logits::Last, &captures))?))?.0,
            );
        }
        let whole = Stat::of(plain).median;
        capture.push(Stat::of(captured).median / whole - 1.0);
        e.reset();
        let (one_by_one, _) = timed(|| tokens.iter().try_for_each(|t| forward(e, &[*t]).map(drop)))?;
        scan.push(one_by_one / whole);
    }
    Ok(EngineFigures {
        prefill: prefill.into_iter().map(Stat::of).collect(),
        decode: Stat::of(decode),
        decode_per_token: batched.then(|| Stat::of(per_token)),
        dispatches_per_token: dispatches,
        scan: Stat::of(scan),
        capture: Stat::of(capture),
        record: batched.then(|| (Stat::of(record), Stat::of(record_share))),
    })
}

/// Time to the first token of a follow-up resumed from the history's checkpoint vs re-read.
fn measure_resume(rt: &mut Runtime, runs: usize, vocab: usize) -> Result<Stat> {
    let history = ids(HISTORY, vocab, 7);
    let first = rt.new_session()?;
    pollster::block_on(rt.append(first, &history))?; // leaves a checkpoint every 64 tokens
    let mut speedups = Vec::new();
    for run in 0..runs {
        let mut resumed = history.clone();
        resumed.extend(ids(FOLLOW_UP, vocab, 100 + run));
        let s = rt.new_session()?;
        let (t_resume, outcome) = timed(|| Ok(pollster::block_on(rt.append(s, &resumed))?))?;
        anyhow::ensure!(outcome.prefilled == FOLLOW_UP, "the follow-up re-read {} tokens", outcome.prefilled);
        // The same length with another first token: no cached prefix, every token re-read.
        let mut fresh = resumed.clone();
        fresh[0] = (fresh[0] + 1 + run as u32) % vocab as u32;
        let s2 = rt.new_session()?;
        let (t_full, outcome) = timed(|| Ok(pollster::block_on(rt.append(s2, &fresh))?))?;
        anyhow::ensure!(outcome.prefilled == fresh.len(), "the re-read resumed from a checkpoint");
        speedups.push(t_full / t_resume);
        rt.close_session(s)?;
        rt.close_session(s2)?;
    }
    Ok(Stat::of(speedups))
}

/// (N, K) of the model's largest layer matrix (Mamba: in_proj).
fn gemm_shape(checkpoint: &Checkpoint) -> (usize, usize) {
    checkpoint
        .layout
        .planned()
        .filter(|p| p.role.is_matrix() && matches!(p.role, webmamba::model::Role::Layer(..)))
        .map(|p| (p.rows, p.cols))
        .max_by_key(|&(rows, cols)| rows * cols)
        .unwrap_or((checkpoint.config.d_model, checkpoint.config.d_model))
}

/// GFLOP/s of the GPU's prefill matmul on a (n, k) matrix in the engine's weight format.
fn measure_gemm(e: &Engine, (n, k): (usize, usize), runs: usize) -> Result<Option<Stat>> {
    let Engine::Gpu(m) = e else { return Ok(None) };
    let format = m.memory().weight_format;
    let rates = (0..runs)
        .map(|_| {
            let shape = (GEMM_ROWS, k, n);
            Ok(pollster::block_on(webmamba::gpu_model::gemm_gflop_s(
                m.context(),
                shape,
                format,
                Matmul::Auto,
                GEMM_REPS,
            ))?)
        })
        .collect::<Result<Vec<f64>>>()?;
    Ok(Some(Stat::of(rates)))
}

fn gpu_memory(e: &Engine) -> Value {
    match e {
        Engine::Gpu(m) => {
            let mem = m.memory();
            json!({ "weights": mem.weights, "activations": mem.activations, "state": mem.state,
                    "checkpoint_slots": mem.slots, "kv_caches": mem.kv, "kv_pages": mem.pages })
        }
        Engine::Cpu { .. } => Value::Null,
    }
}

/// Runs the suite on `checkpoint` for each backend (the GPU once per weight format).
pub fn run(
    checkpoint: &Checkpoint,
    backends: &[Backend],
    formats: &[Weights],
    threads: &[u16],
    (runs, compare_subgroups): (usize, bool),
    as_json: bool,
) -> Result<()> {
    let c = &checkpoint.config;
    let vocab = c.vocab_size;
    let mut rows = Vec::new();
    let mut adapter = String::new();
    for &backend in backends {
        // (label, GPU weight format, CPU threads, GPU sums without subgroups)
        let variants: Vec<(String, Option<Weights>, Option<u16>, bool)> = match backend {
            Backend::Cpu => cpu_runs(threads).into_iter().map(|(label, n)| (label, None, n, false)).collect(),
            Backend::Gpu => formats
                .iter()
                .flat_map(|&w| {
                    let label = format!("gpu-{}", format!("{w:?}").to_lowercase());
                    let tree =
                        compare_subgroups.then(|| (format!("{label}-no-subgroups"), Some(w), None, true));
                    [(label, Some(w), None, false)].into_iter().chain(tree)
                })
                .collect(),
        };
        for (label, weights, threads, no_subgroups) in variants {
            eprintln!("bench: {label}…");
            let context = ContextArgs { threads, no_subgroups, ..Default::default() };
            let mut e = engine(checkpoint, backend, Matmul::Auto, weights.unwrap_or(Weights::F16), context)?;
            let subgroups = match &e {
                Engine::Gpu(m) => {
                    adapter = m.context().summary().to_string();
                    Some(m.uses_subgroups())
                }
                Engine::Cpu { .. } => None,
            };
            let cpu_threads = e.cpu_threads();
            let f = measure_engine(&mut e, runs, vocab)?;
            let gemm = measure_gemm(&e, gemm_shape(checkpoint), runs)?;
            let dispatch_times = measure_dispatch_times(&mut e, vocab)?;
            let config =
                CacheConfig { block_size: BLOCK, retention: Retention::Dense, budget_bytes: u64::MAX };
            let mut rt = Runtime::new(e, config)?;
            let resume_speedup = measure_resume(&mut rt, runs, vocab)?;
            let memory = gpu_memory(rt.engine());
            rows.push(Row {
                label,
                prefill: f.prefill,
                decode: f.decode,
                decode_per_token: f.decode_per_token,
                dispatches_per_token: f.dispatches_per_token,
                scan_speedup: f.scan,
                resume_speedup,
                capture_overhead: f.capture,
                memory,
                cpu_threads,
                gemm,
                record: f.record,
                dispatch_times,
                subgroups,
            });
        }
    }
    let (d_inner, d_state) = c.blocks.iter().find_map(|b| b.kind.mamba_dims()).unwrap_or_default();
    let model = json!({ "d_model": c.d_model, "n_layer": c.n_layer(), "d_state": d_state,
                        "d_inner": d_inner, "vocab_size": vocab });
    let (n, k) = gemm_shape(checkpoint);
    let gemm = json!({ "rows": GEMM_ROWS, "k": k, "n": n });
    if as_json {
        println!("{}", serde_json::to_string_pretty(&report::json(&rows, (model, gemm), &adapter, runs))?);
    } else {
        report::table(&rows, (&model, &gemm), &adapter, runs);
    }
    Ok(())
}
