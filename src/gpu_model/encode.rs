//! Recording a forward chunk into a compute pass by walking the [`Plan`]: only dispatches,
//! nothing is created here. Dispatch sizes depend on T (this chunk's tokens).

use crate::gpu::dispatch;
use crate::gpu_model::pipelines::Kernels;
use crate::gpu_model::plan::{LayerPlan, LinearCall, Plan};
use crate::kernels::{conv1d_silu, embedding, linear, rms_norm, rms_slices, scan_carry};
use crate::model::Config;

/// What `body` finishes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Head {
    /// Nothing after the last layer (a chunk whose logits nobody needs).
    None,
    /// norm_f of row T−1 and the LM head over it: logits (1, V).
    Last,
    /// norm_f of every row; the LM head runs afterwards, block by block.
    AllRowsNormalised,
}

/// Records the LM head (or any linear call) over `rows` rows.
pub(crate) fn linear(pass: &mut wgpu::ComputePass<'_>, call: &LinearCall, rows: u32) {
    for part in &call.parts {
        let bind_group = &part.call.bind_group;
        if rows <= linear::GEMV_MAX_ROWS {
            dispatch(pass, &part.gemv, bind_group, (part.gemv_groups)(rows, part.n_out));
        } else {
            dispatch(pass, &part.gemm, bind_group, linear::gemm_groups(rows, part.n_out));
        }
    }
}

/// Sizes of one forward chunk.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dims {
    /// T: tokens.
    pub t: u32,
    /// Scan chunks: ceil(T / CHUNK).
    pub chunks: u32,
    /// The device's largest dispatch along one dimension.
    pub max_dim: u32,
}

fn layer(pass: &mut wgpu::ComputePass<'_>, k: &Kernels, c: &Config, l: &LayerPlan, d: Dims) {
    let (di, n) = (c.d_inner as u32, c.d_state as u32);
    let Dims { t, chunks, max_dim } = d;
    k.rms_norm.dispatch(pass, &l.norm.bind_group, rms_norm::groups(t, max_dim));
    linear(pass, &l.in_proj, t);
    k.conv1d_silu.dispatch(pass, &l.conv.bind_group, conv1d_silu::groups(l.conv_channels));
    if let Some(p) = &l.projections {
        linear(pass, &p.x_proj, t);
        if let (Some(kernel), Some(call)) = (&k.rms_slices, &p.x_proj_norms) {
            kernel.dispatch(pass, &call.bind_group, rms_slices::groups(t, max_dim));
        }
        linear(pass, &p.dt_proj, t);
    }
    let scan = (l.scan_width, chunks, 1);
    if chunks > 1 {
        k.scan_chunks.dispatch(pass, &l.scan_chunks.bind_group, scan);
        k.scan_carry.dispatch(pass, &l.scan_carry.bind_group, scan_carry::groups(di * n));
    }
    k.scan_output.dispatch(pass, &l.scan_output.bind_group, scan);
    if let Some((call, groups)) = &l.gated_norm {
        k.rms_norm.dispatch(pass, &call.bind_group, rms_norm::groups(t * groups, max_dim));
    }
    linear(pass, &l.out_proj, t);
}

/// Records embedding → every layer → norm_f (→ LM head for `Head::Last`) for T tokens.
pub(crate) fn body(
    pass: &mut wgpu::ComputePass<'_>,
    k: &Kernels,
    c: &Config,
    plan: &Plan,
    d: Dims,
    head: Head,
) {
    let Dims { t, max_dim, .. } = d;
    for (call, pipeline) in &plan.embedding {
        dispatch(pass, pipeline, &call.bind_group, embedding::groups(t, c.d_model as u32));
    }
    for l in &plan.layers {
        layer(pass, k, c, l, d);
    }
    match head {
        Head::None => {}
        Head::Last => {
            k.rms_norm.dispatch(pass, &plan.norm_last.bind_group, rms_norm::groups(1, max_dim));
            linear(pass, &plan.head_last, 1);
        }
        Head::AllRowsNormalised => {
            k.rms_norm.dispatch(pass, &plan.norm_all.bind_group, rms_norm::groups(t, max_dim));
        }
    }
}
