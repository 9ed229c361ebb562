//! [`Upload`]: the GPU's [`Sink`] — each piece of rows the checkpoint stream hands on is
//! converted to its storage format and written (`queue.write_buffer`) into the right part of its
//! buffer before the next piece is read. Natively, wgpu keeps written data in staging memory
//! until the next submission, so the queue is flushed every [`FLUSH_BYTES`]; in the browser the
//! async loader awaits the queue at the same interval (see `crate::wasm::loader`).

use crate::error::Result;
use crate::gpu::GpuContext;
use crate::gpu_model::format::{ConversionStats, encode, to_f32};
use crate::gpu_model::weights::GpuWeights;
use crate::load::stream::Sink;
use crate::model::{Part, Planned, Role};

/// Bytes written between queue flushes.
pub const FLUSH_BYTES: u64 = 64 << 20;

/// Weights being uploaded.
pub(crate) struct Upload<'a> {
    ctx: &'a GpuContext,
    pub weights: GpuWeights,
    pub stats: ConversionStats,
    /// Bytes written since the last flush.
    unflushed: u64,
    /// Where D (after A) and Mamba-2's dt_bias (after D) start in a layer's `a_d` buffer.
    a_d_at: (usize, usize),
}

impl<'a> Upload<'a> {
    pub fn new(ctx: &'a GpuContext, weights: GpuWeights, a_d_at: (usize, usize)) -> Self {
        Self { ctx, weights, stats: ConversionStats::default(), unflushed: 0, a_d_at }
    }
}

impl Sink for Upload<'_> {
    fn rows(&mut self, t: &Planned, first_row: usize, bytes: &[u8]) -> Result<()> {
        let Upload { ctx, weights: w, stats, unflushed, a_d_at } = self;
        let matrix = match t.role {
            Role::Embedding => Some(&w.embedding),
            Role::LmHead => w.lm_head.as_ref(),
            Role::Layer(i, Part::InProj) => Some(&w.layers[i].in_proj),
            Role::Layer(i, Part::XProj) => w.layers[i].x_proj.as_ref(),
            Role::Layer(i, Part::DtProj) => w.layers[i].dt_proj.as_ref(),
            Role::Layer(i, Part::OutProj) => Some(&w.layers[i].out_proj),
            _ => None,
        };
        if let Some(m) = matrix {
            let encoded = encode(m.format, t.dtype, bytes, t.cols, stats);
            m.write_rows(ctx, first_row, bytes.len() / t.row_bytes(), &encoded);
            *unflushed += (encoded.values.len() + encoded.scales.len()) as u64;
            // Natively nothing else drains wgpu's staging memory during a synchronous stream.
            #[cfg(not(target_arch = "wasm32"))]
            if *unflushed >= FLUSH_BYTES {
                ctx.flush_blocking()?;
                *unflushed = 0;
            }
            return Ok(());
        }
        // Small tensors: f32, written where their rows go (A as −exp(A_log), D after A).
        let values = to_f32(t.dtype, bytes);
        let at = first_row * t.cols;
        let (buffer, at, values) = match t.role {
            Role::NormF => (&w.norm_f, at, values),
            Role::Layer(i, part) => {
                let l = &w.layers[i];
                match part {
                    Part::Norm => (&l.norm, at, values),
                    Part::Conv => (&l.conv, at, values),
                    Part::ConvBias => match &l.conv_bias {
                        Some(b) => (b, at, values),
                        None => return Ok(()),
                    },
                    Part::ALog => (&l.a_d, at, values.iter().map(|v| -v.exp()).collect()),
                    Part::D => (&l.a_d, a_d_at.0 + at, values),
                    Part::DtBias => (&l.a_d, a_d_at.1 + at, values),
                    Part::GatedNorm => match &l.gated_norm {
                        Some(b) => (b, at, values),
                        None => return Ok(()),
                    },
                    Part::InProjBias | Part::DtProjBias | Part::OutProjBias => {
                        let m = match part {
                            Part::InProjBias => Some(&l.in_proj),
                            Part::DtProjBias => l.dt_proj.as_ref(),
                            _ => Some(&l.out_proj),
                        };
                        if let Some(m) = m {
                            m.write_bias(ctx, &values);
                        }
                        return Ok(());
                    }
                    Part::InProj | Part::XProj | Part::DtProj | Part::OutProj => return Ok(()),
                }
            }
            Role::Embedding | Role::LmHead => return Ok(()),
        };
        ctx.queue().write_buffer(buffer, 4 * at as u64, bytemuck::cast_slice(&values));
        *unflushed += 4 * values.len() as u64;
        Ok(())
    }
}
