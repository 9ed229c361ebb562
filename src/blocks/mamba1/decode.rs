//! A Mamba-1 block's fused decode step on the GPU: for a chunk of one token with no checkpoint
//! to capture, four dispatches instead of seven — `decode_in_proj` (the layer's RMSNorm,
//! in_proj, conv1d + SiLU), x_proj (the shared GEMV), `decode_scan` (dt_proj + softplus, the
//! scan step, the gate), and out_proj + the residual add (the shared GEMV, as unfused).
//! Every other chunk runs the unfused calls ([`Step::Fused`] / [`Step::Unfused`]).

use crate::blocks::decode;
use crate::blocks::gpu_common::{GpuSsm, LayerCx};
use crate::blocks::mamba1::Mamba1;
use crate::error::Result;
use crate::gpu::KernelSpec;
use crate::gpu_kit::WeightFormat;
use crate::gpu_kit::call::{Groups, Step, scales_at};
use crate::gpu_kit::split::SplitMatrix;
use crate::kernels::{decode_scan, linear, scan_output};

/// The decode_scan kernel for dt_proj weights in `format` and state size `n`.
pub(crate) fn scan_spec(format: WeightFormat, n: usize) -> KernelSpec {
    KernelSpec {
        name: "decode_scan",
        source: decode_scan::SOURCE,
        bindings: decode_scan::BINDINGS,
        constants: vec![("W_FORMAT", format.shader_value()), ("N_STATE", n as f64)],
    }
}

/// The fused kernels a block `p` may dispatch: one of each per weight format in `formats`
/// (which formats its matrices fall back to depends on their widths).
pub(crate) fn kernels(p: &Mamba1, formats: &[WeightFormat], direct: bool) -> Vec<KernelSpec> {
    formats.iter().flat_map(|&f| [decode::in_proj_spec(f, direct), scan_spec(f, p.d_state)]).collect()
}

/// Whether the layer (block `p`, its `dt_proj`) runs the fused decode step: asked for at load,
/// dt_proj in one buffer, δ ‖ B ‖ C within decode_scan's stage and its workgroup memory within
/// the device's. Otherwise every chunk runs the unfused calls.
pub(crate) fn fuses(p: &Mamba1, dt_proj: &SplitMatrix, cx: &LayerCx<'_>) -> bool {
    let limit = cx.b.ctx.summary().max_compute_workgroup_storage_size as usize;
    decode::possible(cx, p.d_conv)
        && dt_proj.parts.len() == 1
        && p.dt_rank + 2 * p.d_state <= decode_scan::STAGE
        && p.d_state <= scan_output::N_MAX
        && decode_scan::workgroup_bytes(p.d_state) <= limit
}

/// The fused steps before x_proj: decode_in_proj over the x half of in_proj's rows.
pub(crate) fn in_proj(p: &Mamba1, ssm: &GpuSsm, cx: &LayerCx<'_>) -> Result<Vec<Step>> {
    let conv = decode::ConvRows { from: 0, channels: p.d_inner, taps: p.d_conv };
    decode::in_proj(ssm, (&cx.a.h, conv, decode::InMultipliers::NONE), cx)
}

/// x_proj over u, which decode_in_proj leaves in xz.
pub(crate) fn x_proj(x_proj: &SplitMatrix, cx: &LayerCx<'_>, params: linear::LinearParams) -> Result<Step> {
    let io = [("x", cx.a.scratch("xz")?), ("y", cx.a.scratch("dbc")?)];
    Ok(Step::Fused(Box::new(Step::Linear(cx.b.linear(x_proj, &io, params)?))))
}

/// decode_scan: dt_proj + softplus, the scan step and the gate, into y.
pub(crate) fn scan(p: &Mamba1, (ssm, dt): (&GpuSsm, &SplitMatrix), cx: &LayerCx<'_>) -> Result<Step> {
    let LayerCx { b, a, s, i, .. } = *cx;
    let part = &dt.parts[0];
    let kernel = b.k.block(&scan_spec(dt.format, p.d_state))?;
    let params = decode_scan::DecodeScanParams {
        d_inner: p.d_inner as u32,
        dbc_stride: p.x_proj_dim() as u32,
        dt_rank: p.dt_rank as u32,
        state_offset: a.capture_layout.ssm_in_buffer(i) as u32,
        w_scales: scales_at(dt, part.rows),
        flags: if part.bias.is_some() { decode_scan::BIAS } else { 0 },
        _pad: [0; 2],
    };
    let io = [
        ("xz", a.scratch("xz")?),
        ("dbc", a.scratch("dbc")?),
        ("a_d", &ssm.a_d),
        ("w", &part.buffer),
        ("bias", part.bias.as_ref().unwrap_or(b.dummy)),
        ("ssm_state", &s.ssm),
        ("y", a.scratch("y")?),
    ];
    let groups = Groups::fixed(decode_scan::groups(p.d_inner as u32));
    Ok(Step::Fused(Box::new(Step::Call(b.call(kernel, &params, &io, groups)?))))
}
