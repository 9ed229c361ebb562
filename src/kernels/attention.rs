//! What the attention kernels share on the host: the shape of one attention layer, where its
//! KV cache lives, and the largest head dimension the kernels take.
//!
//! A layer's cache is `2 · capacity · Hkv · hd` floats starting `kv_offset` floats into a `kv`
//! storage buffer that several layers share: its K region (capacity, Hkv, hd), then its V
//! region (capacity, Hkv, hd). Position p of the context is row p of both.

use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::kernels::Step;

/// Largest head dimension `attention_prefill` and `attention_decode` take (`HEAD_DIM_MAX` in
/// both shaders): a model with larger heads must be refused at load.
pub const HEAD_DIM_MAX: u32 = 256;

/// One attention layer's shapes and cache placement: what the attention kernels' `Params`
/// are made from. `repr(C)`: their `Params` embed it, six 4-byte members in this order.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AttentionShape {
    /// Hq: query heads.
    pub heads: u32,
    /// Hkv: key/value heads (divides Hq: grouped-query attention shares each among Hq / Hkv).
    pub kv_heads: u32,
    /// hd: dims per head, 1..=[`HEAD_DIM_MAX`].
    pub head_dim: u32,
    /// Floats from the start of the `kv` buffer to this layer's K region.
    pub kv_offset: u32,
    /// Positions this layer's cache holds.
    pub capacity: u32,
    /// The softmax scale applied to q·k (1/√hd for most models; some configs set it).
    pub scale: f32,
}

impl AttentionShape {
    /// Hkv · hd: floats of one position's keys (or values).
    pub fn width(&self) -> usize {
        self.kv_heads as usize * self.head_dim as usize
    }

    /// Floats of `kv` this layer's cache spans, offset included.
    pub fn kv_end(&self) -> usize {
        self.kv_offset as usize + 2 * self.capacity as usize * self.width()
    }

    /// Fails unless the kernels can run this shape: 1 ≤ hd ≤ [`HEAD_DIM_MAX`], Hkv ≥ 1
    /// dividing Hq, a finite scale.
    pub(crate) fn check(&self) -> Result<()> {
        if self.head_dim == 0 || self.head_dim > HEAD_DIM_MAX {
            return Err(Error::InvalidInput(format!(
                "attention head_dim {} is outside 1..={HEAD_DIM_MAX}, what the kernels support",
                self.head_dim
            )));
        }
        if self.kv_heads == 0 || self.heads == 0 || !self.heads.is_multiple_of(self.kv_heads) {
            return Err(Error::InvalidInput(format!(
                "attention needs kv_heads ≥ 1 dividing heads (got {} and {})",
                self.kv_heads, self.heads
            )));
        }
        if !self.scale.is_finite() {
            return Err(Error::InvalidInput(format!("attention scale {} is not finite", self.scale)));
        }
        Ok(())
    }

    /// Fails unless a call of `t` tokens after `past` fits the cache and `kv` (`kv_len` floats)
    /// holds the layer's cache.
    pub(crate) fn check_call(&self, past: u32, t: u32, kv_len: usize) -> Result<()> {
        self.check()?;
        if t == 0 || u64::from(past) + u64::from(t) > u64::from(self.capacity) {
            return Err(Error::InvalidInput(format!(
                "attention over positions {past}..{} needs 1 ≤ T and a cache of that many (capacity {})",
                u64::from(past) + u64::from(t),
                self.capacity
            )));
        }
        if kv_len < self.kv_end() {
            return Err(Error::ShapeMismatch {
                tensor: "kv cache (offset + K, V regions of (capacity, Hkv, hd))".into(),
                expected: vec![self.kv_end()],
                got: vec![kv_len],
            });
        }
        Ok(())
    }
}

/// Fails unless `len` floats are whole rows of `width`; returns the row count.
pub(crate) fn rows_of(tensor: &str, len: usize, width: usize) -> Result<u32> {
    if width == 0 || len == 0 || !len.is_multiple_of(width) {
        return Err(Error::ShapeMismatch {
            tensor: tensor.into(),
            expected: vec![len.div_ceil(width.max(1)).max(1), width],
            got: vec![len],
        });
    }
    Ok((len / width) as u32)
}

/// What the attention kernels' one-shot runs upload: the call's T, its `Step`, q and the cache.
pub(crate) struct Upload {
    /// T: query rows.
    pub(crate) t: u32,
    /// The `Step` uniform (T, past).
    pub(crate) step: wgpu::Buffer,
    /// q (T, Hq · hd).
    pub(crate) q: wgpu::Buffer,
    /// The whole cache buffer.
    pub(crate) kv: wgpu::Buffer,
}

/// Checks a one-shot attention call of q (T, Hq · hd) at `past` over `kv` and uploads it.
pub(crate) fn upload(
    ctx: &GpuContext,
    kernel: &str,
    q: &[f32],
    kv: &[f32],
    shape: &AttentionShape,
    past: u32,
) -> Result<Upload> {
    shape.check()?;
    let t = rows_of("attention q (T, Hq·hd)", q.len(), (shape.heads * shape.head_dim) as usize)?;
    shape.check_call(past, t, kv.len())?;
    Ok(Upload {
        t,
        step: ctx.uniform(&format!("{kernel} step"), &Step { t_len: t, past, ..Default::default() }),
        q: ctx.storage_from_f32(&format!("{kernel} q"), q)?,
        kv: ctx.storage_from_f32(&format!("{kernel} kv"), kv)?,
    })
}
