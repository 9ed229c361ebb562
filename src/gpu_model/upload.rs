//! [`Upload`]: the GPU's [`Sink`] — each piece of rows the checkpoint stream hands on is
//! converted to its storage format and written (`queue.write_buffer`) into the right part of its
//! buffer before the next piece is read. Natively, wgpu keeps written data in staging memory
//! until the next submission, so the queue is flushed every [`FLUSH_BYTES`]; in the browser the
//! async loader awaits the queue at the same interval (see `crate::wasm::loader`).

use crate::error::Result;
use crate::gpu::GpuContext;
use crate::gpu_kit::format::{ConversionStats, WeightFormat, encode, to_f32};
use crate::gpu_kit::split::{Destination, SplitMatrix, dealt_row};
use crate::gpu_model::weights::GpuWeights;
use crate::load::stream::Sink;
use crate::model::{Part, Planned, Role};

/// Bytes written between queue flushes.
pub(crate) const FLUSH_BYTES: u64 = 64 << 20;

/// Weights being uploaded.
pub(crate) struct Upload<'a> {
    ctx: &'a GpuContext,
    pub(crate) weights: GpuWeights,
    pub(crate) stats: ConversionStats,
    /// Bytes written since the last flush.
    unflushed: u64,
}

impl<'a> Upload<'a> {
    pub(crate) fn new(ctx: &'a GpuContext, weights: GpuWeights) -> Self {
        Self { ctx, weights, stats: ConversionStats::default(), unflushed: 0 }
    }
}

/// Where the rows of tensor `role` go (each block kind routes its own tensors).
fn destination(w: &GpuWeights, role: Role) -> Option<Destination<'_>> {
    let vector = |buffer| Some(Destination::Vector { buffer, at: 0, neg_exp: false });
    match role {
        Role::Embedding => Some(Destination::Matrix(&w.embedding)),
        Role::LmHead => w.lm_head.as_ref().map(Destination::Matrix),
        Role::NormF => vector(&w.norm_f),
        Role::Layer(i, Part::Norm) => vector(&w.layers[i].norm),
        Role::Layer(i, part) => w.layers[i].mixer.destination(part),
    }
}

impl Sink for Upload<'_> {
    fn raw_blocks(&self, t: &Planned) -> bool {
        let first = match destination(&self.weights, t.role) {
            Some(Destination::Matrix(m) | Destination::Rows { matrix: m, .. }) => Some(m),
            Some(Destination::Stacked(ms) | Destination::Dealt { matrices: ms, .. }) => ms.first().copied(),
            _ => None,
        };
        first.is_some_and(|m| matches!(m.format, WeightFormat::Ggml(_)))
    }

    fn rows(&mut self, t: &Planned, first_row: usize, bytes: &[u8]) -> Result<()> {
        // A GGUF tensor kept in its blocks comes as the file has it.
        let row_bytes = if self.raw_blocks(t) { t.file_row_bytes() } else { t.row_bytes() };
        let Upload { ctx, weights: w, stats, unflushed } = self;
        let destination = destination(w, t.role);
        // A stack's or a dealt tensor's piece: each matrix's rows of it, in turn.
        let piece = (first_row, bytes, row_bytes);
        let pieces = match &destination {
            Some(Destination::Matrix(m)) => vec![(*m, first_row, bytes)],
            Some(Destination::Rows { matrix, at }) => vec![(*matrix, at + first_row, bytes)],
            Some(Destination::Stacked(stack)) => deal(stack, stack[0].rows(), piece),
            Some(Destination::Dealt { matrices, block }) => deal(matrices, *block, piece),
            _ => Vec::new(),
        };
        for (m, first_row, bytes) in pieces {
            let encoded = encode(m.format, t.dtype, bytes, t.cols, stats);
            m.write_rows(ctx, first_row, bytes.len() / row_bytes, &encoded);
            *unflushed += (encoded.values.len() + encoded.scales.len()) as u64;
            // Natively nothing else drains wgpu's staging memory during a synchronous stream.
            #[cfg(not(target_arch = "wasm32"))]
            if *unflushed >= FLUSH_BYTES {
                ctx.flush_blocking()?;
                *unflushed = 0;
            }
        }
        match destination {
            Some(
                Destination::Matrix(_)
                | Destination::Rows { .. }
                | Destination::Stacked(_)
                | Destination::Dealt { .. },
            ) => {}
            // Small tensors: f32, written where their rows go.
            Some(Destination::Bias(m)) => m.write_bias(ctx, &to_f32(t.dtype, bytes)),
            Some(Destination::DealtBias { matrices, block }) => {
                let mut biases: Vec<Vec<f32>> = matrices.iter().map(|m| vec![0.0; m.rows()]).collect();
                for (r, v) in to_f32(t.dtype, bytes).into_iter().enumerate() {
                    let (i, local) = dealt_row(r, block, matrices.len());
                    if let Some(b) = biases[i].get_mut(local) {
                        *b = v;
                    }
                }
                matrices.iter().zip(&biases).for_each(|(m, b)| m.write_bias(ctx, b));
            }
            Some(Destination::Vector { buffer, at, neg_exp }) => {
                let mut values = to_f32(t.dtype, bytes);
                if neg_exp {
                    values.iter_mut().for_each(|v| *v = -v.exp());
                }
                if t.plus_one {
                    values.iter_mut().for_each(|v| *v += 1.0); // a zero-centred norm's 1 + w
                }
                let at = at + first_row * t.cols;
                ctx.queue().write_buffer(buffer, 4 * at as u64, bytemuck::cast_slice(&values));
                *unflushed += 4 * values.len() as u64;
            }
            None => {}
        }
        Ok(())
    }
}

/// The pieces of `bytes` — whole rows of `row_bytes`, from tensor row `first_row` on — that go
/// to each of `matrices` when the tensor's rows are dealt `block` at a time to them in turn
/// (a stack: `block` = a matrix's rows): (matrix, its first row, the piece's bytes).
fn deal<'m, 'b>(
    matrices: &[&'m SplitMatrix],
    block: usize,
    (first_row, bytes, row_bytes): (usize, &'b [u8], usize),
) -> Vec<(&'m SplitMatrix, usize, &'b [u8])> {
    let mut pieces = Vec::new();
    let (mut row, mut rest) = (first_row, bytes);
    while block > 0 && row_bytes > 0 && !matrices.is_empty() && rest.len() >= row_bytes {
        let (i, local) = dealt_row(row, block, matrices.len());
        let rows = (block - row % block).min(rest.len() / row_bytes);
        let (here, after) = rest.split_at(rows * row_bytes);
        pieces.push((matrices[i], local, here));
        (row, rest) = (row + rows, after);
    }
    pieces
}
