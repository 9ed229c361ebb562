//! Key/value pages on the CPU backend (pages mode, issue 27; the GPU's are in
//! `gpu_model/kv_pages.rs`): a page is one cache block — B positions — of every growing region
//! of the state (a hybrid's attention caches: per token its keys then its values), a host
//! vector per region; a checkpoint slot keeps the state with only the rows after its whole
//! pages ([`CpuSlot`]).

use crate::error::{Error, Result};
use crate::model::State;
use crate::model::state::{refused, try_copy as copy};
use crate::model::state_layout::Extent;

/// One checkpoint slot: a state whose growing regions hold positions `from..` only.
#[derive(Clone, Debug)]
pub struct CpuSlot {
    pub(crate) state: State,
    pub(crate) from: usize,
}

/// The page store: B, and per page id its rows (one vector per growing region, in layout
/// order), filled on first write.
#[derive(Debug, Default)]
pub struct CpuPages {
    pub(crate) block: usize,
    pub(crate) pages: Vec<Option<Vec<Vec<f32>>>>,
}

/// (layer, region index in the layer, floats per token) of every growing region, in layout
/// order.
fn growing(state: &State) -> Vec<(usize, usize, usize)> {
    let layout = state.layout();
    layout
        .regions()
        .iter()
        .filter_map(|r| match r.extent {
            Extent::PerToken(per) => {
                Some((r.layer, layout.layer(r.layer).position(|q| q.name == r.name)?, per))
            }
            Extent::Fixed(_) => None,
        })
        .collect()
}

impl CpuPages {
    /// The first position a checkpoint after `len` positions keeps in its slot: after its
    /// whole pages in pages mode (`block` > 0), else 0.
    pub(crate) fn tail_start(&self, len: usize) -> usize {
        len.checked_div(self.block).map_or(0, |b| b * self.block)
    }

    /// `state` as a checkpoint slot: its growing regions from [`CpuPages::tail_start`] on.
    pub(crate) fn slot_of(&self, state: State) -> Result<CpuSlot> {
        match self.tail_start(state.context().unwrap_or(0)) {
            0 => Ok(CpuSlot { state, from: 0 }),
            from => Self::slot_from(&state, from),
        }
    }

    /// `state` as a slot keeping positions `from..` of its growing regions.
    pub(crate) fn slot_from(state: &State, from: usize) -> Result<CpuSlot> {
        let mut out = state.try_clone_fixed()?;
        for (l, i, per) in growing(state) {
            out.layers[l].regions[i] =
                copy(&state.layers[l].regions[i][from * per..], "a checkpoint's rows")?;
        }
        Ok(CpuSlot { state: out, from })
    }

    /// Writes block `b` of `state`'s growing regions into page `page`.
    pub(crate) fn save(&mut self, state: &State, page: usize, b: usize) -> Result<()> {
        let block = self.block;
        if block == 0 || state.context().unwrap_or(0) < (b + 1) * block {
            return Err(Error::Internal(format!("key/value page of block {b}: the state does not reach it")));
        }
        let rows = growing(state)
            .into_iter()
            .map(|(l, i, per)| {
                copy(&state.layers[l].regions[i][b * block * per..(b + 1) * block * per], "a key/value page")
            })
            .collect::<Result<Vec<_>>>()?;
        *self
            .pages
            .get_mut(page)
            .ok_or_else(|| Error::InvalidInput(format!("no key/value page {page}")))? = Some(rows);
        Ok(())
    }

    /// The state of checkpoint `slot` over `pages` (its whole blocks' pages, in order).
    pub(crate) fn restore(&self, slot: &CpuSlot, pages: &[usize]) -> Result<State> {
        if slot.from != pages.len() * self.block {
            return Err(Error::Internal(format!(
                "a checkpoint keeps positions from {}, after {} pages of {}",
                slot.from,
                pages.len(),
                self.block
            )));
        }
        let rows: Vec<&Vec<Vec<f32>>> = pages
            .iter()
            .map(|&p| {
                self.pages
                    .get(p)
                    .and_then(Option::as_ref)
                    .ok_or_else(|| Error::Internal(format!("key/value page {p} is empty")))
            })
            .collect::<Result<_>>()?;
        let mut state = slot.state.try_clone_fixed()?;
        for (g, (l, i, _)) in growing(&slot.state).into_iter().enumerate() {
            let tail = &slot.state.layers[l].regions[i];
            let len = rows.iter().map(|r| r[g].len()).sum::<usize>() + tail.len();
            let region = &mut state.layers[l].regions[i];
            region.try_reserve_exact(len).map_err(|_| refused("a restored state", len))?;
            rows.iter().for_each(|r| region.extend_from_slice(&r[g]));
            region.extend_from_slice(tail);
        }
        Ok(state)
    }
}
