//! A Gated DeltaNet block on the GPU: in_proj_qkv, in_proj_z, in_proj_b and in_proj_a
//! gathered into one matrix as they load, so one matmul writes a row per token (q ‖ k ‖ v ‖ z
//! ‖ b ‖ a) → conv1d_silu over q ‖ k ‖ v → the recurrence: a prefill chunk of several tokens as
//! delta_prep (q, k normalised; β, g) + delta_chunks + delta_state (the chunked WY form,
//! checkpoints out of the same pass), a decode step as delta_step (prep and recurrence in one)
//! → the gated RMSNorm (rms_norm per head with the shared gain, then silu_gate) → out_proj onto
//! the residual: 6 dispatches per decode step. Every buffer is bound by the name of the WGSL
//! global it feeds.

use crate::blocks::delta_net::DeltaNet;
use crate::blocks::gpu_common::{LayerCx, Out};
use crate::blocks::gpu_kind::{GpuKind, GpuParts};
use crate::error::{Error, Result};
use crate::gpu::{GpuContext, KernelSpec};
use crate::gpu_kit::activations::Scratch;
use crate::gpu_kit::call::{Groups, Step};
use crate::gpu_kit::kv::KvFormat;
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::delta_chunks::{self, CHUNK, DeltaChunksParams};
use crate::kernels::delta_prep::{self, DeltaPrepParams};
use crate::kernels::delta_state::{self, DK_MAX, DeltaStateParams};
use crate::kernels::delta_step::DeltaStepParams;
use crate::kernels::silu_gate::{self, SiluGateParams};
use crate::kernels::{conv1d_silu, delta_step, linear, rms_norm};
use crate::model::Part;

/// A Gated DeltaNet block's weights on the GPU.
pub(crate) struct GpuWeights {
    /// (conv_dim + H_v·d_v + 2·H_v, D): in_proj_qkv ‖ in_proj_z ‖ in_proj_b ‖ in_proj_a
    in_proj: SplitMatrix,
    /// Each tensor's first row in in_proj: qkv, z, b, a.
    at: Vec<usize>,
    /// H_v: where dt_bias goes in a_dt.
    v_heads: usize,
    conv: wgpu::Buffer,    // (conv_dim, K)
    a_dt: wgpu::Buffer,    // (2·H_v): A = −exp(A_log) ‖ dt_bias
    norm: wgpu::Buffer,    // (d_v): the gated RMSNorm's gain, shared by the heads
    out_proj: SplitMatrix, // (D, H_v·d_v)
}

impl GpuParts for GpuWeights {
    /// Where the rows of tensor `part` go.
    fn destination(&self, part: Part) -> Option<Destination<'_>> {
        let vector = |buffer, at, neg_exp| Some(Destination::Vector { buffer, at, neg_exp });
        let rows = |i: usize| Some(Destination::Rows { matrix: &self.in_proj, at: self.at[i] });
        match part {
            Part::InProj => rows(0),
            Part::Gate => rows(1),
            Part::Beta => rows(2),
            Part::DtIn => rows(3),
            Part::Conv => vector(&self.conv, 0, false),
            Part::ALog => vector(&self.a_dt, 0, true),
            Part::DtBias => vector(&self.a_dt, self.v_heads, false),
            Part::GatedNorm => vector(&self.norm, 0, false),
            Part::OutProj => Some(Destination::Matrix(&self.out_proj)),
            _ => None,
        }
    }

    fn matrices(&self) -> Vec<&SplitMatrix> {
        vec![&self.in_proj, &self.out_proj]
    }

    fn vectors(&self) -> Vec<&wgpu::Buffer> {
        vec![&self.conv, &self.a_dt, &self.norm]
    }
}

impl DeltaNet {
    /// Floats per row of xz: q ‖ k ‖ v ‖ z ‖ b ‖ a.
    fn xz_width(&self) -> usize {
        self.conv_dim() + self.value_width() + 2 * self.v_heads
    }
}

impl GpuKind for DeltaNet {
    type GpuWeights = GpuWeights;

    fn allocate(&self, d: usize, a: &Alloc<'_>) -> Result<GpuWeights> {
        let (vw, hv) = (self.value_width(), self.v_heads);
        let label = "linear_attn.in_proj_qkv,z,b,a";
        let (in_proj, at) = a.gathered(
            label,
            &[(Part::InProj, self.conv_dim()), (Part::Gate, vw), (Part::Beta, hv), (Part::DtIn, hv)],
            d,
        )?;
        Ok(GpuWeights {
            in_proj,
            at,
            v_heads: hv,
            conv: a.vector("linear_attn.conv1d", self.conv_dim() * self.conv)?,
            a_dt: a.vector("linear_attn.A,dt_bias", 2 * hv)?,
            norm: a.vector("linear_attn.norm", self.v_dim)?,
            out_proj: a.matrix(Part::OutProj, "linear_attn.out_proj", (d, vw), false)?,
        })
    }

    fn kernels(&self, _kv: KvFormat) -> Vec<KernelSpec> {
        let spec = |name, source, bindings| KernelSpec { name, source, bindings, constants: Vec::new() };
        vec![
            spec("conv1d_silu", conv1d_silu::SOURCE, conv1d_silu::BINDINGS),
            spec("delta_prep", delta_prep::SOURCE, delta_prep::BINDINGS),
            spec("delta_chunks", delta_chunks::SOURCE, delta_chunks::BINDINGS),
            spec("delta_state", delta_state::SOURCE, delta_state::BINDINGS),
            spec("delta_step", delta_step::SOURCE, delta_step::BINDINGS),
            spec("silu_gate", silu_gate::SOURCE, silu_gate::BINDINGS),
        ]
    }

    /// xz: q ‖ k ‖ v ‖ z ‖ b ‖ a (T, xz_width); ud: the conv's q ‖ k ‖ v (T, conv_dim), then
    /// the gated norm's output; y: the recurrence's output (T, H_v·d_v); uw: U ‖ W (T, H_v,
    /// d_v + d_k); pmat: P (chunks, H_v, C, C).
    fn scratch(&self, _d: usize, t: usize) -> Scratch {
        let hv = self.v_heads;
        let s = Scratch { chunk: CHUNK, ..Scratch::none() };
        s.with("xz", t * self.xz_width())
            .with("ud", t * self.conv_dim())
            .with("y", t * self.value_width())
            .with("uw", t * hv * (self.v_dim + self.k_dim))
            .with("pmat", t.div_ceil(CHUNK) * hv * CHUNK * CHUNK)
    }

    /// Fails unless the kernels can run it: d_k within the state kernels' registers and
    /// workgroup memory, the conv's taps within its window.
    fn check(&self, _ctx: &GpuContext, _kv: KvFormat) -> Result<()> {
        if self.k_dim > DK_MAX || self.conv > conv1d_silu::K_MAX {
            return Err(Error::UnsupportedModel(format!(
                "linear_key_head_dim {} / linear_conv_kernel_dim {}: the Gated DeltaNet GPU kernels \
                 support at most {DK_MAX} / {}",
                self.k_dim,
                self.conv,
                conv1d_silu::K_MAX
            )));
        }
        Ok(())
    }

    fn plan(&self, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
        let LayerCx { b, a, s, i, residual, .. } = cx;
        let specs = self.kernels(KvFormat::F32);
        let kernel = |name| cx.kernel(&specs, name);
        let u = |v: usize| v as u32;
        let (d, cd, vw, hv) = (u(w.in_proj.cols), u(self.conv_dim()), u(self.value_width()), u(self.v_heads));
        let width = u(self.xz_width());
        let beta_at = cd + vw;
        let cap = &a.capture_layout;
        let (map_len, slot_len) = (u(cap.map_len), u(cap.slot_len));
        let (xz, ud, y) = (a.scratch("xz")?, a.scratch("ud")?, a.scratch("y")?);
        let (uw, pmat) = (a.scratch("uw")?, a.scratch("pmat")?);
        let lin = |x_stride, y_stride, y_col| linear::LinearParams {
            x_stride,
            y_stride,
            y_col,
            ..Default::default()
        };
        let mut steps =
            vec![Step::Linear(b.linear(&w.in_proj, &[("x", &a.x_norm), ("y", xz)], lin(d, width, 0))?)];
        let conv = conv1d_silu::Conv1dParams {
            d_inner: cd,
            d_conv: u(self.conv),
            xz_stride: width,
            state_offset: u(cap.conv_at(i)),
            has_bias: 0,
            map_len,
            slot_len,
            x_at: 0,
        };
        let conv_io = [
            ("xz", xz),
            ("weight", &w.conv),
            ("bias", b.dummy),
            ("conv_state", &s.conv),
            ("ud", ud),
            ("capture", &a.capture),
        ];
        steps.push(Step::Call(b.call(
            kernel("conv1d_silu")?,
            &conv,
            &conv_io,
            Groups::fixed(conv1d_silu::groups(cd)),
        )?));
        let (k_heads, k_dim, v_dim) = (u(self.k_heads), u(self.k_dim), u(self.v_dim));
        let prep = DeltaPrepParams {
            conv_dim: cd,
            k_heads,
            k_dim,
            v_heads: hv,
            xz_stride: width,
            beta_at,
            scale: 1.0 / (self.k_dim as f32).sqrt(),
            _pad: 0,
        };
        let prep_io = [("ud", ud), ("xz", xz), ("a_dt", &w.a_dt)];
        // A prefill chunk's; a decode step's delta_step does this itself.
        steps.push(Step::Bulk(b.call(
            kernel("delta_prep")?,
            &prep,
            &prep_io,
            Groups::Rows { per_token: k_heads, z: 1 },
        )?));
        let chunks = DeltaChunksParams {
            conv_dim: cd,
            k_heads,
            k_dim,
            v_dim,
            v_heads: hv,
            xz_stride: width,
            beta_at,
            _pad: 0,
        };
        let chunks_io = [("ud", ud), ("xz", xz), ("uw", uw), ("pmat", pmat)];
        steps.push(Step::Bulk(b.call(kernel("delta_chunks")?, &chunks, &chunks_io, Groups::PerChunk(hv))?));
        let state = DeltaStateParams {
            conv_dim: cd,
            k_heads,
            k_dim,
            v_dim,
            v_heads: hv,
            xz_stride: width,
            c_at: beta_at + hv,
            state_offset: u(cap.ssm_in_buffer(i)),
            map_len,
            slot_len,
            slot_ssm_at: u(cap.ssm_at(i)),
            _pad: 0,
        };
        let groups = Groups::fixed(delta_state::groups(self.v_heads, self.v_dim));
        let out = [("ssm_state", &s.ssm), ("y", y), ("capture", &a.capture)];
        let state_io = [&[("ud", ud), ("xz", xz), ("uw", uw), ("pmat", pmat)][..], &out].concat();
        steps.push(Step::Bulk(b.call(kernel("delta_state")?, &state, &state_io, groups)?));
        let step = DeltaStepParams {
            conv_dim: cd,
            k_heads,
            k_dim,
            v_dim,
            v_heads: hv,
            xz_stride: width,
            beta_at,
            state_offset: state.state_offset,
            map_len,
            slot_len,
            slot_ssm_at: state.slot_ssm_at,
            scale: prep.scale,
        };
        let step_io = [&[("ud", ud), ("xz", xz), ("a_dt", &w.a_dt)][..], &out].concat();
        steps.push(Step::Decode(b.call(kernel("delta_step")?, &step, &step_io, groups)?));
        // The gated RMSNorm: each head's d_v values by their own RMS, the shared gain, into ud;
        // then · silu(z).
        let norm =
            rms_norm::RmsNormParams { cols: v_dim, eps: self.eps, flags: rms_norm::SHARED, groups: hv };
        steps.push(Step::Call(b.call(
            &b.k.rms_norm,
            &norm,
            &[("x", y), ("weight", &w.norm), ("y", ud)],
            Groups::Rows { per_token: hv, z: 1 },
        )?));
        let gate = SiluGateParams { cols: vw, y_stride: vw, z_stride: width, z_col: cd };
        let values = Groups::Values { per_token: vw, wg: silu_gate::WG };
        steps.push(Step::Call(b.call(kernel("silu_gate")?, &gate, &[("z", xz), ("y", ud)], values)?));
        let (out_y, p) = Out::Residual(residual).apply(&a.h, lin(vw, d, 0));
        steps.push(Step::Linear(b.linear(&w.out_proj, &[("x", ud), ("y", out_y)], p)?));
        Ok(steps)
    }
}
