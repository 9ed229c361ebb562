//! Model weights on the GPU, uploaded once at load in f32.
//!
//! Every matrix is a [`SplitMatrix`]: its rows are spread over as many buffers as it takes to
//! keep each binding within the device's `maxStorageBufferBindingSize` (a 130M model's f32
//! embedding is 154 MB; lavapipe and many phones bind at most 128 MiB). Kernels run once per
//! part, with the part's first row as an offset. Most matrices are a single part.

use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::model::{LayerWeights, ModelWeights};

/// Rows [row_start, row_start + rows) of a matrix, in one buffer.
pub(crate) struct MatrixPart {
    /// (rows, cols) f32.
    pub buffer: wgpu::Buffer,
    /// The part's slice of the matrix's bias, if it has one. (rows)
    pub bias: Option<wgpu::Buffer>,
    pub row_start: usize,
    pub rows: usize,
}

/// A (rows, cols) matrix split by rows across bindings.
pub(crate) struct SplitMatrix {
    pub parts: Vec<MatrixPart>,
    pub cols: usize,
}

impl SplitMatrix {
    /// Uploads `data` (rows, cols) and an optional `bias` (rows).
    pub fn upload(
        ctx: &GpuContext,
        label: &str,
        data: &[f32],
        cols: usize,
        bias: Option<&[f32]>,
    ) -> Result<Self> {
        let rows = data.len() / cols;
        let row_bytes = (cols * 4) as u64;
        let per_part = (ctx.max_binding() / row_bytes) as usize;
        if per_part == 0 {
            return Err(Error::LimitExceeded {
                what: "one matrix row (bytes)",
                requested: row_bytes,
                limit: ctx.max_binding(),
            });
        }
        let mut parts = Vec::new();
        for row_start in (0..rows).step_by(per_part) {
            let n = per_part.min(rows - row_start);
            let name = format!("{label} rows {row_start}..{}", row_start + n);
            parts.push(MatrixPart {
                buffer: ctx.storage_from_f32(&name, &data[row_start * cols..(row_start + n) * cols])?,
                bias: bias
                    .map(|b| ctx.storage_from_f32(&format!("{name} bias"), &b[row_start..row_start + n]))
                    .transpose()?,
                row_start,
                rows: n,
            });
        }
        Ok(Self { parts, cols })
    }
}

/// One block's weights on the GPU (shapes as in [`LayerWeights`]).
pub(crate) struct GpuLayer {
    pub norm: wgpu::Buffer,              // (D)
    pub in_proj: SplitMatrix,            // (2·E·D, D), bias (2·E·D)
    pub conv: wgpu::Buffer,              // (E·D, K)
    pub conv_bias: Option<wgpu::Buffer>, // (E·D)
    pub x_proj: SplitMatrix,             // (R + 2N, E·D)
    pub dt_proj: SplitMatrix,            // (E·D, R), bias (E·D)
    pub a_d: wgpu::Buffer,               // (E·D·N + E·D): A = −exp(A_log), then D
    pub out_proj: SplitMatrix,           // (D, E·D), bias (D)
}

/// All weights on the GPU.
pub(crate) struct GpuWeights {
    pub embedding: SplitMatrix,       // (V, D)
    pub lm_head: Option<SplitMatrix>, // (V, D) when untied
    pub layers: Vec<GpuLayer>,
    pub norm_f: wgpu::Buffer, // (D)
    /// A 1-element buffer bound where a kernel's optional input (a bias) is absent.
    pub dummy: wgpu::Buffer,
}

impl GpuWeights {
    pub fn upload(ctx: &GpuContext, w: &ModelWeights) -> Result<Self> {
        let c = &w.config;
        let layers = w
            .layers
            .iter()
            .enumerate()
            .map(|(i, l)| upload_layer(ctx, i, l, c.d_model, c.d_inner, c.dt_rank))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embedding: SplitMatrix::upload(ctx, "embedding", &w.embedding, c.d_model, None)?,
            lm_head: w
                .lm_head
                .as_ref()
                .map(|h| SplitMatrix::upload(ctx, "lm_head", h, c.d_model, None))
                .transpose()?,
            layers,
            norm_f: ctx.storage_from_f32("norm_f", &w.norm_f)?,
            dummy: ctx.storage_zeroed_f32("absent input", 1)?,
        })
    }

    /// The LM head: `lm_head.weight` if the checkpoint has one, else the tied embedding.
    pub fn lm_head(&self) -> &SplitMatrix {
        self.lm_head.as_ref().unwrap_or(&self.embedding)
    }
}

fn upload_layer(
    ctx: &GpuContext,
    i: usize,
    l: &LayerWeights,
    d: usize,
    di: usize,
    r: usize,
) -> Result<GpuLayer> {
    let name = |s: &str| format!("layers.{i}.{s}");
    let a_d: Vec<f32> = l.a_log.iter().map(|v| -v.exp()).chain(l.d.iter().copied()).collect();
    Ok(GpuLayer {
        norm: ctx.storage_from_f32(&name("norm"), &l.norm)?,
        in_proj: SplitMatrix::upload(ctx, &name("in_proj"), &l.in_proj, d, l.in_proj_bias.as_deref())?,
        conv: ctx.storage_from_f32(&name("conv1d"), &l.conv)?,
        conv_bias: l.conv_bias.as_ref().map(|b| ctx.storage_from_f32(&name("conv1d.bias"), b)).transpose()?,
        x_proj: SplitMatrix::upload(ctx, &name("x_proj"), &l.x_proj, di, None)?,
        dt_proj: SplitMatrix::upload(ctx, &name("dt_proj"), &l.dt_proj, r, Some(&l.dt_proj_bias))?,
        a_d: ctx.storage_from_f32(&name("A,D"), &a_d)?,
        out_proj: SplitMatrix::upload(ctx, &name("out_proj"), &l.out_proj, di, l.out_proj_bias.as_deref())?,
    })
}
