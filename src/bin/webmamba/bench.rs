//! `webmamba bench`: prefill and decode throughput of each backend on the same model and tokens,
//! measured one after the other in one run and reported side by side with their ratio; with
//! `--suite`, the whole benchmark suite (`suite.rs`). This is where speed claims come from
//! (never from a timed test).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use clap::{Args, ValueEnum};
use webmamba::{Checkpoint, Logits, Matmul};

use crate::setup::{Backend, ContextArgs, Weights, checkpoint, engine};
use crate::shapes::Shape;

/// Options of `webmamba bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// Model folder or GGUF file to benchmark (else a seeded random model of `--shape`).
    #[arg(long, conflicts_with = "shape")]
    model: Option<PathBuf>,
    /// Shape of a seeded random model (f32 weights) to benchmark. Default: 130m, or with
    /// `--suite` the embedded default model.
    #[arg(long, value_enum)]
    shape: Option<Shape>,
    /// Run the benchmark suite: prefill at 128/512/2048, decode, scan_speedup_512,
    /// resume_speedup_2048, capture_overhead_512 and GPU memory, per backend and weight format.
    #[arg(long)]
    suite: bool,
    /// With `--suite`: print one JSON object instead of tables.
    #[arg(long, requires = "suite")]
    json: bool,
    /// With `--suite`: runs per figure (the median is reported, with min and max).
    #[arg(long, default_value_t = 3, requires = "suite")]
    runs: usize,
    /// With `--suite`: the GPU weight formats to measure, in order.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "f32,f16,int8", requires = "suite")]
    formats: Vec<Weights>,
    /// How the GPU stores weight matrices.
    #[arg(long, value_enum, default_value_t = Weights::F16)]
    weights: Weights,
    /// Prompt length for the prefill measurement.
    #[arg(long, default_value_t = 128)]
    prompt_tokens: usize,
    /// Decode steps to time after the prefill.
    #[arg(long, default_value_t = 8)]
    decode_tokens: usize,
    /// Backends to run, in order.
    #[arg(long, value_enum, value_delimiter = ',', default_value = "cpu,gpu")]
    backends: Vec<Backend>,
    /// The GPU's prefill matmul kernel.
    #[arg(long, value_enum, default_value_t = MatmulArg::Auto)]
    matmul: MatmulArg,
    /// CPU thread counts, in order (e.g. `1,2`): the CPU backend runs once per count, side by
    /// side, labelled `cpu-<n>t`. Default: one run on every core, labelled `cpu`.
    #[arg(long, value_delimiter = ',',
          value_parser = clap::value_parser!(u16).range(1..=webmamba::cpu::threads::MAX_THREADS as i64))]
    threads: Vec<u16>,
    /// Also run the GPU with its unfused decode kernels (`gpu-unfused`, side by side with the
    /// fused `gpu`).
    #[arg(long)]
    compare_unfused: bool,
    /// Also run the GPU with its GEMV kernels' workgroup sums as a tree, without subgroup
    /// operations (`gpu-no-subgroups` side by side with `gpu`; with `--suite`, a
    /// `gpu-<format>-no-subgroups` row after each format's; the same where the adapter has none).
    #[arg(long)]
    compare_subgroups: bool,
}

/// The CPU backend's runs: one per thread count asked for, each with its label.
pub fn cpu_runs(threads: &[u16]) -> Vec<(String, Option<u16>)> {
    match threads {
        [] => vec![("cpu".into(), None)],
        counts => counts.iter().map(|&n| (format!("cpu-{n}t"), Some(n))).collect(),
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum MatmulArg {
    Auto,
    Tiled,
    Direct,
}

struct Row {
    backend: Backend,
    label: String,
    prefill: Duration,
    decode: Duration,
}

pub fn run(a: BenchArgs) -> Result<()> {
    if a.prompt_tokens == 0 || a.decode_tokens == 0 || a.runs == 0 {
        bail!("--prompt-tokens, --decode-tokens and --runs must be at least 1");
    }
    let shape = match (a.shape, a.suite) {
        (None, false) => Some(Shape::Mamba130m),
        (shape, _) => shape,
    };
    let checkpoint = match (&a.model, shape) {
        (None, Some(shape)) => {
            Checkpoint::random_from_json(&shape.config_json(), 1, safetensors::Dtype::F32)?
        }
        (dir, _) => checkpoint(dir.as_ref())?,
    };
    if a.suite {
        let (runs, compare) = (a.runs, a.compare_subgroups);
        return crate::suite::run(&checkpoint, &a.backends, &a.formats, &a.threads, (runs, compare), a.json);
    }
    let c = checkpoint.config.clone();
    let matmul = match a.matmul {
        MatmulArg::Auto => Matmul::Auto,
        MatmulArg::Tiled => Matmul::Tiled,
        MatmulArg::Direct => Matmul::Direct,
    };
    let prompt: Vec<u32> = (0..a.prompt_tokens).map(|i| (i * 7919 % c.vocab_size) as u32).collect();
    eprintln!(
        "model: d_model {}, {} layers, d_state {}, vocab {}; prompt {} tokens, {} decode steps",
        c.d_model,
        c.n_layer(),
        c.blocks.iter().find_map(|b| b.kind.mamba_dims()).map_or(0, |d| d.1),
        c.vocab_size,
        a.prompt_tokens,
        a.decode_tokens
    );
    let mut rows = Vec::new();
    let runs: Vec<(Backend, String, ContextArgs)> = a
        .backends
        .iter()
        .flat_map(|&backend| match backend {
            Backend::Cpu => cpu_runs(&a.threads)
                .into_iter()
                .map(|(l, threads)| (backend, l, ContextArgs { threads, ..Default::default() }))
                .collect(),
            Backend::Gpu => {
                let mut gpu = vec![(backend, "gpu".to_string(), ContextArgs::default())];
                if a.compare_unfused {
                    let unfused = ContextArgs { unfused: true, ..Default::default() };
                    gpu.push((backend, "gpu-unfused".to_string(), unfused));
                }
                if a.compare_subgroups {
                    let tree = ContextArgs { no_subgroups: true, ..Default::default() };
                    gpu.push((backend, "gpu-no-subgroups".to_string(), tree));
                }
                gpu
            }
        })
        .collect();
    for (backend, label, context) in runs {
        let mut e = engine(&checkpoint, backend, matmul, a.weights, context)?;
        // Warm-up: pipelines compile lazily on some drivers.
        pollster::block_on(e.forward(&prompt[..1], Logits::Last))?;
        e.reset();
        let t0 = Instant::now();
        let mut logits = pollster::block_on(e.forward(&prompt, Logits::Last))?;
        let prefill = t0.elapsed();
        let t0 = Instant::now();
        for _ in 0..a.decode_tokens {
            let next = webmamba::cpu::ops::argmax(&logits).unwrap_or(0) as u32;
            logits = pollster::block_on(e.forward(&[next], Logits::Last))?;
        }
        let decode = t0.elapsed();
        eprintln!("{label}: prefill {prefill:.2?}, decode {decode:.2?}");
        rows.push(Row { backend, label, prefill, decode });
    }
    println!("| backend | prefill tok/s | decode tok/s |");
    println!("|---|---|---|");
    let rate = |n: usize, d: Duration| n as f64 / d.as_secs_f64();
    for r in &rows {
        println!(
            "| {} | {:.1} | {:.2} |",
            r.label,
            rate(a.prompt_tokens, r.prefill),
            rate(a.decode_tokens, r.decode)
        );
    }
    if let (Some(cpu), Some(gpu)) =
        (rows.iter().find(|r| r.backend == Backend::Cpu), rows.iter().find(|r| r.backend == Backend::Gpu))
    {
        println!(
            "\ngpu/cpu speed ratio: prefill {:.2}x, decode {:.2}x",
            cpu.prefill.as_secs_f64() / gpu.prefill.as_secs_f64(),
            cpu.decode.as_secs_f64() / gpu.decode.as_secs_f64()
        );
    }
    Ok(())
}
