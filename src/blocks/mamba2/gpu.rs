//! A Mamba-2 block on the GPU: its weight buffers and the calls it records, built once at load —
//! in_proj (z ‖ x ‖ B ‖ C ‖ δ) → conv1d_silu over x ‖ B ‖ C → ssd_chunks / scan_carry (a
//! prefill of several scan chunks) → ssd_output (Δ from δ inside the scan, gated) → rms_norm
//! over G groups per token (the gated RMSNorm) → out_proj. Every buffer is bound by the name of
//! the WGSL global it feeds.

use crate::blocks::gpu::{GpuSsm, LayerCx, SsmShape, carry_call};
use crate::blocks::mamba2::{GatedNorm, Mamba2};
use crate::error::{Error, Result};
use crate::gpu::KernelSpec;
use crate::gpu_model::activations::Scratch;
use crate::gpu_model::call::{Groups, Step};
use crate::gpu_model::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::ssd_chunks::{self, SsdParams};
use crate::kernels::ssd_output::{self, SsdOutputParams};
use crate::kernels::{conv1d_silu, linear, rms_norm, scan_carry};
use crate::model::Part;

/// A Mamba-2 block's weights on the GPU.
pub(crate) struct GpuWeights {
    /// in_proj (E·D + conv_dim + H, D), the conv (conv_dim, K), A ‖ D ‖ dt_bias (3·H),
    /// out_proj (D, E·D).
    pub ssm: GpuSsm,
    pub gated_norm: wgpu::Buffer, // (E·D): the gated RMSNorm's gain
}

impl GpuWeights {
    /// Allocates (zeroed) every buffer of block `p` (residual width `d`).
    pub fn allocate(p: &Mamba2, d: usize, a: &Alloc<'_>) -> Result<Self> {
        let h = p.n_heads;
        let shape = SsmShape {
            in_proj: (p.in_proj_dim(), d),
            conv: (p.conv_dim(), p.d_conv),
            a_d: (3 * h, h),
            out_proj: (d, p.d_inner),
        };
        Ok(Self { ssm: GpuSsm::allocate(shape, a)?, gated_norm: a.vector("mixer.norm", p.d_inner)? })
    }

    /// Where the rows of tensor `part` go.
    pub fn destination(&self, part: Part) -> Option<Destination<'_>> {
        let vector = |buffer, at| Some(Destination::Vector { buffer, at, neg_exp: false });
        match part {
            // dt_bias after A and D.
            Part::DtBias => vector(&self.ssm.a_d, 2 * self.ssm.d_at),
            Part::GatedNorm => vector(&self.gated_norm, 0),
            _ => self.ssm.destination(part),
        }
    }

    /// Its weight matrices.
    pub fn matrices(&self) -> Vec<&SplitMatrix> {
        vec![&self.ssm.in_proj, &self.ssm.out_proj]
    }

    /// Its f32 vector buffers.
    pub fn vectors(&self) -> Vec<&wgpu::Buffer> {
        let mut out = self.ssm.vectors();
        out.push(&self.gated_norm);
        out
    }
}

/// The kernels it dispatches: the SSD scans specialised for its N.
pub(crate) fn kernels(p: &Mamba2) -> Vec<KernelSpec> {
    let n = vec![("N_STATE", p.d_state as f64)];
    let spec = |name, source, bindings, constants| KernelSpec { name, source, bindings, constants };
    vec![
        spec("conv1d_silu", conv1d_silu::SOURCE, conv1d_silu::BINDINGS, Vec::new()),
        spec("ssd_chunks", ssd_chunks::SOURCE, ssd_chunks::BINDINGS, n.clone()),
        spec("scan_carry", scan_carry::SOURCE, scan_carry::BINDINGS, Vec::new()),
        spec("ssd_output", ssd_output::SOURCE, ssd_output::BINDINGS, n),
    ]
}

/// Its share of the scratch buffers for `t` tokens.
pub(crate) fn scratch(p: &Mamba2, t: usize) -> Scratch {
    Scratch {
        xz: t * p.in_proj_dim(),
        ud: t * p.conv_dim(),
        dbc: 1,
        y: t * p.d_inner,
        plane: p.d_inner * p.d_state,
        chunk: ssd_chunks::CHUNK,
        ..Scratch::none()
    }
}

/// Fails unless its kernels can run: the SSD kernels stage B ‖ C in a fixed 8 KiB, a tile of
/// tokens at a time, and the conv's window is a fixed-size array.
pub(crate) fn check(p: &Mamba2) -> Result<()> {
    if p.gated_norm != GatedNorm::GateThenNorm || p.in_scales != [1.0; 5] {
        return Err(Error::UnsupportedModel(
            "Falcon-H1's Mamba-2 variant (ssm_multipliers, norm before gate or no norm) on the GPU backend"
                .into(),
        ));
    }
    if p.d_conv > conv1d_silu::K_MAX || p.d_state > ssd_chunks::N_MAX {
        return Err(Error::UnsupportedModel(format!(
            "conv_kernel {} / state_size {}: the Mamba-2 GPU kernels support at most {} / {}",
            p.d_conv,
            p.d_state,
            conv1d_silu::K_MAX,
            ssd_chunks::N_MAX
        )));
    }
    Ok(())
}

/// The calls of a layer, a block `p` with weights `w`, in dispatch order.
pub(crate) fn plan(p: &Mamba2, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
    let LayerCx { b, a, s, i, residual, .. } = cx;
    let specs = kernels(p);
    let kernel = |name| cx.kernel(&specs, name);
    let (d, di, n) = (w.ssm.in_proj.cols as u32, p.d_inner as u32, p.d_state as u32);
    let (cd, width) = (p.conv_dim() as u32, p.in_proj_dim() as u32);
    let cap = &a.capture_layout;
    let (map_len, slot_len) = (cap.map_len as u32, cap.slot_len as u32);
    let state_offset = cap.ssm_in_buffer(i) as u32;
    let lin = |x_stride, y_stride| linear::LinearParams { x_stride, y_stride, ..Default::default() };
    let conv = conv1d_silu::Conv1dParams {
        d_inner: cd,
        d_conv: p.d_conv as u32,
        xz_stride: width,
        state_offset: cap.conv_at(i) as u32,
        has_bias: w.ssm.conv_bias.is_some() as u32,
        map_len,
        slot_len,
        // The conv input x ‖ B ‖ C follows z.
        x_at: di,
    };
    let ssd = SsdParams::new(p, a.chunk);
    let output = SsdOutputParams { ssd, state_offset, map_len, slot_len, slot_ssm_at: cap.ssm_at(i) as u32 };
    let groups = p.n_groups as u32;
    let gated = rms_norm::RmsNormParams { cols: di / groups, eps: p.norm_eps, flags: 0, groups };
    let out = linear::LinearParams { flags: linear::ACCUMULATE, ..lin(di, d) }.scaled(residual);
    let scan = Groups::PerChunk(ssd.groups(1).0);
    // What both scan passes read: u (x ‖ B ‖ C), δ in zxbcdt, A ‖ D ‖ dt_bias.
    let inputs = [("u", &a.ud), ("zxbcdt", &a.xz), ("a_dt", &w.ssm.a_d)];
    let scan_out = [("chunk_h0", &a.chunk_h0), ("ssm_state", &s.ssm), ("y", &a.y), ("capture", &a.capture)];
    Ok(vec![
        Step::Linear(b.linear(&w.ssm.in_proj, &[("x", &a.x_norm), ("y", &a.xz)], lin(d, width))?),
        w.ssm.conv_call(b, kernel("conv1d_silu")?, &conv, (a, s))?,
        Step::Prefill(b.call(
            kernel("ssd_chunks")?,
            &ssd,
            &[&inputs[..], &[("chunk_ab", &a.chunk_ab)]].concat(),
            scan,
        )?),
        carry_call(b, kernel("scan_carry")?, (di * n, state_offset), (a, s))?,
        Step::Call(b.call(kernel("ssd_output")?, &output, &[&inputs[..], &scan_out].concat(), scan)?),
        // The scan has read u: its rows take the normalised output, (T, E·D).
        Step::Call(b.call(
            &b.k.rms_norm,
            &gated,
            &[("x", &a.y), ("weight", &w.gated_norm), ("y", &a.ud)],
            Groups::Rows { per_token: groups, z: 1 },
        )?),
        Step::Linear(b.linear(&w.ssm.out_proj, &[("x", &a.ud), ("y", &a.h)], out)?),
    ])
}
