//! Weight buffers on the GPU: every matrix is a [`SplitMatrix`], its rows spread over as many
//! buffers as it takes to keep each binding within the device's
//! `maxStorageBufferBindingSize` (a 130M model's f32 embedding is 154 MB; lavapipe and many
//! phones bind at most 128 MiB); kernels run once per part, with the part's first row as an
//! offset. Most matrices are a single part. Also what a block kind allocates its buffers with
//! ([`Alloc`]) and where it says each of its tensors goes as it streams in ([`Destination`]).

use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu_kit::format::{Encoded, WeightFormat};
use crate::gpu_kit::ggml;
use crate::load::gguf::GgmlType;
use crate::model::{Layout, Part, Planned, Role};

/// Rows [row_start, row_start + rows) of a matrix, in one buffer.
pub(crate) struct MatrixPart {
    /// (rows, cols) in the matrix's format; int8: the quants, then (rows, cols / 32) scales.
    pub(crate) buffer: wgpu::Buffer,
    /// The part's slice of the matrix's bias, if it has one. (rows) f32
    pub(crate) bias: Option<wgpu::Buffer>,
    pub(crate) row_start: usize,
    pub(crate) rows: usize,
}

/// A (rows, cols) matrix split by rows across bindings.
pub(crate) struct SplitMatrix {
    pub(crate) parts: Vec<MatrixPart>,
    pub(crate) cols: usize,
    pub(crate) format: WeightFormat,
}

impl SplitMatrix {
    /// Rows of the whole matrix.
    pub(crate) fn rows(&self) -> usize {
        self.parts.iter().map(|p| p.rows).sum()
    }

    /// Allocates a (rows, cols) matrix in `asked.for_shape(rows, cols)`, with a bias of `rows` if
    /// `has_bias`.
    pub(crate) fn allocate(
        ctx: &GpuContext,
        label: &str,
        (rows, cols): (usize, usize),
        (asked, max_binding): (WeightFormat, u64),
        has_bias: bool,
    ) -> Result<Self> {
        let format = asked.for_shape(rows, cols);
        let row_bytes = format.bytes(1, cols);
        // int8 parts hold whole rows of quants and scales: rows · (cols + cols / 8) bytes; q4
        // parts an even number of rows (a row's f16 scales may end mid-u32).
        let per_part = (max_binding / row_bytes) as usize;
        let per_part = if per_part > 1 { per_part & !1 } else { per_part };
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
    pub(crate) fn write_rows(&self, ctx: &GpuContext, first: usize, rows: usize, e: &Encoded) {
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
    pub(crate) fn write_bias(&self, ctx: &GpuContext, bias: &[f32]) {
        for part in &self.parts {
            if let Some(b) = &part.bias {
                let slice = &bias[part.row_start..part.row_start + part.rows];
                ctx.queue().write_buffer(b, 0, bytemuck::cast_slice(slice));
            }
        }
    }

    /// Bytes of its buffers (with biases).
    pub(crate) fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.buffer.size() + p.bias.as_ref().map_or(0, wgpu::Buffer::size)).sum()
    }
}

/// Where a piece of a tensor goes as the checkpoint streams in (each block kind routes its own
/// tensors, `src/blocks/<kind>/gpu.rs`).
pub(crate) enum Destination<'a> {
    /// The rows of a weight matrix, in its format.
    Matrix(&'a SplitMatrix),
    /// The rows of a weight matrix from row `at` on: one of several tensors gathered into one
    /// matrix ([`Alloc::gathered`]).
    Rows { matrix: &'a SplitMatrix, at: usize },
    /// A matrix's bias.
    Bias(&'a SplitMatrix),
    /// f32 values at `at` floats into `buffer`; as A = −exp(A_log) where `neg_exp`.
    Vector { buffer: &'a wgpu::Buffer, at: usize, neg_exp: bool },
    /// The rows of a stack of equal matrices (a checkpoint's experts in one tensor, (E, rows,
    /// cols)): its rows in order, matrix after matrix.
    Stacked(Vec<&'a SplitMatrix>),
    /// The rows of equal matrices dealt out in turn, `block` rows to each (Qwen3.5's q_proj, (2 ·
    /// Hq · hd, cols): per head hd query rows, then hd gate rows): tensor row r goes to matrix
    /// (r / block) mod n, at row (r / (n · block)) · block + r mod block.
    Dealt { matrices: Vec<&'a SplitMatrix>, block: usize },
    /// A bias dealt out to its matrices as [`Destination::Dealt`] deals their rows.
    DealtBias { matrices: Vec<&'a SplitMatrix>, block: usize },
}

/// Where tensor row `row` goes when rows are dealt `block` at a time to `n` matrices in turn:
/// (the matrix's index, its row).
pub(crate) fn dealt_row(row: usize, block: usize, n: usize) -> (usize, usize) {
    let b = row / block;
    (b % n, (b / n) * block + row % block)
}

/// The ggml type of GGUF tensor `t` where the GPU can keep its blocks as stored.
pub(crate) fn kept_blocks(t: Option<&Planned>) -> Option<GgmlType> {
    t.and_then(|t| t.stored).map(|s| s.ty).filter(|&ty| ggml::layout(ty).is_some())
}

/// What allocating one layer's buffers needs: the device, the matrices' format and binding
/// limit, and which of the layer's optional tensors the checkpoint has.
pub(crate) struct Alloc<'a> {
    pub(crate) ctx: &'a GpuContext,
    pub(crate) layout: &'a Layout,
    pub(crate) format: WeightFormat,
    /// Bytes one buffer may have (the device's binding limit, or a lower one asked for).
    pub(crate) max_binding: u64,
    pub(crate) layer: usize,
    /// Keep a GGUF file's quantized blocks as stored ([`WeightFormat::Ggml`]).
    pub(crate) blocks: bool,
}

impl Alloc<'_> {
    /// A zeroed f32 buffer of `len`, labelled by its layer.
    pub(crate) fn vector(&self, label: &str, len: usize) -> Result<wgpu::Buffer> {
        self.ctx.storage_zeroed_f32(&format!("layers.{}.{label}", self.layer), len)
    }

    /// A zeroed (rows, cols) matrix for the layer's tensor `part`, in the model's weight format
    /// (or the file's blocks: [`Alloc::format_of`]), with a bias if `bias`.
    pub(crate) fn matrix(
        &self,
        part: Part,
        label: &str,
        shape: (usize, usize),
        bias: bool,
    ) -> Result<SplitMatrix> {
        let label = format!("layers.{}.{label}", self.layer);
        SplitMatrix::allocate(self.ctx, &label, shape, (self.format_of(&[part]), self.max_binding), bias)
    }

    /// The format of a matrix holding the layer's tensors `parts`: a GGUF file's blocks where
    /// they all have one quantized type the GPU computes on as stored, else the model's.
    pub(crate) fn format_of(&self, parts: &[Part]) -> WeightFormat {
        let stored = |part: &Part| {
            let get = |p: Part| self.layout.get(Role::Layer(self.layer, p));
            // Experts the file stacks in one tensor are allocated one by one.
            let t = match *part {
                Part::Expert(_, m) => get(*part).or_else(|| get(Part::Experts(m))),
                p => get(p),
            };
            kept_blocks(t)
        };
        match parts.iter().map(stored).collect::<Option<Vec<_>>>() {
            Some(types) if self.blocks && types.windows(2).all(|w| w[0] == w[1]) && !types.is_empty() => {
                WeightFormat::Ggml(types[0])
            }
            _ => self.format,
        }
    }

    /// One matrix holding the rows of several tensors of `cols` columns, one after another
    /// (`rows` each: tensors a block multiplies by the same input as one matmul), and each
    /// tensor's first row ([`Destination::Rows`]). Its format is one every tensor's rows can be
    /// written into at their offsets: q4 of a half group per row packs rows in pairs, so where
    /// a tensor has an odd number of rows such a matrix falls back as an odd-rowed one would.
    pub(crate) fn gathered(
        &self,
        label: &str,
        tensors: &[(Part, usize)],
        cols: usize,
    ) -> Result<(SplitMatrix, Vec<usize>)> {
        let parts: Vec<Part> = tensors.iter().map(|t| t.0).collect();
        let rows: Vec<usize> = tensors.iter().map(|t| t.1).collect();
        let odd = rows.iter().any(|r| r % 2 == 1);
        // A tensor starting at an odd row could start its blocks' f16 scales mid-word.
        let format = match odd {
            true => self.format.for_shape(1, cols),
            false => self.format_of(&parts).for_shape(2, cols),
        };
        let label = format!("layers.{}.{label}", self.layer);
        let m = SplitMatrix::allocate(
            self.ctx,
            &label,
            (rows.iter().sum(), cols),
            (format, self.max_binding),
            false,
        )?;
        let starts = rows
            .iter()
            .scan(0, |at, r| {
                *at += r;
                Some(*at - r)
            })
            .collect();
        Ok((m, starts))
    }

    /// Whether the checkpoint has this layer's `part` (an optional bias).
    pub(crate) fn has(&self, part: Part) -> bool {
        self.layout.get(Role::Layer(self.layer, part)).is_some()
    }
}
