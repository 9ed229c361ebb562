//! Model weights on the GPU: every buffer allocated from the checkpoint's headers before any
//! weight byte is read, then filled piece by piece as the checkpoint streams in
//! (`upload.rs`). Matrices are stored in a [`WeightFormat`]; small tensors in f32.
//!
//! Every matrix is a [`SplitMatrix`]: its rows are spread over as many buffers as it takes to
//! keep each binding within the device's `maxStorageBufferBindingSize` (a 130M model's f32
//! embedding is 154 MB; lavapipe and many phones bind at most 128 MiB). Kernels run once per
//! part, with the part's first row as an offset. Most matrices are a single part.

use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu_model::format::{Encoded, WeightFormat};
use crate::model::{Arch, Config, Layout, Part, Role};

/// Rows [row_start, row_start + rows) of a matrix, in one buffer.
pub(crate) struct MatrixPart {
    /// (rows, cols) in the matrix's format; int8: the quants, then (rows, cols / 32) scales.
    pub buffer: wgpu::Buffer,
    /// The part's slice of the matrix's bias, if it has one. (rows) f32
    pub bias: Option<wgpu::Buffer>,
    pub row_start: usize,
    pub rows: usize,
}

/// A (rows, cols) matrix split by rows across bindings.
pub(crate) struct SplitMatrix {
    pub parts: Vec<MatrixPart>,
    pub cols: usize,
    pub format: WeightFormat,
}

impl SplitMatrix {
    /// Allocates a (rows, cols) matrix in `asked.for_cols(cols)`, with a bias of `rows` if
    /// `has_bias`.
    fn allocate(
        ctx: &GpuContext,
        label: &str,
        (rows, cols): (usize, usize),
        (asked, max_binding): (WeightFormat, u64),
        has_bias: bool,
    ) -> Result<Self> {
        let format = asked.for_cols(cols);
        let row_bytes = format.bytes(1, cols);
        // int8 parts hold whole rows of quants and scales: rows · (cols + cols / 8) bytes.
        let per_part = (max_binding / row_bytes) as usize;
        if per_part == 0 {
            return Err(Error::LimitExceeded {
                what: "one matrix row (bytes)",
                requested: row_bytes,
                limit: max_binding,
            });
        }
        let mut parts = Vec::new();
        for row_start in (0..rows).step_by(per_part) {
            let n = per_part.min(rows - row_start);
            let name = format!("{label} rows {row_start}..{} ({})", row_start + n, format.name());
            parts.push(MatrixPart {
                buffer: ctx.storage_zeroed_bytes(&name, format.bytes(n, cols))?,
                bias: has_bias.then(|| ctx.storage_zeroed_f32(&format!("{name} bias"), n)).transpose()?,
                row_start,
                rows: n,
            });
        }
        Ok(Self { parts, cols, format })
    }

    /// Writes `rows` rows starting at row `first`, encoded in this matrix's format.
    pub fn write_rows(&self, ctx: &GpuContext, first: usize, rows: usize, e: &Encoded) {
        let values_per_row = e.values.len() / rows.max(1);
        let scales_per_row = e.scales.len() / rows.max(1);
        for part in &self.parts {
            let (from, to) = (first.max(part.row_start), (first + rows).min(part.row_start + part.rows));
            if from >= to {
                continue;
            }
            let (local, src) = ((from - part.row_start) as u64, from - first);
            let values = &e.values[src * values_per_row..(to - first) * values_per_row];
            ctx.queue().write_buffer(&part.buffer, local * values_per_row as u64, values);
            if scales_per_row > 0 {
                let scales_at = part.rows as u64 * values_per_row as u64;
                let scales = &e.scales[src * scales_per_row..(to - first) * scales_per_row];
                ctx.queue().write_buffer(&part.buffer, scales_at + local * scales_per_row as u64, scales);
            }
        }
    }

    /// Writes the bias (rows) into the parts' bias buffers.
    pub fn write_bias(&self, ctx: &GpuContext, bias: &[f32]) {
        for part in &self.parts {
            if let Some(b) = &part.bias {
                let slice = &bias[part.row_start..part.row_start + part.rows];
                ctx.queue().write_buffer(b, 0, bytemuck::cast_slice(slice));
            }
        }
    }

    /// Bytes of its buffers (with biases).
    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.buffer.size() + p.bias.as_ref().map_or(0, wgpu::Buffer::size)).sum()
    }
}

/// One block's weights on the GPU (shapes as in [`crate::model::LayerWeights`]; Mamba-2's
/// where they differ: H heads, conv_dim = E·D + 2·G·N).
pub(crate) struct GpuLayer {
    pub norm: wgpu::Buffer,               // (D)
    pub in_proj: SplitMatrix,             // (2·E·D, D), bias; Mamba-2 (E·D + conv_dim + H, D)
    pub conv: wgpu::Buffer,               // (E·D, K); Mamba-2 (conv_dim, K)
    pub conv_bias: Option<wgpu::Buffer>,  // (E·D); Mamba-2 (conv_dim)
    pub x_proj: Option<SplitMatrix>,      // (R + 2N, E·D); not in Mamba-2
    pub dt_proj: Option<SplitMatrix>,     // (E·D, R), bias (E·D); not in Mamba-2
    pub a_d: wgpu::Buffer, // (E·D·N + E·D): A = −exp(A_log), then D; Mamba-2 (3·H): A ‖ D ‖ dt_bias
    pub gated_norm: Option<wgpu::Buffer>, // Mamba-2: the gated RMSNorm's gain (E·D)
    pub out_proj: SplitMatrix, // (D, E·D), bias (D)
}

/// Where D starts in a layer's `a_d` buffer (after A), and Mamba-2's dt_bias (after D).
pub(crate) fn a_d_offsets(c: &Config) -> (usize, usize) {
    match c.arch {
        Arch::Mamba2 => (c.n_heads, 2 * c.n_heads),
        Arch::Mamba | Arch::FalconMamba => (c.d_inner * c.d_state, c.d_inner * c.d_state + c.d_inner),
    }
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
    /// Allocates (zeroed) every buffer the model's weights need, matrices in `format`, each
    /// buffer at most `max_binding` bytes (else the device's limit).
    pub fn allocate(
        ctx: &GpuContext,
        c: &Config,
        layout: &Layout,
        format: WeightFormat,
        max_binding: Option<u64>,
    ) -> Result<Self> {
        let (d, di, n, k, r, v) = (c.d_model, c.d_inner, c.d_state, c.d_conv, c.dt_rank, c.vocab_size);
        let max_binding = max_binding.unwrap_or(u64::MAX).min(ctx.max_binding());
        let z = |label: &str, len: usize| ctx.storage_zeroed_f32(label, len);
        let m =
            |label: &str, shape, bias| SplitMatrix::allocate(ctx, label, shape, (format, max_binding), bias);
        let layers = (0..c.n_layer)
            .map(|i| {
                let name = |s: &str| format!("layers.{i}.{s}");
                let has = |part| layout.get(Role::Layer(i, part)).is_some();
                let (cd, mamba1) = (c.conv_dim(), c.arch != Arch::Mamba2);
                Ok(GpuLayer {
                    norm: z(&name("norm"), d)?,
                    in_proj: m(&name("in_proj"), (c.in_proj_dim(), d), has(Part::InProjBias))?,
                    conv: z(&name("conv1d"), cd * k)?,
                    conv_bias: has(Part::ConvBias).then(|| z(&name("conv1d.bias"), cd)).transpose()?,
                    x_proj: mamba1.then(|| m(&name("x_proj"), (r + 2 * n, di), false)).transpose()?,
                    dt_proj: mamba1.then(|| m(&name("dt_proj"), (di, r), true)).transpose()?,
                    a_d: z(&name("A,D"), a_d_offsets(c).1 + if mamba1 { 0 } else { c.n_heads })?,
                    gated_norm: (!mamba1).then(|| z(&name("mixer.norm"), di)).transpose()?,
                    out_proj: m(&name("out_proj"), (d, di), has(Part::OutProjBias))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embedding: m("embedding", (v, d), false)?,
            lm_head: layout.get(Role::LmHead).map(|_| m("lm_head", (v, d), false)).transpose()?,
            layers,
            norm_f: z("norm_f", d)?,
            dummy: z("absent input", 1)?,
        })
    }

    /// The LM head: `lm_head.weight` if the checkpoint has one, else the tied embedding.
    pub fn lm_head(&self) -> &SplitMatrix {
        self.lm_head.as_ref().unwrap_or(&self.embedding)
    }

    /// Every matrix, for listing formats and bytes.
    pub fn matrices(&self) -> impl Iterator<Item = &SplitMatrix> {
        let layers = self
            .layers
            .iter()
            .flat_map(|l| [Some(&l.in_proj), l.x_proj.as_ref(), l.dt_proj.as_ref(), Some(&l.out_proj)])
            .flatten();
        std::iter::once(&self.embedding).chain(self.lm_head.as_ref()).chain(layers)
    }

    /// Bytes of every weight buffer.
    pub fn bytes(&self) -> u64 {
        let vectors = |l: &GpuLayer| {
            let opt = |b: &Option<wgpu::Buffer>| b.as_ref().map_or(0, wgpu::Buffer::size);
            l.norm.size() + l.conv.size() + opt(&l.conv_bias) + l.a_d.size() + opt(&l.gated_norm)
        };
        self.matrices().map(SplitMatrix::bytes).sum::<u64>()
            + self.layers.iter().map(vectors).sum::<u64>()
            + self.norm_f.size()
    }
}
