//! The compiled pipelines of a model ([`Kernels`]): made once at load, for the weight formats
//! its matrices use and the kernels its block kinds ask for.

use crate::error::{Error, Result};
use crate::gpu::{GpuContext, Kernel, KernelSpec, Layout};
use crate::gpu_kit::GpuModelOptions;
use crate::gpu_kit::format::WeightFormat;
use crate::kernels::{Argmax, TopK, embedding, gemv, gemv_coalesced, lanes, linear, linear_direct, rms_norm};
use crate::load::{Phase, Reporter};

/// The pipelines that read weights, for one weight format (the shaders' `W_FORMAT`).
pub(crate) struct WeightKernels {
    pub(crate) format: WeightFormat,
    pub(crate) embedding: Kernel,
    /// The many-rows matmul: `linear` (workgroup-memory tiles) or `linear_direct`.
    pub(crate) linear: Kernel,
    /// The few-rows matmul: `gemv_coalesced` (real GPUs) or `gemv` (software adapters).
    pub(crate) gemv: Kernel,
    /// `gemv`'s workgroups for (rows, outputs).
    pub(crate) gemm_groups: GroupsFn,
    pub(crate) gemv_groups: GroupsFn,
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

/// The many-rows matmul of a kernel set (see [`Matmul`]): entry point, source and workgroups.
pub(crate) fn gemm_kernel(direct: bool) -> (&'static str, &'static str, GroupsFn) {
    if direct {
        ("linear_direct", linear_direct::SOURCE, linear::direct_gemm_groups)
    } else {
        ("linear", linear::SOURCE, linear::gemm_groups)
    }
}

/// The compiled pipelines.
pub(crate) struct Kernels {
    /// One set per weight format the model's matrices use.
    pub(crate) weights: Vec<WeightKernels>,
    pub(crate) rms_norm: Kernel,
    pub(crate) argmax: Argmax,
    pub(crate) top_k: TopK,
    /// The software-adapter matmuls are in use (see [`Matmul`]).
    pub(crate) direct: bool,
    /// Decode steps run the fused kernels (`GpuModelOptions::fused`).
    pub(crate) fused: bool,
    /// The GEMV kernels sum across a workgroup with subgroup operations
    /// ([`crate::kernels::lanes`]): asked for (`GpuModelOptions::subgroups`), the adapter has
    /// them, and the real-GPU kernels are in use.
    pub(crate) subgroups: bool,
    /// What the model's block kinds asked for (each spec once), found by [`Kernels::block`].
    blocks: Vec<(KernelSpec, Kernel)>,
}

impl Kernels {
    /// Compiles every kernel — the weight-reading ones once per format in `formats`, and each
    /// of `block_kernels` (what the model's block kinds ask for) once — reporting each pipeline
    /// as it is done.
    pub(crate) async fn new(
        ctx: &GpuContext,
        options: &GpuModelOptions,
        formats: &[WeightFormat],
        block_kernels: Vec<KernelSpec>,
        reporter: &mut Reporter,
    ) -> Result<Self> {
        let mut specs: Vec<KernelSpec> = Vec::new();
        for spec in block_kernels {
            if !specs.contains(&spec) {
                specs.push(spec);
            }
        }
        let direct = options.matmul.is_direct(ctx);
        let subgroups = options.subgroups && ctx.summary().subgroups && !direct;
        // The source a kernel is compiled from: its subgroup version where the model uses them.
        let source = |name: &str, tree: &'static str| match subgroups {
            true => lanes::subgroup_source(name).unwrap_or(tree),
            false => tree,
        };
        let (linear_name, linear_source, gemm_groups) = gemm_kernel(direct);
        let (gemv_name, gemv_source, gemv_groups) = gemv_kernel(direct);
        let gemv_source = source(gemv_name, gemv_source);
        let total = (3 + specs.len() + 3 * formats.len()) as u64;
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
            weights.push(WeightKernels { format, embedding, linear, gemv, gemm_groups, gemv_groups });
        }
        let mut compile = async |name, source, bindings, constants: &[(&str, f64)]| {
            let layout = Layout::new(ctx, name, bindings);
            let k = Kernel::with_constants(ctx, name, source, layout, constants).await;
            tick(reporter);
            k
        };
        let rms_norm = compile("rms_norm", rms_norm::SOURCE, rms_norm::BINDINGS, &[]).await?;
        let mut blocks = Vec::with_capacity(specs.len());
        for spec in specs {
            let kernel =
                compile(spec.name, source(spec.name, spec.source), spec.bindings, &spec.constants).await?;
            blocks.push((spec, kernel));
        }
        let argmax = Argmax::new(ctx).await?;
        tick(reporter);
        let top_k = TopK::new(ctx).await?;
        tick(reporter);
        Ok(Self { weights, rms_norm, argmax, top_k, direct, fused: options.fused, subgroups, blocks })
    }

    /// The compiled kernel named `name` among `specs` (what a block kind asked for).
    pub(crate) fn named(&self, specs: &[KernelSpec], name: &str) -> Result<&Kernel> {
        let spec = specs.iter().find(|s| s.name == name);
        self.block(spec.ok_or_else(|| Error::Internal(format!("no {name} kernel among the block's")))?)
    }

    /// The compiled kernel of `spec` (one a block kind of this model asked for).
    pub(crate) fn block(&self, spec: &KernelSpec) -> Result<&Kernel> {
        self.blocks.iter().find(|(s, _)| s == spec).map(|(_, k)| k).ok_or_else(|| {
            Error::Internal(format!("the {} kernel was not compiled for this model's blocks", spec.name))
        })
    }

    /// The weight-reading kernels for `format`.
    pub(crate) fn for_format(&self, format: WeightFormat) -> Result<&WeightKernels> {
        self.weights.iter().find(|k| k.format == format).ok_or_else(|| Error::Gpu {
            context: "building the forward pass".into(),
            message: format!("no kernels compiled for {} weights", format.name()),
        })
    }
}
