//! A Zamba2 hybrid layer on the GPU: its weight buffers (the shared transformer block's on its
//! owner only) and the calls it records. Unlike other blocks it makes its own RMSNorm, since
//! the shared block's output joins the Mamba input before it:
//!
//!   h ‖ e → RMSNorm (2·D) → attention (q, k, v each + its LoRA adapter) → o_proj
//!   → RMSNorm → MLP (gate ‖ up + its adapter) → linear → + h → the block's RMSNorm
//!   → Mamba-2 (added onto the residual)
//!
//! Buffers: h ‖ e rows in `ud` (Mamba's scratch, free until its in_proj), the normed rows and
//! later (T, D) rows in `wide`, o_proj's and the MLP's outputs in `x_norm`, the Mamba input's
//! norm into `x_norm` last.

use crate::blocks::gpu_common::{GpuAdapter, LayerCx, Out};
use crate::blocks::gpu_kind::{GpuKind, GpuParts};
use crate::blocks::zamba2::Zamba2Layer;
use crate::blocks::{Input, attention, mamba2, mlp};
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu::KernelSpec;
use crate::gpu_kit::WeightFormat;
use crate::gpu_kit::activations::Scratch;
use crate::gpu_kit::call::{Groups, ROWS, Step};
use crate::gpu_kit::kv::KvFormat;
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::copy_cols::{self, CopyColsParams};
use crate::kernels::{linear, rms_norm};
use crate::model::Part;

/// The shared transformer block's weights (on its owner).
pub(crate) struct Shared {
    pub(crate) norm: wgpu::Buffer, // (2·D) RMSNorm gain over hidden ‖ embeddings
    pub(crate) attention: attention::gpu::GpuWeights, // q, k, v (·, 2·D), o (D, Hq·hd)
    pub(crate) ff_norm: wgpu::Buffer, // (D)
    pub(crate) mlp: mlp::gpu::GpuWeights,
}

/// A Zamba2 layer's weights on the GPU.
pub(crate) struct GpuWeights {
    pub(crate) shared: Option<Shared>,
    /// LoRA adapters of q, k, v (where the model has them) and of the MLP's gate ‖ up.
    pub(crate) adapters: [Option<GpuAdapter>; 4],
    pub(crate) linear: SplitMatrix, // (D, D)
    pub(crate) mamba: mamba2::gpu::GpuWeights,
}

impl GpuWeights {
    /// Allocates (zeroed) the buffers of layer `p` (residual width `d`).
    pub(crate) fn allocate(p: &Zamba2Layer, d: usize, a: &Alloc<'_>) -> Result<Self> {
        let s = &p.shared;
        let shared = p
            .owns()
            .then(|| -> Result<Shared> {
                Ok(Shared {
                    norm: a.vector("shared norm", 2 * d)?,
                    attention: attention::gpu::GpuWeights::allocate(&s.attention, (2 * d, d), a)?,
                    ff_norm: a.vector("shared ff norm", d)?,
                    mlp: mlp::gpu::GpuWeights::allocate(&s.mlp, d, a, Part::Mlp)?,
                })
            })
            .transpose()?;
        let (q, kv, r) = (s.attention.q_dim(), s.attention.kv_dim(), s.rank);
        let adapter = |which: usize, (inp, out): (usize, usize)| -> Result<Option<GpuAdapter>> {
            if which < 3 && !s.attention_adapters {
                return Ok(None);
            }
            let down = a.matrix(
                Part::Adapter { which: which as u8, stage: 0 },
                &format!("adapter {which}.0"),
                (r, inp),
                false,
            )?;
            Ok(Some((
                down,
                a.matrix(
                    Part::Adapter { which: which as u8, stage: 1 },
                    &format!("adapter {which}.1"),
                    (out, r),
                    false,
                )?,
            )))
        };
        let adapters = [
            adapter(0, (2 * d, q))?,
            adapter(1, (2 * d, kv))?,
            adapter(2, (2 * d, kv))?,
            adapter(3, (d, 2 * s.mlp.inner))?,
        ];
        Ok(Self {
            shared,
            adapters,
            linear: a.matrix(Part::Linear, "linear", (d, d), false)?,
            mamba: mamba2::gpu::GpuWeights::allocate(&p.mamba, d, a)?,
        })
    }
}

impl GpuParts for GpuWeights {
    /// Where the rows of its tensor `part` go.
    fn destination(&self, part: Part) -> Option<Destination<'_>> {
        let vector = |buffer| Some(Destination::Vector { buffer, at: 0, neg_exp: false });
        match part {
            Part::Linear => Some(Destination::Matrix(&self.linear)),
            Part::Adapter { which, stage } => {
                let (down, up) = self.adapters.get(which as usize)?.as_ref()?;
                Some(Destination::Matrix(if stage == 0 { down } else { up }))
            }
            Part::SharedNorm => vector(&self.shared.as_ref()?.norm),
            Part::SharedFfNorm => vector(&self.shared.as_ref()?.ff_norm),
            Part::Mlp(m) => self.shared.as_ref()?.mlp.destination(m),
            Part::Q | Part::QBias | Part::K | Part::KBias | Part::V | Part::VBias | Part::O | Part::OBias => {
                self.shared.as_ref()?.attention.destination(part)
            }
            _ => self.mamba.destination(part),
        }
    }

    /// Its weight matrices.
    fn matrices(&self) -> Vec<&SplitMatrix> {
        let mut out = vec![&self.linear];
        out.extend(self.mamba.matrices());
        if let Some(s) = &self.shared {
            out.extend(s.attention.matrices());
            out.extend(s.mlp.matrices());
        }
        out.extend(self.adapters.iter().flatten().flat_map(|(a, b)| [a, b]));
        out
    }

    /// Its f32 vector buffers.
    fn vectors(&self) -> Vec<&wgpu::Buffer> {
        let mut out = self.mamba.vectors();
        out.extend(self.shared.iter().flat_map(|s| [&s.norm, &s.ff_norm]));
        out
    }
}

/// The kernels it dispatches beyond the matmuls and rms_norm.
pub(crate) fn kernels(p: &Zamba2Layer, format: KvFormat) -> Vec<KernelSpec> {
    let copy = KernelSpec {
        name: "copy_cols",
        source: copy_cols::SOURCE,
        bindings: copy_cols::BINDINGS,
        constants: Vec::new(),
    };
    [
        vec![copy],
        mamba2::gpu::kernels(&p.mamba),
        attention::gpu::kernels(&p.shared.attention, format),
        mlp::gpu::kernels(),
    ]
    .concat()
}

/// Its share of the scratch buffers for `t` tokens (residual width `d`): its Mamba's, its
/// attention's and MLP's, and the rows of its own (h ‖ e, the embeddings, the adapters').
pub(crate) fn scratch(p: &Zamba2Layer, d: usize, t: usize) -> Scratch {
    let parts = [
        mamba2::gpu::scratch(&p.mamba, t),
        attention::gpu::scratch(&p.shared.attention, t),
        mlp::gpu::scratch(&p.shared.mlp, t),
    ];
    // ud: h ‖ e rows (T, 2·D) before the Mamba's in_proj needs it; wide: the normed rows
    // (T, 2·D), later (T, D) rows; lora: an adapter's down projection (T, r).
    Scratch::most(parts).with("ud", t * 2 * d).with("wide", t * 2 * d).with("lora", t * p.shared.rank)
}

/// Fails unless its kernels can run it.
pub(crate) fn check(p: &Zamba2Layer, format: KvFormat) -> Result<()> {
    mamba2::gpu::check(&p.mamba)?;
    attention::gpu::check(&p.shared.attention, format)
}

/// The calls of layer `p` (weights `w`, the shared block's `shared`), its own RMSNorm
/// (`cx.norm`) included, in dispatch order.
pub(crate) fn plan(
    p: &Zamba2Layer,
    (w, shared): (&GpuWeights, &Shared),
    cx: LayerCx<'_>,
) -> Result<Vec<Step>> {
    let LayerCx { b, a, eps, .. } = cx;
    let d = w.linear.cols as u32;
    let specs = kernels(p, cx.kv.format);
    let copy = |x, x_stride, y, (y_stride, y_col)| -> Result<Step> {
        let params = CopyColsParams { width: d, x_stride, x_col: 0, y_stride, y_col, _pad: [0; 3] };
        let groups = Groups::Values { per_token: d, wg: copy_cols::WG };
        Ok(Step::Call(b.call(cx.kernel(&specs, "copy_cols")?, &params, &[("x", x), ("y", y)], groups)?))
    };
    let norm_call = |x, gain, y, cols| -> Result<Step> {
        let params = rms_norm::RmsNormParams { cols, eps, flags: 0, groups: 1 };
        Ok(Step::Call(b.call(&b.k.rms_norm, &params, &[("x", x), ("weight", gain), ("y", y)], ROWS)?))
    };
    let kv = cx.kv.layers[cx.i].as_ref().ok_or_else(|| {
        Error::Internal(format!("layer {} has a shared attention but no key/value cache", cx.i))
    })?;
    let [aq, ak, av, amlp] = &w.adapters;
    let mut steps = vec![
        copy(&a.h, d, a.scratch("ud")?, (2 * d, 0))?,
        copy(cx.input(Input::Embeddings)?, d, a.scratch("ud")?, (2 * d, d))?,
        norm_call(a.scratch("ud")?, &shared.norm, a.scratch("wide")?, 2 * d)?,
    ];
    let io = attention::gpu::Io {
        x: a.scratch("wide")?,
        out: Out::Into(&a.x_norm),
        adapters: [aq.as_ref(), ak.as_ref(), av.as_ref()],
    };
    steps.extend(attention::gpu::plan(&p.shared.attention, &shared.attention, cx, (kv, cx.kv.capacity), io)?);
    steps.push(norm_call(&a.x_norm, &shared.ff_norm, a.scratch("wide")?, d)?);
    let io = mlp::gpu::Io {
        x: a.scratch("wide")?,
        out: Out::Into(&a.x_norm),
        adapter: amlp.as_ref(),
        routed: None,
    };
    steps.extend(mlp::gpu::plan(&p.shared.mlp, &shared.mlp, cx, io)?);
    // The Mamba input: h + linear(t), normed.
    steps.push(copy(&a.h, d, a.scratch("wide")?, (d, 0))?);
    let lin =
        linear::LinearParams { x_stride: d, y_stride: d, flags: linear::ACCUMULATE, ..Default::default() };
    steps.push(Step::Linear(b.linear(&w.linear, &[("x", &a.x_norm), ("y", a.scratch("wide")?)], lin)?));
    // Its norm: the Mamba block's own (fused into decode_in_proj for decode steps), or here.
    let fused = mamba2::gpu::fuses(&p.mamba, &cx).then_some(a.scratch("wide")?);
    if fused.is_none() {
        steps.push(norm_call(a.scratch("wide")?, cx.norm, &a.x_norm, d)?);
    }
    let io = mamba2::gpu::Io {
        x: &a.x_norm,
        in_scale: 1.0,
        out: Out::Residual(cx.residual),
        fused,
        own_norm: true,
    };
    steps.extend(mamba2::gpu::plan_io(&p.mamba, &w.mamba, cx, io)?);
    Ok(steps)
}

impl GpuKind for Zamba2Layer {
    type GpuWeights = GpuWeights;

    fn allocate(&self, d: usize, alloc: &Alloc<'_>) -> Result<GpuWeights> {
        GpuWeights::allocate(self, d, alloc)
    }

    fn kernels(&self, kv: KvFormat) -> Vec<KernelSpec> {
        kernels(self, kv)
    }

    /// Its Mamba-2 mixer's fused decode step.
    fn decode_kernels(&self, formats: &[WeightFormat], direct: bool) -> Vec<KernelSpec> {
        mamba2::gpu::decode_kernels(formats, direct)
    }

    fn scratch(&self, d: usize, t: usize) -> Scratch {
        scratch(self, d, t)
    }

    fn check(&self, _ctx: &GpuContext, kv: KvFormat) -> Result<()> {
        check(self, kv)
    }

    /// Always: the shared block's output joins the Mamba input before the norm.
    fn norms_itself(&self, _w: &GpuWeights, _cx: &LayerCx<'_>) -> bool {
        true
    }

    /// The shared block's weights are its owner's (the block that first uses them).
    fn plan(&self, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
        let shared = cx
            .layers
            .get(self.owner_block)
            .and_then(|owner| owner.downcast_ref::<GpuWeights>())
            .and_then(|owner| owner.shared.as_ref())
            .ok_or_else(|| Error::Internal(format!("block {}'s shared block has no weights", cx.i)))?;
        plan(self, (w, shared), cx)
    }
}
