//! A short-convolution block on the GPU: in_proj → short_conv (B ⊙ x̃, the causal conv over
//! the carried window, C ⊙) → out_proj onto the residual. Every buffer is bound by the name of
//! the WGSL global it feeds.

use crate::blocks::gpu_common::{LayerCx, Out};
use crate::blocks::gpu_kind::{GpuKind, GpuParts};
use crate::blocks::short_conv::ShortConv;
use crate::error::{Error, Result};
use crate::gpu::{GpuContext, KernelSpec};
use crate::gpu_kit::activations::Scratch;
use crate::gpu_kit::call::{Groups, Step};
use crate::gpu_kit::kv::KvFormat;
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::{linear, short_conv};
use crate::model::Part;

/// A short-convolution block's weights on the GPU.
pub(crate) struct GpuWeights {
    in_proj: SplitMatrix,            // (3·D, D), bias (3·D) where the config has biases
    conv: wgpu::Buffer,              // (D, K)
    conv_bias: Option<wgpu::Buffer>, // (D)
    out_proj: SplitMatrix,           // (D, D), bias (D)
}

impl GpuParts for GpuWeights {
    /// Where the rows of tensor `part` go.
    fn destination(&self, part: Part) -> Option<Destination<'_>> {
        let vector = |buffer| Destination::Vector { buffer, at: 0, neg_exp: false };
        match part {
            Part::InProj => Some(Destination::Matrix(&self.in_proj)),
            Part::InProjBias => Some(Destination::Bias(&self.in_proj)),
            Part::Conv => Some(vector(&self.conv)),
            Part::ConvBias => self.conv_bias.as_ref().map(vector),
            Part::OutProj => Some(Destination::Matrix(&self.out_proj)),
            Part::OutProjBias => Some(Destination::Bias(&self.out_proj)),
            _ => None,
        }
    }

    fn matrices(&self) -> Vec<&SplitMatrix> {
        vec![&self.in_proj, &self.out_proj]
    }

    fn vectors(&self) -> Vec<&wgpu::Buffer> {
        [Some(&self.conv), self.conv_bias.as_ref()].into_iter().flatten().collect()
    }
}

impl GpuKind for ShortConv {
    type GpuWeights = GpuWeights;

    fn allocate(&self, d: usize, a: &Alloc<'_>) -> Result<GpuWeights> {
        Ok(GpuWeights {
            in_proj: a.matrix(Part::InProj, "conv.in_proj", (3 * d, d), self.bias)?,
            conv: a.vector("conv.conv", d * self.taps)?,
            conv_bias: self.bias.then(|| a.vector("conv.conv_bias", d)).transpose()?,
            out_proj: a.matrix(Part::OutProj, "conv.out_proj", (d, d), self.bias)?,
        })
    }

    fn kernels(&self, _kv: KvFormat) -> Vec<KernelSpec> {
        vec![KernelSpec {
            name: "short_conv",
            source: short_conv::SOURCE,
            bindings: short_conv::BINDINGS,
            constants: Vec::new(),
        }]
    }

    /// bcx: in_proj's B ‖ C ‖ x̃ (T, 3·D); y: the gated conv's output (T, D).
    fn scratch(&self, d: usize, t: usize) -> Scratch {
        Scratch::none().with("bcx", 3 * t * d).with("y", t * d)
    }

    /// Fails unless its taps fit the kernel's window.
    fn check(&self, _ctx: &GpuContext, _kv: KvFormat) -> Result<()> {
        if self.taps > short_conv::K_MAX {
            return Err(Error::UnsupportedModel(format!(
                "conv_L_cache {}: the GPU kernel supports at most {}",
                self.taps,
                short_conv::K_MAX
            )));
        }
        Ok(())
    }

    fn plan(&self, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
        let LayerCx { b, a, s, i, residual, .. } = cx;
        let specs = self.kernels(KvFormat::F32);
        let d = self.channels as u32;
        let cap = &a.capture_layout;
        let params = short_conv::ShortConvParams {
            channels: d,
            taps: self.taps as u32,
            state_offset: cap.conv_at(i) as u32,
            has_bias: self.bias as u32,
            map_len: cap.map_len as u32,
            slot_len: cap.slot_len as u32,
            _pad: [0; 2],
        };
        let (bcx, y) = (a.scratch("bcx")?, a.scratch("y")?);
        let lin = |x_stride, y_stride| linear::LinearParams { x_stride, y_stride, ..Default::default() };
        let conv = [
            ("bcx", bcx),
            ("weight", &w.conv),
            ("bias", w.conv_bias.as_ref().unwrap_or(b.dummy)),
            ("conv_state", &s.conv),
            ("y", y),
            ("capture", &a.capture),
        ];
        let (out, p) = Out::Residual(residual).apply(&a.h, lin(d, d));
        Ok(vec![
            Step::Linear(b.linear(&w.in_proj, &[("x", &a.x_norm), ("y", bcx)], lin(d, 3 * d))?),
            Step::Call(b.call(
                cx.kernel(&specs, "short_conv")?,
                &params,
                &conv,
                Groups::fixed(short_conv::groups(d)),
            )?),
            Step::Linear(b.linear(&w.out_proj, &[("x", y), ("y", out)], p)?),
        ])
    }
}
