//! Each block's calls for its architecture's mixer, built once at load ([`layer`]):
//! - Mamba-1 / Falcon-Mamba: in_proj → conv1d_silu over x → x_proj (→ rms_slices) → dt_proj +
//!   softplus → scan_chunks / scan_carry / scan_output (gated) → out_proj;
//! - Mamba-2: in_proj (z ‖ x ‖ B ‖ C ‖ δ) → conv1d_silu over x ‖ B ‖ C → ssd_chunks /
//!   scan_carry / ssd_output (Δ from δ inside the scan, gated) → rms_norm over G groups per
//!   token (the gated RMSNorm) → out_proj.
//!
//! Every buffer is bound by the name of the WGSL global it feeds (see `call.rs`).

use crate::error::Result;
use crate::gpu_model::activations::{Activations, StateBuffers};
use crate::gpu_model::call::{Builder, Call, Groups, LinearCall, ROWS};
use crate::gpu_model::weights::GpuLayer;
use crate::kernels::{conv1d_silu, linear, rms_norm, rms_slices, scan_carry, scan_chunks, scan_output};
use crate::kernels::{ssd_chunks::SsdParams, ssd_output::SsdOutputParams};
use crate::model::{Arch, Config};

/// Mamba-1's projections between the conv and the scan: δ ‖ B ‖ C, then Δ.
pub(crate) struct Projections {
    pub x_proj: LinearCall,
    /// Falcon-Mamba: δ, B and C normalised in place after x_proj.
    pub x_proj_norms: Option<Call>,
    pub dt_proj: LinearCall,
}

/// The calls of one Mamba block, in dispatch order, with the sizes their dispatches need that
/// do not change with T.
pub(crate) struct LayerPlan {
    pub norm: Call,
    pub in_proj: LinearCall,
    pub conv: Call,
    /// Mamba-1 only (Mamba-2's Δ, B, C come out of in_proj and the conv).
    pub projections: Option<Projections>,
    pub scan_chunks: Call,
    pub scan_carry: Call,
    pub scan_output: Call,
    /// Mamba-2: the gated RMSNorm (rms_norm over G rows per token).
    pub gated_norm: Option<Call>,
    pub out_proj: LinearCall,
}

/// A dispatch size that does not depend on T.
fn fixed((x, y, z): (u32, u32, u32)) -> Groups {
    Groups::Fixed(x, y, z)
}

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
    let cap = &a.capture_layout;
    let (map_len, slot_len) = (cap.map_len as u32, cap.slot_len as u32);
    let (conv_at, ssm_at) = (cap.conv_at(i) as u32, cap.ssm_at(i) as u32);
    let i = i as u32;
    let (cd, width) = (c.conv_dim() as u32, c.in_proj_dim() as u32);
    let lin = |x_stride, y_stride| linear::LinearParams { x_stride, y_stride, ..Default::default() };
    let conv = conv1d_silu::Conv1dParams {
        d_inner: cd,
        d_conv: c.d_conv as u32,
        xz_stride: width,
        state_offset: conv_at,
        has_bias: l.conv_bias.is_some() as u32,
        map_len,
        slot_len,
        // Mamba-2's conv input x ‖ B ‖ C follows z.
        x_at: if c.arch == Arch::Mamba2 { di } else { 0 },
    };
    let conv = b.call(
        &b.k.conv1d_silu,
        &conv,
        &[
            ("xz", &a.xz),
            ("weight", &l.conv),
            ("bias", l.conv_bias.as_ref().unwrap_or(b.dummy)),
            ("conv_state", &s.conv),
            ("ud", &a.ud),
            ("capture", &a.capture),
        ],
        fixed(conv1d_silu::groups(cd)),
    )?;
    let norm = rms_norm::RmsNormParams { cols: d, eps: c.norm_eps, flags: 0, groups: 1 };
    let carry = scan_carry::ScanCarryParams { plane: di * n, state_offset: i * di * n, _pad: [0; 2] };
    let scan_carry = b.call(
        &b.k.scan_carry,
        &carry,
        &[("chunk_ab", &a.chunk_ab), ("ssm_state", &s.ssm), ("chunk_h0", &a.chunk_h0)],
        fixed(scan_carry::groups(di * n)),
    )?;
    let norm = b.call(&b.k.rms_norm, &norm, &[("x", &a.h), ("weight", &l.norm), ("y", &a.x_norm)], ROWS)?;
    let out = linear::LinearParams { flags: linear::ACCUMULATE, ..lin(di, d) };
    // Bound by either architecture's scan output after its inputs: the start states, the layer's
    // state, y and the checkpoint captures.
    let scan_out = [("chunk_h0", &a.chunk_h0), ("ssm_state", &s.ssm), ("y", &a.y), ("capture", &a.capture)];
    let (Some(x_proj), Some(dt_proj)) = (&l.x_proj, &l.dt_proj) else {
        // Mamba-2 (its blocks have no x_proj / dt_proj).
        let ssd = SsdParams::new(c, a.chunk);
        let output =
            SsdOutputParams { ssd, state_offset: i * di * n, map_len, slot_len, slot_ssm_at: ssm_at };
        let groups = c.n_groups as u32;
        let gated = rms_norm::RmsNormParams { cols: di / groups, eps: c.norm_eps, flags: 0, groups };
        let gain = l.gated_norm.as_ref().unwrap_or(b.dummy);
        let scan = Groups::PerChunk(ssd.groups(1).0);
        // What both scan passes read: u (x ‖ B ‖ C), δ in zxbcdt, A ‖ D ‖ dt_bias.
        let inputs = [("u", &a.ud), ("zxbcdt", &a.xz), ("a_dt", &l.a_d)];
        return Ok(LayerPlan {
            norm,
            in_proj: b.linear(&l.in_proj, &[("x", &a.x_norm), ("y", &a.xz)], lin(d, width))?,
            conv,
            projections: None,
            scan_chunks: b.call(
                &b.k.scan_chunks,
                &ssd,
                &[&inputs[..], &[("chunk_ab", &a.chunk_ab)]].concat(),
                scan,
            )?,
            scan_carry,
            scan_output: b.call(&b.k.scan_output, &output, &[&inputs[..], &scan_out].concat(), scan)?,
            // The scan has read u: its rows take the normalised output, (T, E·D).
            gated_norm: Some(b.call(
                &b.k.rms_norm,
                &gated,
                &[("x", &a.y), ("weight", gain), ("y", &a.ud)],
                Groups::Rows { per_token: groups, z: 1 },
            )?),
            out_proj: b.linear(&l.out_proj, &[("x", &a.ud), ("y", &a.h)], out)?,
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
        slot_ssm_at: ssm_at,
        _pad: [0; 2],
    };
    // Δ lands in the second half of u‖Δ: y_col works as a base offset.
    let dt = linear::LinearParams { flags: linear::SOFTPLUS, y_col: delta_at, ..lin(dbc_stride, di) };
    let norms =
        rms_slices::RmsSlicesParams { stride: dbc_stride, dt_rank: r, d_state: n, eps: c.mixer_rms_eps };
    let scan = Groups::PerChunk(scan_chunks::groups(di, 1).0);
    // Falcon-Mamba's norms: a workgroup per (row, slice of δ, B, C).
    let slices = Groups::Rows { per_token: 1, z: rms_slices::SLICES };
    // What both scan passes read: u ‖ Δ, δ ‖ B ‖ C, A ‖ D.
    let inputs = [("ud", &a.ud), ("dbc", &a.dbc), ("a_d", &l.a_d)];
    Ok(LayerPlan {
        norm,
        in_proj: b.linear(&l.in_proj, &[("x", &a.x_norm), ("y", &a.xz)], lin(d, 2 * di))?,
        conv,
        projections: Some(Projections {
            x_proj: b.linear(x_proj, &[("x", &a.ud), ("y", &a.dbc)], lin(di, dbc_stride))?,
            x_proj_norms: match &b.k.rms_slices {
                Some(kernel) => Some(b.call(kernel, &norms, &[("dbc", &a.dbc)], slices)?),
                None => None,
            },
            dt_proj: b.linear(dt_proj, &[("x", &a.dbc), ("y", &a.ud)], dt)?,
        }),
        scan_chunks: b.call(
            &b.k.scan_chunks,
            &chunks,
            &[&inputs[..], &[("chunk_ab", &a.chunk_ab)]].concat(),
            scan,
        )?,
        scan_carry,
        // The gate z is in xz.
        scan_output: b.call(
            &b.k.scan_output,
            &output,
            &[&inputs[..], &[("xz", &a.xz)], &scan_out].concat(),
            scan,
        )?,
        gated_norm: None,
        out_proj: b.linear(&l.out_proj, &[("x", &a.y), ("y", &a.h)], out)?,
    })
}
