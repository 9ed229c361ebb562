//! Model weights on the GPU: every buffer allocated from the checkpoint's headers before any
//! weight byte is read, then filled piece by piece as the checkpoint streams in
//! (`upload.rs`). Matrices are stored in a [`WeightFormat`]; small tensors in f32.
//!
//! Every matrix is a [`SplitMatrix`]: its rows are spread over as many buffers as it takes to
//! keep each binding within the device's `maxStorageBufferBindingSize` (a 130M model's f32
//! embedding is 154 MB; lavapipe and many phones bind at most 128 MiB). Kernels run once per
//! part, with the part's first row as an offset. Most matrices are a single part.

use crate::blocks::gpu::GpuBlockWeights;
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu_model::format::{Encoded, WeightFormat};
use crate::model::{Config, Layout, Part, Role};

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
    pub fn allocate(
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

/// One layer's weights on the GPU: the RMSNorm before its block, and its block's by kind.
pub(crate) struct GpuLayer {
    pub norm: wgpu::Buffer, // (D)
    pub mixer: GpuBlockWeights,
}

/// Where a piece of a tensor goes as the checkpoint streams in (each block kind routes its own
/// tensors, `src/blocks/<kind>/gpu.rs`).
pub(crate) enum Destination<'a> {
    /// The rows of a weight matrix, in its format.
    Matrix(&'a SplitMatrix),
    /// A matrix's bias.
    Bias(&'a SplitMatrix),
    /// f32 values at `at` floats into `buffer`; as A = −exp(A_log) where `neg_exp`.
    Vector { buffer: &'a wgpu::Buffer, at: usize, neg_exp: bool },
}

/// What allocating one layer's buffers needs: the device, the matrices' format and binding
/// limit, and which of the layer's optional tensors the checkpoint has.
pub(crate) struct Alloc<'a> {
    pub ctx: &'a GpuContext,
    layout: &'a Layout,
    format: WeightFormat,
    max_binding: u64,
    layer: usize,
}

impl Alloc<'_> {
    /// A zeroed f32 buffer of `len`, labelled by its layer.
    pub fn vector(&self, label: &str, len: usize) -> Result<wgpu::Buffer> {
        self.ctx.storage_zeroed_f32(&format!("layers.{}.{label}", self.layer), len)
    }

    /// A zeroed (rows, cols) matrix in the model's weight format, with a bias if `bias`.
    pub fn matrix(&self, label: &str, shape: (usize, usize), bias: bool) -> Result<SplitMatrix> {
        let label = format!("layers.{}.{label}", self.layer);
        SplitMatrix::allocate(self.ctx, &label, shape, (self.format, self.max_binding), bias)
    }

    /// Whether the checkpoint has this layer's `part` (an optional bias).
    pub fn has(&self, part: Part) -> bool {
        self.layout.get(Role::Layer(self.layer, part)).is_some()
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
        let (d, v) = (c.d_model, c.vocab_size);
        let max_binding = max_binding.unwrap_or(u64::MAX).min(ctx.max_binding());
        let z = |label: &str, len: usize| ctx.storage_zeroed_f32(label, len);
        let m =
            |label: &str, shape, bias| SplitMatrix::allocate(ctx, label, shape, (format, max_binding), bias);
        let layers = c
            .blocks
            .iter()
            .enumerate()
            .map(|(layer, kind)| {
                let alloc = Alloc { ctx, layout, format, max_binding, layer };
                Ok(GpuLayer {
                    norm: alloc.vector("norm", d)?,
                    mixer: GpuBlockWeights::allocate(kind, d, &alloc)?,
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
        let layers = self.layers.iter().flat_map(|l| l.mixer.matrices());
        std::iter::once(&self.embedding).chain(self.lm_head.as_ref()).chain(layers)
    }

    /// Bytes of every weight buffer.
    pub fn bytes(&self) -> u64 {
        let vectors = |l: &GpuLayer| l.norm.size() + l.mixer.vectors().iter().map(|b| b.size()).sum::<u64>();
        self.matrices().map(SplitMatrix::bytes).sum::<u64>()
            + self.layers.iter().map(vectors).sum::<u64>()
            + self.norm_f.size()
    }
}
