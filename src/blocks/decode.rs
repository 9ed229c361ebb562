//! The fused decode step's pieces every Mamba mixer shares on the GPU: for a chunk of one token
//! with no checkpoint to capture, the layer's RMSNorm, in_proj and the conv1d + SiLU run as one
//! `decode_in_proj` dispatch (the conv's output left in place of its input in xz), and the
//! unfused calls ([`Step::Unfused`]) run for every other chunk; Mamba-2's gated norm, out_proj
//! and the residual add as one `decode_out_proj`. The kinds' own parts:
//! `src/blocks/mamba1/decode.rs` (and Mamba-2's in `src/blocks/mamba2/gpu.rs`).

use crate::blocks::gpu_common::{GpuSsm, LayerCx};
use crate::error::Result;
use crate::gpu::KernelSpec;
use crate::gpu_kit::WeightFormat;
use crate::gpu_kit::call::{Builder, Call, Groups, ROWS, Step, scales_at};
use crate::gpu_kit::split::SplitMatrix;
use crate::kernels::scale_segments::Segments;
use crate::kernels::{conv1d_silu, decode_in_proj, decode_out_proj, rms_norm};

/// The decode_in_proj kernel for in_proj weights in `format` (`direct`: the software-adapter
/// matmuls, one invocation per four rows).
pub(crate) fn in_proj_spec(format: WeightFormat, direct: bool) -> KernelSpec {
    KernelSpec {
        name: "decode_in_proj",
        source: decode_in_proj::SOURCE,
        bindings: decode_in_proj::BINDINGS,
        constants: vec![
            ("W_FORMAT", format.shader_value()),
            ("LANES", f64::from(decode_in_proj::lanes(direct))),
        ],
    }
}

/// The decode_out_proj kernel (Mamba-2's gated norm + out_proj) for out_proj weights in
/// `format`.
pub(crate) fn out_proj_spec(format: WeightFormat, direct: bool) -> KernelSpec {
    KernelSpec {
        name: "decode_out_proj",
        source: decode_out_proj::SOURCE,
        bindings: decode_out_proj::BINDINGS,
        constants: vec![
            ("W_FORMAT", format.shader_value()),
            ("LANES", f64::from(decode_in_proj::lanes(direct))),
        ],
    }
}

/// Whether a mixer with a `d_conv`-wide conv can fuse at all: asked for at load, and the conv
/// within the kernel's window.
pub(crate) fn possible(cx: &LayerCx<'_>, d_conv: usize) -> bool {
    cx.b.k.fused && d_conv <= conv1d_silu::K_MAX
}

/// The layer's RMSNorm of `input` (D wide: the residual h; Zamba2: its Mamba input) into
/// x_norm, for the chunks that do not fuse it.
pub(crate) fn norm(cx: &LayerCx<'_>, input: &wgpu::Buffer, d: u32) -> Result<Step> {
    let params = rms_norm::RmsNormParams { cols: d, eps: cx.eps, flags: 0, groups: 1 };
    let io = [("x", input), ("weight", cx.norm), ("y", &cx.a.x_norm)];
    Ok(Step::Unfused(Box::new(Step::Call(cx.b.call(&cx.b.k.rms_norm, &params, &io, ROWS)?))))
}

/// Where a mixer's conv reads in in_proj's output: from row `from`, `channels` rows, `taps`
/// wide.
#[derive(Clone, Copy)]
pub(crate) struct ConvRows {
    pub(crate) from: usize,
    pub(crate) channels: usize,
    pub(crate) taps: usize,
}

/// What in_proj's output is multiplied by after its bias, in the unfused path's order: the
/// input multiplier folded into in_proj (linear's SCALE: Falcon-H1's `ssm_in_multiplier`),
/// then a scale per row segment z ‖ x ‖ B ‖ C ‖ δ (`scale_segments`: its `ssm_multipliers`).
#[derive(Clone, Copy)]
pub(crate) struct InMultipliers {
    pub(crate) scale: f32,
    /// scale_segments' ends and scales.
    pub(crate) segments: Option<Segments>,
}

impl InMultipliers {
    /// None: Mamba-1's and HF Mamba-2's in_proj.
    pub(crate) const NONE: Self = Self { scale: 1.0, segments: None };
}

/// decode_in_proj over `ssm`'s in_proj (a call per part): the norm of `input` (row 0: the
/// residual h, or Zamba2's Mamba input), in_proj into xz (times `mult`), and the conv step
/// over `conv`'s rows, written in place of their inputs.
pub(crate) fn in_proj(
    ssm: &GpuSsm,
    (input, conv, mult): (&wgpu::Buffer, ConvRows, InMultipliers),
    cx: &LayerCx<'_>,
) -> Result<Vec<Step>> {
    let LayerCx { b, a, s, i, .. } = *cx;
    let m = &ssm.in_proj;
    let kernel = b.k.block(&in_proj_spec(m.format, b.k.direct))?;
    let conv_bias = if ssm.conv_bias.is_some() { decode_in_proj::CONV_BIAS } else { 0 };
    let scaled = if mult.scale != 1.0 { decode_in_proj::SCALE } else { 0 };
    let segments = if mult.segments.is_some() { decode_in_proj::SEGMENTS } else { 0 };
    m.parts
        .iter()
        .map(|part| {
            let bias = if part.bias.is_some() { decode_in_proj::BIAS } else { 0 };
            let params = decode_in_proj::DecodeInProjParams {
                n_in: m.cols as u32,
                n_out: part.rows as u32,
                row_start: part.row_start as u32,
                w_scales: scales_at(m, part.rows),
                conv_from: conv.from as u32,
                channels: conv.channels as u32,
                d_conv: conv.taps as u32,
                state_offset: a.capture_layout.conv_at(i) as u32,
                flags: bias | conv_bias | scaled | segments,
                eps: cx.eps,
                scale: mult.scale,
                segments: mult.segments.unwrap_or_default(),
            };
            let io = [
                ("h", input),
                ("gain", cx.norm),
                ("w", &part.buffer),
                ("bias", part.bias.as_ref().unwrap_or(b.dummy)),
                ("conv", &ssm.conv),
                ("conv_bias", ssm.conv_bias.as_ref().unwrap_or(b.dummy)),
                ("conv_state", &s.conv),
                ("xz", a.scratch("xz")?),
            ];
            let groups = Groups::fixed(decode_in_proj::groups(part.rows as u32, b.k.direct));
            Ok(Step::Fused(Box::new(Step::Call(b.call(kernel, &params, &io, groups)?))))
        })
        .collect()
}

/// decode_out_proj over out_proj `m` (a call per part): `x` (1, E·D) normed in `groups` groups
/// with `gain` and `eps` (then gated by silu(z), z the first E·D of `gate_after`'s row 0,
/// where given: Falcon-H1's norm before the gate), then out_proj, times `residual`, added
/// onto h.
pub(crate) fn out_proj(
    m: &SplitMatrix,
    (x, gain, gate_after): (&wgpu::Buffer, &wgpu::Buffer, Option<&wgpu::Buffer>),
    (groups, eps, residual): (usize, f32, f32),
    cx: &LayerCx<'_>,
) -> Result<Vec<Step>> {
    let b = cx.b;
    let kernel = b.k.block(&out_proj_spec(m.format, b.k.direct))?;
    let scale = if residual != 1.0 { decode_out_proj::SCALE } else { 0 };
    let gate = if gate_after.is_some() { decode_out_proj::GATE_AFTER } else { 0 };
    m.parts
        .iter()
        .map(|part| {
            let bias = if part.bias.is_some() { decode_out_proj::BIAS } else { 0 };
            let params = decode_out_proj::DecodeOutProjParams {
                n_in: m.cols as u32,
                n_out: part.rows as u32,
                y_col: part.row_start as u32,
                w_scales: scales_at(m, part.rows),
                groups: groups as u32,
                flags: bias | scale | gate,
                eps,
                scale: residual,
            };
            let io = [
                ("x", x),
                ("gain", gain),
                ("w", &part.buffer),
                ("bias", part.bias.as_ref().unwrap_or(b.dummy)),
                ("h", &cx.a.h),
                ("z", gate_after.unwrap_or(b.dummy)),
            ];
            let groups = Groups::fixed(decode_in_proj::groups(part.rows as u32, b.k.direct));
            Ok(Step::Fused(Box::new(Step::Call(b.call(kernel, &params, &io, groups)?))))
        })
        .collect()
}

/// The fused decode step's head: the model's norm_f of h and the LM head `head` as one
/// decode_in_proj call per part (no conv rows; the logit scale applied as linear applies it),
/// writing `logits` — or `None` where a part's dispatch would pass the device's limit (the
/// unfused norm and head serve then). `conv_state` is bound but never touched.
pub(crate) fn head(
    b: &Builder<'_>,
    (head, norm_f, eps, scale): (&SplitMatrix, &wgpu::Buffer, f32, f32),
    (h, logits, conv_state): (&wgpu::Buffer, &wgpu::Buffer, &wgpu::Buffer),
) -> Result<Option<Vec<Call>>> {
    let kernel = b.k.block(&in_proj_spec(head.format, b.k.direct))?;
    let limit = b.ctx.limits().max_compute_workgroups_per_dimension;
    let mut calls = Vec::with_capacity(head.parts.len());
    for part in &head.parts {
        let groups = decode_in_proj::groups(part.rows as u32, b.k.direct);
        if groups.0 > limit {
            return Ok(None);
        }
        let bias = if part.bias.is_some() { decode_in_proj::BIAS } else { 0 };
        let scaled = if scale != 1.0 { decode_in_proj::SCALE } else { 0 };
        let params = decode_in_proj::DecodeInProjParams {
            n_in: head.cols as u32,
            n_out: part.rows as u32,
            row_start: part.row_start as u32,
            w_scales: scales_at(head, part.rows),
            flags: bias | scaled,
            eps,
            scale,
            ..Default::default()
        };
        let io = [
            ("h", h),
            ("gain", norm_f),
            ("w", &part.buffer),
            ("bias", part.bias.as_ref().unwrap_or(b.dummy)),
            ("conv", b.dummy),
            ("conv_bias", b.dummy),
            ("conv_state", conv_state),
            ("xz", logits),
        ];
        calls.push(b.call(kernel, &params, &io, Groups::fixed(groups))?);
    }
    Ok(Some(calls))
}
