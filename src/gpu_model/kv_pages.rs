//! Key/value pages on the GPU (pages mode, issue 27): each page holds one cache block — B
//! positions — of the keys and values of every attention layer, attention layer after
//! attention layer, its K rows (B, Hkv·hd) then its V rows, in the live caches' format, in
//! copy-only slabs ([`Slabs`]). A page is written once from the live caches when it is made and
//! only read after (it is shared by every checkpoint whose history passes through it: see
//! `src/cache/pages.rs`); a checkpoint's slot then keeps only the rows after its whole pages.

use std::ops::Range;

use crate::error::{Error, Result};
use crate::gpu_model::GpuModel;
use crate::gpu_model::slabs::Slabs;
use crate::gpu_model::slots::kv_offsets;

/// The page store.
pub(crate) struct KvPages {
    /// B: positions per page.
    pub(crate) block: usize,
    slabs: Slabs,
}

impl KvPages {
    /// Bytes of every slab created so far.
    pub(crate) fn bytes(&self) -> u64 {
        self.slabs.bytes()
    }
}

impl GpuModel {
    /// Pages mode: `n` key/value page slots of `block` positions each (no memory until written);
    /// returns their ids. From now on a checkpoint's slot keeps only its partial last block.
    pub(crate) fn enable_pages(&mut self, block: usize, n: usize) -> Result<Range<usize>> {
        if block == 0 || !self.kv.any() {
            return Err(Error::InvalidInput("key/value pages need attention layers and a block size".into()));
        }
        let (widths, value_bytes) = self.slots.widths();
        let page_bytes = (value_bytes * block * widths.iter().map(|w| 2 * w).sum::<usize>()) as u64;
        let pages = self
            .pages
            .get_or_insert(KvPages { block, slabs: Slabs::new(&self.ctx, page_bytes, "key/value page")? });
        if pages.block != block {
            return Err(Error::InvalidInput(format!("pages of {} positions exist already", pages.block)));
        }
        Ok(pages.slabs.add(n))
    }

    /// The first position a checkpoint after `len` positions keeps in its slot: after its
    /// whole pages in pages mode, else 0 (all of them).
    pub(crate) fn tail_start(&self, len: usize) -> usize {
        self.pages.as_ref().map_or(0, |p| len / p.block * p.block)
    }

    /// Byte offsets, within a page, of attention layer `j`'s K rows and V rows.
    fn page_at(&self, block: usize, j: usize) -> (u64, u64) {
        kv_offsets(self.slots.widths(), block, j)
    }

    /// Writes block `b` of the live caches (positions b·B..(b+1)·B, all computed) into page
    /// `page`, for every `(page, b)` of `pages`.
    pub(crate) fn save_pages(&mut self, pages: &[(usize, usize)]) -> Result<()> {
        if pages.is_empty() {
            return Ok(());
        }
        let block = self.pages.as_ref().map_or(0, |p| p.block);
        if let Some(&(_, b)) = pages.iter().find(|(_, b)| (b + 1) * block > self.context || block == 0) {
            return Err(Error::Internal(format!(
                "key/value page of block {b}: the context holds {} positions",
                self.context
            )));
        }
        self.ctx.check("before saving key/value pages")?;
        for &(page, _) in pages {
            self.pages.as_mut().map(|p| p.slabs.locate_for_write(&self.ctx, page)).transpose()?;
        }
        let mut encoder = self.ctx.encoder("save key/value pages");
        let store = self.pages.as_ref().map(|p| &p.slabs);
        for &(page, b) in pages {
            let (buffer, offset) =
                store.ok_or_else(|| Error::Internal("no page store".into()))?.locate(page)?;
            for (j, layer) in self.kv.layers.iter().flatten().enumerate() {
                let (k_at, v_at) = self.page_at(block, j);
                let to = (buffer, offset + k_at, offset + v_at);
                layer.record_rows(&mut encoder, self.kv.capacity, b * block..(b + 1) * block, to);
            }
        }
        self.ctx.queue().submit([encoder.finish()]);
        Ok(())
    }

    /// Replaces the working state with checkpoint slot `slot`'s over `pages` (its whole blocks'
    /// pages, in order: none outside pages mode): the slot's state, the pages' rows, then the
    /// slot's own rows.
    pub(crate) fn load_checkpoint(&mut self, slot: usize, pages: &[usize]) -> Result<()> {
        self.ctx.check("before restoring a state")?;
        self.slots.locate(slot)?;
        let block = self.pages.as_ref().map_or(0, |p| p.block);
        let rows = self.slots.kv(slot).map_or(0..0, |k| k.rows());
        if rows.start != pages.len() * block {
            return Err(Error::Internal(format!(
                "checkpoint slot {slot} keeps positions from {}, after {} pages of {block}",
                rows.start,
                pages.len()
            )));
        }
        self.reserve(rows.end)?;
        let mut encoder = self.ctx.encoder("load state");
        let (buffer, offset) = self.slots.locate(slot)?;
        self.state.record_copy(&mut encoder, buffer, offset, false);
        for (i, &page) in pages.iter().enumerate() {
            let store = self.pages.as_ref().ok_or_else(|| Error::Internal("no page store".into()))?;
            let (buffer, offset) = store.slabs.locate(page)?;
            for (j, layer) in self.kv.layers.iter().flatten().enumerate() {
                let (k_at, v_at) = self.page_at(block, j);
                let from = (buffer, offset + k_at, offset + v_at);
                layer.record_rows_from(&mut encoder, self.kv.capacity, i * block..(i + 1) * block, from);
            }
        }
        if let Some(saved) = self.slots.kv(slot) {
            let widths = self.slots.widths();
            for (j, layer) in self.kv.layers.iter().flatten().enumerate() {
                let (k_at, v_at) = saved.at(widths, j);
                layer.record_rows_from(
                    &mut encoder,
                    self.kv.capacity,
                    saved.rows(),
                    (&saved.buffer, k_at, v_at),
                );
            }
        }
        self.ctx.queue().submit([encoder.finish()]);
        self.context = rows.end;
        Ok(())
    }
}
