//! Checks made at load, before anything is allocated, that the kernels can run a model on a
//! device: fixed-size arrays, workgroup memory and dispatch sizes. A model that fails one is a
//! typed error (`UnsupportedModel`, `LimitExceeded`), not a pipeline or dispatch the device
//! refuses mid-run.

use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu_kit::kv::KvFormat;
use crate::gpu_kit::pipelines::gemv_kernel;
use crate::gpu_model::Matmul;
use crate::kernels::linear;
use crate::model::Config;

/// Fails unless the kernels can run a model of shape `c` on `ctx`: each block kind checks its
/// kernels' fixed-size arrays and workgroup memory (`src/blocks/<kind>/gpu.rs`), and the blocks
/// agree on the prefill scan's chunk (checked before anything is allocated).
pub(crate) fn check_supported(c: &Config, ctx: &GpuContext, kv: KvFormat) -> Result<()> {
    for kind in &c.blocks {
        kind.kind.gpu_check(ctx, kv)?;
    }
    let mut chunks = c.blocks.iter().map(|b| b.kind.scratch(c.d_model, 1).chunk).filter(|&c| c > 0);
    let first = chunks.next();
    if chunks.any(|chunk| Some(chunk) != first) {
        return Err(Error::UnsupportedModel(
            "blocks whose GPU scans use different chunk lengths in one model".into(),
        ));
    }
    Ok(())
}

/// Fails unless every dispatch of a forward chunk of `max_tokens` tokens fits the device's
/// per-dimension workgroup limit (`max_dim`; 65,535 on most adapters) — checked at load,
/// before anything is allocated, instead of a dispatch the device refuses mid-run.
pub(crate) fn check_dispatch(c: &Config, max_tokens: usize, matmul: Matmul, ctx: &GpuContext) -> Result<()> {
    let max_dim = ctx.summary().max_compute_workgroups_per_dimension;
    let t = max_tokens as u64;
    if t > max_dim as u64 {
        return Err(Error::LimitExceeded {
            what: "max_tokens (tokens per GPU forward chunk: the embedding dispatches a row of \
                   workgroups per token)",
            requested: t,
            limit: max_dim as u64,
        });
    }
    let scratch: Vec<_> = c.blocks.iter().map(|b| b.kind.scratch(c.d_model, 1)).collect();
    let plane = scratch.iter().map(|s| s.plane as u64).max().unwrap_or(0);
    // The widest outputs (in_proj, the LM head) in gemv and gemm, the scan's (E·D, N) plane.
    let in_proj = scratch.iter().map(|s| s.floats("xz") as u64).max().unwrap_or(0);
    let wide = in_proj.max(c.vocab_size as u64);
    let (_, _, gemv_groups) = gemv_kernel(matmul.is_direct(ctx));
    let gemv_wide = gemv_groups(1, wide.min(u32::MAX as u64) as u32).0 as u64;
    let widest = [gemv_wide, wide.div_ceil(linear::DIRECT_TILE.min(linear::TILE) as u64), plane.div_ceil(64)];
    match widest.into_iter().max().filter(|&w| w > max_dim as u64) {
        Some(w) => Err(Error::LimitExceeded {
            what: "workgroups along one dispatch dimension (the model's widest matrix)",
            requested: w,
            limit: max_dim as u64,
        }),
        None => Ok(()),
    }
}
