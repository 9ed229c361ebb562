//! Checks made at load, before anything is allocated, that the kernels can run a model on a
//! device: fixed-size arrays, workgroup memory and dispatch sizes. A model that fails one is a
//! typed error (`UnsupportedModel`, `LimitExceeded`), not a pipeline or dispatch the device
//! refuses mid-run.

use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu_model::Matmul;
use crate::gpu_model::pipelines::gemv_kernel;
use crate::kernels::{conv1d_silu, linear, scan_chunks, scan_output, ssd_chunks};
use crate::model::{Arch, Config};

/// Fails unless the kernels can run a model of shape `c` on `ctx`: conv width and state size
/// within what the shaders' fixed-size arrays hold, and the scans' workgroup memory (which
/// grows with the state size) within the device's (checked before anything is allocated).
pub(crate) fn check_supported(c: &Config, ctx: &GpuContext) -> Result<()> {
    if c.arch == Arch::Mamba2 {
        // The SSD kernels stage B ‖ C in a fixed 8 KiB, a tile of tokens at a time.
        if c.d_conv > conv1d_silu::K_MAX || c.d_state > ssd_chunks::N_MAX {
            return Err(Error::UnsupportedModel(format!(
                "conv_kernel {} / state_size {}: the Mamba-2 GPU kernels support at most {} / {}",
                c.d_conv,
                c.d_state,
                conv1d_silu::K_MAX,
                ssd_chunks::N_MAX
            )));
        }
        return Ok(());
    }
    let shared = scan_output::workgroup_bytes(c.d_state).max(scan_chunks::workgroup_bytes(c.d_state));
    let limit = ctx.summary().max_compute_workgroup_storage_size;
    if shared > limit as usize {
        return Err(Error::UnsupportedModel(format!(
            "state_size {}: the scan needs {shared} bytes of workgroup memory, the device allows {limit}",
            c.d_state
        )));
    }
    if c.d_conv > conv1d_silu::K_MAX || c.d_state > scan_output::N_MAX {
        return Err(Error::UnsupportedModel(format!(
            "conv_kernel {} / state_size {}: the GPU kernels support at most {} / {}",
            c.d_conv,
            c.d_state,
            conv1d_silu::K_MAX,
            scan_output::N_MAX
        )));
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
    let (di, n, v) = (c.d_inner as u64, c.d_state as u64, c.vocab_size as u64);
    // The widest outputs (in_proj, the LM head) in gemv and gemm, the scan's (E·D, N) plane.
    let wide = (c.in_proj_dim() as u64).max(v);
    let (_, _, gemv_groups) = gemv_kernel(matmul.is_direct(ctx));
    let gemv_wide = gemv_groups(1, wide.min(u32::MAX as u64) as u32).0 as u64;
    let widest = [gemv_wide, wide.div_ceil(linear::TILE as u64), (di * n).div_ceil(64)];
    match widest.into_iter().max().filter(|&w| w > max_dim as u64) {
        Some(w) => Err(Error::LimitExceeded {
            what: "workgroups along one dispatch dimension (the model's widest matrix)",
            requested: w,
            limit: max_dim as u64,
        }),
        None => Ok(()),
    }
}
