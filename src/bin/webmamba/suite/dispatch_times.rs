//! `dispatch_times`: decode steps with every dispatch stamped on the GPU
//! ([`webmamba::gpu::start_dispatch_timing`]), per kernel.

use anyhow::Result;
use serde_json::{Value, json};
use webmamba::Engine;

use super::{DECODE_PROMPT, forward, ids};

/// Decode steps timed per dispatch.
const TIMED_STEPS: usize = 8;

/// One kernel's dispatches in a decode step, averaged over `TIMED_STEPS` steps.
pub(super) struct KernelTimes {
    pub kernel: &'static str,
    pub dispatches: usize,
    /// µs between each dispatch's stamps, summed: the kernel, with the barrier before it and
    /// its launch (see `webmamba::gpu::start_dispatch_timing`).
    pub busy_us: f64,
    /// µs from the previous dispatch's end stamp to each one's start, summed (near zero on
    /// Vulkan).
    pub gap_us: f64,
}

/// A decode step timed per dispatch: its span (first stamp to last, µs) and its kernels in
/// order of first use.
pub(super) struct DispatchTimes {
    pub span_us: f64,
    pub kernels: Vec<KernelTimes>,
}

/// `TIMED_STEPS` decode steps (one token each, the per-token path) after a prompt, every
/// dispatch stamped; `None` on the CPU or where the device cannot stamp inside passes.
pub(super) fn measure_dispatch_times(e: &mut Engine, vocab: usize) -> Result<Option<DispatchTimes>> {
    let ctx = match &*e {
        Engine::Gpu(m) if webmamba::gpu::can_time_dispatches(m.context()) => m.context().clone(),
        _ => return Ok(None),
    };
    e.reset();
    let mut logits = forward(e, &ids(DECODE_PROMPT, vocab, 0))?;
    let (mut span_us, mut kernels) = (0.0, Vec::<KernelTimes>::new());
    for _ in 0..TIMED_STEPS {
        let next = webmamba::cpu::ops::argmax(&logits).unwrap_or(0) as u32;
        webmamba::gpu::start_dispatch_timing(&ctx)?;
        logits = forward(e, &[next])?;
        let times = pollster::block_on(webmamba::gpu::finish_dispatch_timing(&ctx))?;
        let steps = TIMED_STEPS as f64;
        span_us += times.last().map_or(0.0, |t| t.end_ns) / 1e3 / steps;
        let mut previous_end = None;
        for t in &times {
            let gap = previous_end.map_or(0.0, |end: f64| (t.start_ns - end).max(0.0));
            previous_end = Some(t.end_ns);
            let k = match kernels.iter().position(|k| k.kernel == t.kernel) {
                Some(i) => &mut kernels[i],
                None => {
                    kernels.push(KernelTimes { kernel: t.kernel, dispatches: 0, busy_us: 0.0, gap_us: 0.0 });
                    kernels.last_mut().expect("just pushed")
                }
            };
            k.dispatches += 1;
            k.busy_us += (t.end_ns - t.start_ns).max(0.0) / 1e3 / steps;
            k.gap_us += gap / 1e3 / steps;
        }
    }
    kernels.iter_mut().for_each(|k| k.dispatches /= TIMED_STEPS);
    Ok(Some(DispatchTimes { span_us, kernels }))
}

impl DispatchTimes {
    /// `{ "span_us", "kernels": [{ "kernel", "dispatches", "busy_us", "gap_us" }] }`, per step.
    pub(super) fn json(&self) -> Value {
        let kernels: Vec<Value> = self
            .kernels
            .iter()
            .map(|k| json!({ "kernel": k.kernel, "dispatches": k.dispatches, "busy_us": k.busy_us, "gap_us": k.gap_us }))
            .collect();
        json!({ "steps": TIMED_STEPS, "span_us": self.span_us, "kernels": kernels })
    }

    /// A Markdown table for `label`.
    pub(super) fn print(&self, label: &str) {
        let (busy, gaps) = self.kernels.iter().fold((0.0, 0.0), |(b, g), k| (b + k.busy_us, g + k.gap_us));
        println!(
            "\n{label}: one decode step timed per dispatch (mean of {TIMED_STEPS}): {:.1} µs from the first stamp to the last, {busy:.1} µs in kernels, {gaps:.1} µs between them\n",
            self.span_us
        );
        println!("| kernel | dispatches | µs running | µs before (gaps) |\n|---|---|---|---|");
        for k in &self.kernels {
            println!("| {} | {} | {:.1} | {:.1} |", k.kernel, k.dispatches, k.busy_us, k.gap_us);
        }
    }
}
