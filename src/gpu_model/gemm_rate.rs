//! The prefill matmul alone, timed on the host: `bench --suite`'s `gemm_gflop_s`. One
//! (rows, K) × (K, N)ᵀ product in a weight format, with the kernel a model would pick on the
//! adapter (`linear` for GPUs, `linear_direct` for software adapters), dispatched `reps` times
//! in one submit after a warm-up. Zeroed weights and inputs: the kernels' speed does not depend
//! on the values (no early exits), and nothing is read back but the wait.

use std::time::Instant;

use crate::error::Result;
use crate::gpu::{GpuContext, Kernel, Layout};
use crate::gpu_kit::format::WeightFormat;
use crate::gpu_kit::pipelines::gemm_kernel;
use crate::gpu_model::Matmul;
use crate::kernels::{Step, linear};

/// GFLOP/s (2·rows·K·N per product) of `reps` products of `rows` rows by a (N, K) matrix in
/// `format` (as [`WeightFormat::for_shape`] stores (N, K)) on `ctx`, with `matmul`'s kernel.
pub async fn gemm_gflop_s(
    ctx: &GpuContext,
    (rows, k, n): (usize, usize, usize),
    format: WeightFormat,
    matmul: Matmul,
    reps: usize,
) -> Result<f64> {
    let format = format.for_shape(n, k);
    let (name, source, gemm_groups) = gemm_kernel(matmul.is_direct(ctx));
    let layout = Layout::new(ctx, name, linear::BINDINGS);
    let kernel =
        Kernel::with_constants(ctx, name, source, layout, &[("W_FORMAT", format.shader_value())]).await?;
    let step = ctx.uniform("gemm step", &Step { t_len: rows as u32, n_chunks: 1, past: 0, _pad: 0 });
    let params = linear::LinearParams {
        n_in: k as u32,
        n_out: n as u32,
        x_stride: k as u32,
        y_stride: n as u32,
        w_scales: format.scales_at(n, k),
        ..Default::default()
    };
    let params = ctx.uniform("gemm params", &params);
    let x = ctx.storage_zeroed_f32("gemm x", rows * k)?; // (rows, K)
    let w = ctx.storage_zeroed_bytes("gemm w", format.bytes(n, k))?; // (N, K) in the format
    let bias = ctx.storage_zeroed_f32("gemm bias", 1)?; // unused: no BIAS flag
    let y = ctx.storage_zeroed_f32("gemm y", rows * n)?; // (rows, N)
    let named = [("step", &step), ("p", &params), ("x", &x), ("w", &w), ("bias", &bias), ("y", &y)];
    let bind_group = kernel.bind(ctx, &named)?;
    let groups = gemm_groups(rows as u32, n as u32);
    let run = async |times: usize| -> Result<()> {
        ctx.scoped("timing the matmul", || {
            let mut encoder = ctx.encoder("gemm timing");
            {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                for _ in 0..times {
                    kernel.dispatch(&mut pass, &bind_group, groups);
                }
            }
            ctx.queue().submit([encoder.finish()]);
        })
        .await?;
        ctx.flush().await
    };
    run(1).await?; // warm-up: some drivers compile at the first dispatch
    let t0 = Instant::now();
    run(reps).await?;
    let seconds = t0.elapsed().as_secs_f64();
    Ok(2.0 * (rows * k * n * reps) as f64 / seconds / 1e9)
}
