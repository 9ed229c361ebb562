//! Each block's calls for its architecture's mixer, built once at load ([`layer`]):
//! - Mamba-1 / Falcon-Mamba: in_proj → conv1d_silu over x → x_proj (→ rms_slices) → dt_proj +
//!   softplus → scan_chunks / scan_carry / scan_output (gated) → out_proj;
//! - Mamba-2: in_proj (z ‖ x ‖ B ‖ C ‖ δ) → conv1d_silu over x ‖ B ‖ C → ssd_chunks /
//!   scan_carry / ssd_output (Δ from δ inside the scan, gated) → rms_norm over G groups per
//!   token (the gated RMSNorm) → out_proj.

use crate::error::Result;
use crate::gpu_model::activations::{Activations, StateBuffers};
use crate::gpu_model::plan::{Builder, LayerPlan, Projections};
use crate::gpu_model::weights::GpuLayer;
use crate::kernels::{conv1d_silu, linear, rms_norm, rms_slices, scan_carry, scan_chunks, scan_output};
use crate::kernels::{ssd_chunks::SsdParams, ssd_output::SsdOutputParams};
use crate::model::{Arch, Config};

/// The calls of block `i` (weights `l`) of model `c`.
pub(crate) fn layer(
    b: &Builder<'_>,
    c: &Config,
    i: usize,
    l: &GpuLayer,
    a: &Activations,
    s: &StateBuffers,
) -> Result<LayerPlan> {
    let (d, di, n) = (c.d_model as u32, c.d_inner as u32, c.d_state as u32);
    let i = i as u32;
    let (map_len, slot_len) = (a.max_tokens as u32, a.slot_len as u32);
    let (cd, width) = (c.conv_dim() as u32, c.in_proj_dim() as u32);
    // The slot layout: every layer's conv window (K−1, conv_dim), then every SSM state.
    let conv_total = c.n_layer as u32 * (c.d_conv as u32 - 1) * cd;
    let lin = |x_stride, y_stride| linear::LinearParams { x_stride, y_stride, ..Default::default() };
    let conv = conv1d_silu::Conv1dParams {
        d_inner: cd,
        d_conv: c.d_conv as u32,
        xz_stride: width,
        state_offset: i * (c.d_conv as u32 - 1) * cd,
        has_bias: l.conv_bias.is_some() as u32,
        map_len,
        slot_len,
        // Mamba-2's conv input x ‖ B ‖ C follows z.
        x_at: if c.arch == Arch::Mamba2 { di } else { 0 },
    };
    let conv = b.call(
        &b.k.conv1d_silu,
        &conv,
        &[&a.xz, &l.conv, l.conv_bias.as_ref().unwrap_or(b.dummy), &s.conv, &a.ud, &a.capture],
    );
    let norm = rms_norm::RmsNormParams { cols: d, eps: c.norm_eps, flags: 0, groups: 1 };
    let carry = scan_carry::ScanCarryParams { plane: di * n, state_offset: i * di * n, _pad: [0; 2] };
    let scan_carry = b.call(&b.k.scan_carry, &carry, &[&a.chunk_ab, &s.ssm, &a.chunk_h0]);
    let out = linear::LinearParams { flags: linear::ACCUMULATE, ..lin(di, d) };
    let (Some(x_proj), Some(dt_proj)) = (&l.x_proj, &l.dt_proj) else {
        // Mamba-2 (its blocks have no x_proj / dt_proj).
        let ssd = SsdParams::new(c, a.chunk);
        let output = SsdOutputParams {
            ssd,
            state_offset: i * di * n,
            map_len,
            slot_len,
            slot_ssm_at: conv_total + i * di * n,
        };
        let groups = c.n_groups as u32;
        let gated = rms_norm::RmsNormParams { cols: di / groups, eps: c.norm_eps, flags: 0, groups };
        let gain = l.gated_norm.as_ref().unwrap_or(b.dummy);
        return Ok(LayerPlan {
            norm: b.call(&b.k.rms_norm, &norm, &[&a.h, &l.norm, &a.x_norm]),
            in_proj: b.linear(&a.x_norm, &l.in_proj, &a.xz, lin(d, width))?,
            conv,
            conv_channels: cd,
            projections: None,
            scan_chunks: b.call(&b.k.scan_chunks, &ssd, &[&a.ud, &a.xz, &l.a_d, &a.chunk_ab]),
            scan_carry,
            scan_output: b.call(
                &b.k.scan_output,
                &output,
                &[&a.ud, &a.xz, &l.a_d, &a.chunk_h0, &s.ssm, &a.y, &a.capture],
            ),
            scan_width: ssd.groups(1).0,
            // The scan has read u: its rows take the normalised output, (T, E·D).
            gated_norm: Some((b.call(&b.k.rms_norm, &gated, &[&a.y, gain, &a.ud]), groups)),
            out_proj: b.linear(&a.ud, &l.out_proj, &a.h, out)?,
        });
    };
    let r = c.dt_rank as u32;
    let dbc_stride = r + 2 * n;
    let delta_at = (a.max_tokens * c.d_inner) as u32;
    let chunks = scan_chunks::ScanChunksParams {
        d_inner: di,
        dbc_stride,
        dt_rank: r,
        chunk: a.chunk as u32,
        delta_at,
        _pad: [0; 3],
    };
    let output = scan_output::ScanOutputParams {
        d_inner: di,
        dbc_stride,
        dt_rank: r,
        chunk: a.chunk as u32,
        state_offset: i * di * n,
        xz_stride: 2 * di,
        delta_at,
        map_len,
        slot_len,
        slot_ssm_at: conv_total + i * di * n,
        _pad: [0; 2],
    };
    // Δ lands in the second half of u‖Δ: y_col works as a base offset.
    let dt = linear::LinearParams { flags: linear::SOFTPLUS, y_col: delta_at, ..lin(dbc_stride, di) };
    let norms =
        rms_slices::RmsSlicesParams { stride: dbc_stride, dt_rank: r, d_state: n, eps: c.mixer_rms_eps };
    Ok(LayerPlan {
        norm: b.call(&b.k.rms_norm, &norm, &[&a.h, &l.norm, &a.x_norm]),
        in_proj: b.linear(&a.x_norm, &l.in_proj, &a.xz, lin(d, 2 * di))?,
        conv,
        conv_channels: di,
        projections: Some(Projections {
            x_proj: b.linear(&a.ud, x_proj, &a.dbc, lin(di, dbc_stride))?,
            x_proj_norms: b.k.rms_slices.as_ref().map(|kernel| b.call(kernel, &norms, &[&a.dbc])),
            dt_proj: b.linear(&a.dbc, dt_proj, &a.ud, dt)?,
        }),
        scan_chunks: b.call(&b.k.scan_chunks, &chunks, &[&a.ud, &a.dbc, &l.a_d, &a.chunk_ab]),
        scan_carry,
        scan_output: b.call(
            &b.k.scan_output,
            &output,
            &[&a.ud, &a.dbc, &a.xz, &l.a_d, &a.chunk_h0, &s.ssm, &a.y, &a.capture],
        ),
        scan_width: scan_chunks::groups(di, 1).0,
        gated_norm: None,
        out_proj: b.linear(&a.y, &l.out_proj, &a.h, out)?,
    })
}
