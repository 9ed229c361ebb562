//! The live key/value caches of a model's attention layers on the GPU ([`KvCaches`]): one
//! buffer per attention layer, K (capacity, Hkv, hd) then V (capacity, Hkv, hd) — position p
//! is row p of both (the layout of `kernels::attention`) — with the layer's RoPE table beside
//! it. They hold `capacity` positions, a whole number of [`PAGE`]s, and grow (new buffers, the
//! rows so far copied over, the plan's bind groups rebuilt) as the context grows, up to
//! `max_context`; a call that would pass it is [`Error::ContextFull`] before anything runs.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::kernels::attention_decode;
use crate::kernels::rope::rope_table;
use crate::model::{Config, context};

/// Positions per page: the cache grows by whole pages (the checkpoint cache's block size).
pub const PAGE: usize = 64;

/// How the key/value caches store keys and values (`kvFormat`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KvFormat {
    /// f32: exact.
    #[default]
    F32,
    /// f16, two per u32 (half the memory; keys and values rounded to f16).
    F16,
}

impl KvFormat {
    /// Bytes of one value.
    pub(crate) fn bytes(self) -> usize {
        match self {
            KvFormat::F32 => 4,
            KvFormat::F16 => 2,
        }
    }

    /// The shaders' `KV_FORMAT`.
    pub(crate) fn shader_value(self) -> f64 {
        match self {
            KvFormat::F32 => 0.0,
            KvFormat::F16 => 1.0,
        }
    }

    /// Its name ("f32", "f16").
    pub fn name(self) -> &'static str {
        match self {
            KvFormat::F32 => "f32",
            KvFormat::F16 => "f16",
        }
    }

    /// The format named `name`.
    pub fn parse(name: &str) -> Result<Self> {
        match name {
            "f32" => Ok(KvFormat::F32),
            "f16" => Ok(KvFormat::F16),
            other => Err(Error::InvalidInput(format!("kvFormat must be f32 or f16, not {other:?}"))),
        }
    }

    /// Values `floats` as stored (f16: rounded, packed in pairs).
    pub(crate) fn encode(self, floats: &[f32]) -> Vec<u8> {
        match self {
            KvFormat::F32 => bytemuck::cast_slice(floats).to_vec(),
            KvFormat::F16 => floats.iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect(),
        }
    }

    /// Stored values back as f32 (`words`: the buffer's u32 words as read back).
    pub(crate) fn decode(self, words: &[f32], values: usize) -> Vec<f32> {
        match self {
            KvFormat::F32 => words[..values].to_vec(),
            KvFormat::F16 => {
                let bytes: &[u8] = bytemuck::cast_slice(words);
                bytes
                    .chunks_exact(2)
                    .take(values)
                    .map(|b| half::f16::from_le_bytes([b[0], b[1]]).to_f32())
                    .collect()
            }
        }
    }
}

/// One attention layer's cache.
pub(crate) struct LayerKv {
    pub(crate) kv: wgpu::Buffer, // K (capacity, Hkv, hd) ‖ V (capacity, Hkv, hd)
    pub(crate) rope: Option<wgpu::Buffer>, // (capacity, 2, rot/2): cos ‖ sin per position
    /// Hkv · hd: values of one position's keys (or values).
    pub(crate) width: usize,
    /// Bytes of one value.
    pub(crate) value_bytes: usize,
}

/// Every attention layer's cache.
pub(crate) struct KvCaches {
    /// Per block: its cache when it has attention.
    pub(crate) layers: Vec<Option<LayerKv>>,
    /// Positions each cache holds (0 for a model without attention).
    pub(crate) capacity: usize,
    /// Most positions a context may reach.
    pub(crate) max_context: usize,
    /// How they store keys and values.
    pub(crate) format: KvFormat,
    /// attention_decode's partial results, for the layer that needs the most:
    /// (splits, 1, Hq, hd + 2).
    pub(crate) scratch: wgpu::Buffer,
}

/// The `max_context` of a load asking for `wanted` on `ctx` (see [`context::max_context`]):
/// one layer's cache is one storage binding.
pub(crate) fn max_context(c: &Config, ctx: &GpuContext, wanted: Option<usize>) -> Result<usize> {
    let widest = c.blocks.iter().filter_map(|b| b.kind.attention()).map(|a| 8 * a.kv_dim() as u64).max();
    context::max_context(c, wanted, ctx.max_binding() / widest.unwrap_or(1).max(1))
}

impl KvCaches {
    /// Caches for block list `c` holding `capacity` positions (0: none yet) in `format`, at
    /// most `max_context`.
    pub(crate) fn new(
        ctx: &GpuContext,
        c: &Config,
        (capacity, max_context): (usize, usize),
        format: KvFormat,
    ) -> Result<Self> {
        // Each block's attention hyper-parameters, where it has attention (a query every kind
        // answers: the toolkit names no kind).
        let attentions: Vec<_> = c.blocks.iter().map(|b| b.kind.attention()).collect();
        let rows = capacity.max(1);
        let layers = attentions
            .iter()
            .enumerate()
            .map(|(i, a)| {
                a.map(|a| -> Result<LayerKv> {
                    let width = a.kv_dim();
                    let bytes = (2 * rows * width * format.bytes()) as u64;
                    let kv = ctx.storage_zeroed_bytes(&format!("kv cache {i}"), bytes)?;
                    let rope = a
                        .rope
                        .map(|r| {
                            let table = rope_table(f64::from(r.theta), r.dims as u32, rows as u32);
                            ctx.storage_from_f32(&format!("rope table {i}"), &table)
                        })
                        .transpose()?;
                    Ok(LayerKv { kv, rope, width, value_bytes: format.bytes() })
                })
                .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        let scratch = attentions
            .iter()
            .flatten()
            .map(|a| {
                let s = attention_decode::splits(rows as u32, a.n_heads as u32, 1, a.head_dim as u32);
                s.scratch_floats as usize
            })
            .max()
            .unwrap_or(1);
        let scratch = ctx.storage_zeroed_f32("attention decode scratch", scratch)?;
        Ok(Self { layers, capacity, max_context, format, scratch })
    }

    /// Whether any block has attention.
    pub(crate) fn any(&self) -> bool {
        self.layers.iter().any(Option::is_some)
    }

    /// Bytes of every buffer.
    pub(crate) fn bytes(&self) -> u64 {
        let layers = self.layers.iter().flatten();
        layers.map(|l| l.kv.size() + l.rope.as_ref().map_or(0, wgpu::Buffer::size)).sum::<u64>()
            + self.scratch.size()
    }

    /// Fails with [`Error::ContextFull`] unless a context of `needed` positions is allowed.
    pub(crate) fn check_room(&self, needed: usize) -> Result<()> {
        context::check_room(needed, self.max_context)
    }

    /// The capacity to grow to for `needed` positions: at least double, whole pages, at most
    /// `max_context`; `None` when the caches hold it already (or the model has none).
    pub(crate) fn growth(&self, needed: usize) -> Option<usize> {
        if !self.any() || needed <= self.capacity {
            return None;
        }
        Some(needed.max(2 * self.capacity).next_multiple_of(PAGE).min(self.max_context).max(needed))
    }

    /// Caches of `capacity` positions holding this one's first `live` positions (the copy is
    /// recorded into `encoder`).
    pub(crate) fn grown(
        &self,
        ctx: &GpuContext,
        c: &Config,
        capacity: usize,
        live: usize,
        encoder: &mut wgpu::CommandEncoder,
    ) -> Result<Self> {
        let new = Self::new(ctx, c, (capacity, self.max_context), self.format)?;
        for (old, to) in self.layers.iter().zip(&new.layers) {
            if let (Some(old), Some(to)) = (old, to) {
                old.record_rows(encoder, self.capacity, 0..live, (&to.kv, 0, to.kv_rows_at(capacity)));
            }
        }
        Ok(new)
    }
}

impl LayerKv {
    /// Byte offset of the V region in a cache of `capacity` positions.
    pub(crate) fn kv_rows_at(&self, capacity: usize) -> u64 {
        (self.value_bytes * capacity * self.width) as u64
    }

    /// Bytes of `tokens` positions' keys (or values).
    pub(crate) fn row_bytes(&self, tokens: usize) -> u64 {
        (self.value_bytes * tokens * self.width) as u64
    }

    /// Records copying positions `rows` of this cache (of `capacity` positions): K rows to `to`
    /// at byte `k_at`, V rows at byte `v_at`.
    pub(crate) fn record_rows(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        capacity: usize,
        rows: Range<usize>,
        (to, k_at, v_at): (&wgpu::Buffer, u64, u64),
    ) {
        let (bytes, at) = (self.row_bytes(rows.len()), self.row_bytes(rows.start));
        if bytes > 0 {
            encoder.copy_buffer_to_buffer(&self.kv, at, to, k_at, bytes);
            encoder.copy_buffer_to_buffer(&self.kv, self.kv_rows_at(capacity) + at, to, v_at, bytes);
        }
    }

    /// Records copying keys and values from `from` (K rows at byte `k_at`, V rows at `v_at`)
    /// into positions `rows` of this cache (of `capacity` positions).
    pub(crate) fn record_rows_from(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        capacity: usize,
        rows: Range<usize>,
        (from, k_at, v_at): (&wgpu::Buffer, u64, u64),
    ) {
        let (bytes, at) = (self.row_bytes(rows.len()), self.row_bytes(rows.start));
        if bytes > 0 {
            encoder.copy_buffer_to_buffer(from, k_at, &self.kv, at, bytes);
            encoder.copy_buffer_to_buffer(from, v_at, &self.kv, self.kv_rows_at(capacity) + at, bytes);
        }
    }
}
