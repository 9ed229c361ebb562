//! The compiled pipelines of a model ([`Kernels`]): made once at load, for the weight formats
//! its matrices use and the architecture's mixer.

use crate::error::{Error, Result};
use crate::gpu::{GpuContext, Kernel, Layout};
use crate::gpu_model::Matmul;
use crate::gpu_model::format::WeightFormat;
use crate::kernels::{
    argmax, conv1d_silu, embedding, gemv, gemv_coalesced, linear, linear_direct, rms_norm, rms_slices,
    scan_carry, scan_chunks, scan_output, ssd_chunks, ssd_output, top_k,
};
use crate::load::{Phase, Reporter};
use crate::model::{Arch, Config};

/// The pipelines that read weights, for one weight format (the shaders' `W_FORMAT`).
pub(crate) struct WeightKernels {
    pub format: WeightFormat,
    pub embedding: Kernel,
    /// The many-rows matmul: `linear` (workgroup-memory tiles) or `linear_direct`.
    pub linear: Kernel,
    /// The few-rows matmul: `gemv_coalesced` (real GPUs) or `gemv` (software adapters).
    pub gemv: Kernel,
    /// `gemv`'s workgroups for (rows, outputs).
    pub gemv_groups: GroupsFn,
}

/// Workgroups of a dispatch for (rows, outputs).
pub(crate) type GroupsFn = fn(u32, u32) -> (u32, u32, u32);

/// The few-rows matmul of a kernel set (see [`Matmul`]): entry point, source and workgroups.
pub(crate) fn gemv_kernel(direct: bool) -> (&'static str, &'static str, GroupsFn) {
    if direct {
        ("gemv", gemv::SOURCE, linear::gemv_groups)
    } else {
        ("gemv_coalesced", gemv_coalesced::SOURCE, gemv_coalesced::groups)
    }
}

/// The compiled pipelines.
pub(crate) struct Kernels {
    /// One set per weight format the model's matrices use.
    pub weights: Vec<WeightKernels>,
    pub rms_norm: Kernel,
    /// Falcon-Mamba's norms on δ, B and C (compiled for that architecture only).
    pub rms_slices: Option<Kernel>,
    pub conv1d_silu: Kernel,
    /// Pass 1 of the prefill scan: `scan_chunks` (Mamba-1), `ssd_chunks` (Mamba-2).
    pub scan_chunks: Kernel,
    pub scan_carry: Kernel,
    /// Pass 3, and the decode step: `scan_output` (Mamba-1), `ssd_output` (Mamba-2).
    pub scan_output: Kernel,
    pub argmax: Kernel,
    pub top_k: Kernel,
}

impl Kernels {
    /// Compiles every kernel, the weight-reading ones once per format in `formats`, reporting
    /// each pipeline as it is done.
    pub async fn new(
        ctx: &GpuContext,
        matmul: Matmul,
        formats: &[WeightFormat],
        config: &Config,
        reporter: &mut Reporter,
    ) -> Result<Self> {
        let falcon = config.arch == Arch::FalconMamba;
        let direct = matmul.is_direct(ctx);
        let (linear_name, linear_source) =
            if direct { ("linear_direct", linear_direct::SOURCE) } else { ("linear", linear::SOURCE) };
        let (gemv_name, gemv_source, gemv_groups) = gemv_kernel(direct);
        let total = (7 + falcon as usize + 3 * formats.len()) as u64;
        let mut done = 0;
        let mut tick = |reporter: &mut Reporter| {
            done += 1;
            reporter.report(Phase::Compile, "kernels", done, total);
        };
        // One layout per declaration, shared by the pipelines that read it: every weight
        // format's, and the GEMM's with the GEMV's (`linear::BINDINGS` serves all four).
        let embedding_layout = Layout::new(ctx, "embedding", embedding::BINDINGS);
        let linear_layout = Layout::new(ctx, linear_name, linear::BINDINGS);
        let mut weights = Vec::new();
        for &format in formats {
            let c = [("W_FORMAT", format.shader_value())];
            let embedding =
                Kernel::with_constants(ctx, "embedding", embedding::SOURCE, embedding_layout.clone(), &c)
                    .await?;
            tick(reporter);
            let linear =
                Kernel::with_constants(ctx, linear_name, linear_source, linear_layout.clone(), &c).await?;
            tick(reporter);
            let gemv = Kernel::with_constants(ctx, gemv_name, gemv_source, linear_layout.clone(), &c).await?;
            tick(reporter);
            weights.push(WeightKernels { format, embedding, linear, gemv, gemv_groups });
        }
        // The scans are specialised for the model's N (loops unrolled, state in registers).
        let n = [("N_STATE", config.d_state as f64)];
        let (chunks, output) = match config.arch {
            Arch::Mamba2 => (
                ("ssd_chunks", ssd_chunks::SOURCE, ssd_chunks::BINDINGS),
                ("ssd_output", ssd_output::SOURCE, ssd_output::BINDINGS),
            ),
            Arch::Mamba | Arch::FalconMamba => (
                ("scan_chunks", scan_chunks::SOURCE, scan_chunks::BINDINGS),
                ("scan_output", scan_output::SOURCE, scan_output::BINDINGS),
            ),
        };
        let mut compile = async |name, source, bindings, constants: &[(&str, f64)]| {
            let layout = Layout::new(ctx, name, bindings);
            let k = Kernel::with_constants(ctx, name, source, layout, constants).await;
            tick(reporter);
            k
        };
        Ok(Self {
            weights,
            rms_norm: compile("rms_norm", rms_norm::SOURCE, rms_norm::BINDINGS, &[]).await?,
            rms_slices: match falcon {
                true => Some(compile("rms_slices", rms_slices::SOURCE, rms_slices::BINDINGS, &[]).await?),
                false => None,
            },
            conv1d_silu: compile("conv1d_silu", conv1d_silu::SOURCE, conv1d_silu::BINDINGS, &[]).await?,
            scan_chunks: compile(chunks.0, chunks.1, chunks.2, &n).await?,
            scan_carry: compile("scan_carry", scan_carry::SOURCE, scan_carry::BINDINGS, &[]).await?,
            scan_output: compile(output.0, output.1, output.2, &n).await?,
            argmax: compile("argmax", argmax::SOURCE, argmax::BINDINGS, &[]).await?,
            top_k: compile("top_k", top_k::SOURCE, top_k::BINDINGS, &[]).await?,
        })
    }

    /// The weight-reading kernels for `format`.
    pub fn for_format(&self, format: WeightFormat) -> Result<&WeightKernels> {
        self.weights.iter().find(|k| k.format == format).ok_or_else(|| Error::Gpu {
            context: "building the forward pass".into(),
            message: format!("no kernels compiled for {} weights", format.name()),
        })
    }
}
