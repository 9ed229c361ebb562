//! The state store under the in-memory cache (`src/store/`), as sessions use it: a call whose
//! target no live state or cached checkpoint covers looks for a longer stored checkpoint
//! ([`Runtime::look_in_store`]); a call that made checkpoints writes them ([`Runtime::persist`]).
//!
//! Stored records are keyed in the shared namespace (`keys::chain`/`keys::exact` from the
//! shared root): only sessions in it write (a state imported from bytes is not trusted beyond
//! its session), any session may read — a record is the origin's own computation, checked whole.
//! A checkpoint record holds the fixed regions and the key/value rows after its whole blocks;
//! the blocks' rows are page records, one per block, named by the chain key after it, written
//! once.

use crate::cache::keys::{self, Key};
use crate::model::state_layout::Extent;
use crate::model::{Config, State};
use crate::session::{Runtime, SessionId};
use crate::store::{Kind, Record, Store};

/// A state found in the store: the state after `len` tokens and, for a prompt-end, its logits.
pub(super) struct Stored {
    pub(crate) len: usize,
    pub(crate) state: State,
    pub(crate) logits: Option<Vec<f32>>,
}

/// Per-token floats of each growing region, in the flat order (a Mamba model has none).
fn widths(c: &Config) -> Vec<usize> {
    let layout = c.state_layout();
    layout
        .regions()
        .iter()
        .filter_map(|r| match r.extent {
            Extent::PerToken(n) => Some(n),
            Extent::Fixed(_) => None,
        })
        .collect()
}

/// Rows `from..to` of every growing region of a flat state holding `tokens` tokens, region
/// after region.
fn rows(flat: &[f32], fixed: usize, widths: &[usize], tokens: usize, from: usize, to: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity((to - from) * widths.iter().sum::<usize>());
    let mut at = fixed;
    for &w in widths {
        out.extend_from_slice(&flat[at + from * w..at + to * w]);
        at += tokens * w;
    }
    out
}

/// A flat state from its fixed regions and, per growing region, the rows of each piece in
/// order (`pieces`: page rows, then the tail; each region after region, `len` rows).
fn assemble(fixed: &[f32], widths: &[usize], pieces: &[(&[f32], usize)]) -> Vec<f32> {
    let mut flat = fixed.to_vec();
    for (r, &w) in widths.iter().enumerate() {
        for &(values, len) in pieces {
            let at: usize = widths[..r].iter().map(|q| q * len).sum();
            flat.extend_from_slice(&values[at..at + w * len]);
        }
    }
    flat
}

impl Runtime {
    /// Puts `store` under the in-memory cache (`None`: none). Records are only used by a
    /// runtime of the same model computing the same way ([`Store::fingerprint`]).
    pub fn set_store(&mut self, store: Option<Store>) {
        self.store = store;
    }

    /// A store for this runtime's model and engine over `backend` (see [`Store::new`]).
    pub fn open_store(
        &self,
        backend: Box<dyn crate::store::Backend>,
        config: crate::store::StoreConfig,
    ) -> Store {
        let fingerprint = Store::fingerprint(&self.engine.fingerprint(), &self.engine.numerics());
        Store::new(backend, fingerprint, config)
    }

    /// The store, if one is set.
    pub fn store(&self) -> Option<&Store> {
        self.store.as_ref()
    }

    /// The longest stored checkpoint of `target` after more than `covered` tokens: the prompt
    /// end of the whole target (with its logits), else the latest block boundary before its
    /// end, with the pages of its blocks. Unusable records are misses (deleted by the store).
    pub(super) async fn look_in_store(&mut self, target: &[u32], covered: usize) -> Option<Stored> {
        let store = self.store.as_ref()?;
        let c = self.engine.config();
        let block = self.cache.config().block_size;
        let (fixed, widths) = (State::floats(c), widths(c));
        let per_token: usize = widths.iter().sum();
        let chain = keys::chain(target, block);
        let n = target.len();
        let mut candidates = vec![(n, keys::exact(target, block), true)];
        for b in (1..chain.len()).rev() {
            if b * block < n {
                candidates.push((b * block, chain[b], false));
            }
        }
        for (len, key, end) in candidates.into_iter().filter(|&(len, ..)| len > covered) {
            let Some(record) = store.get(Kind::Checkpoint, &key).await else { continue };
            // Whole blocks in pages (a model without key/value rows has none).
            let whole = if per_token > 0 { len / block } else { 0 };
            let tail = len - whole * block;
            let fits = record.position == len as u64
                && record.values.len() == fixed + tail * per_token
                && record.logits.len() == if end { c.vocab_size } else { 0 };
            if !fits {
                continue;
            }
            let mut pages = Vec::with_capacity(whole);
            for b in 0..whole {
                match store.get(Kind::Page, &chain[b + 1]).await {
                    Some(p) if p.values.len() == block * per_token => pages.push(p.values),
                    _ => break,
                }
            }
            if pages.len() < whole {
                continue;
            }
            let mut pieces: Vec<(&[f32], usize)> = pages.iter().map(|p| (&p[..], block)).collect();
            pieces.push((&record.values[fixed..], tail));
            let flat = assemble(&record.values[..fixed], &widths, &pieces);
            let Ok(state) = State::from_flat(c, &flat) else { continue };
            let logits = end.then_some(record.logits);
            return Some(Stored { len, state, logits });
        }
        None
    }

    /// Writes to the store what session `id`'s call made after `start` tokens: its prompt-end
    /// (the live state, with `logits`), the block checkpoints in `blocks` (position, slot) the
    /// store's `sparse_every` keeps, and the pages of every whole block not stored yet. The
    /// states are read here, during the call; the records are queued ([`Store::write`]: written
    /// before this returns, or in the background in the browser). Failures are the store's
    /// warnings; nothing here fails the call.
    pub(super) async fn persist(&mut self, id: SessionId, blocks: &[(usize, usize)]) {
        let Some(store) = self.store.as_ref() else { return };
        let (sparse, fingerprint) = (store.config().sparse_every.max(1), store.fingerprint_of());
        let Ok(s) = self.session(id) else { return };
        if s.salt.is_some() || !s.live_valid {
            return; // private (imported) histories are not shared through the store
        }
        let (target, logits) = (s.history.tokens().to_vec(), s.logits.clone());
        let Some(logits) = logits else { return };
        let c = self.engine.config().clone();
        let block = self.cache.config().block_size;
        let (fixed, widths) = (State::floats(&c), widths(&c));
        let per_token: usize = widths.iter().sum();
        let n = target.len();
        let Ok(live) = self.engine.read_state().await else { return };
        let flat = live.to_flat();
        let chain = keys::chain(&target, block);
        let record = |kind, key: Key, position: usize, logits: Vec<f32>, values: Vec<f32>| Record {
            kind,
            fingerprint,
            key,
            position: position as u64,
            logits,
            values,
        };
        let mut out = Vec::new();
        if per_token > 0 {
            for b in 0..n / block {
                out.push(record(
                    Kind::Page,
                    chain[b + 1],
                    (b + 1) * block,
                    vec![],
                    rows(&flat, fixed, &widths, n, b * block, (b + 1) * block),
                ));
            }
        }
        // The prompt-end's rows after its whole blocks (all of them: none for a Mamba model).
        let tail_from = if per_token > 0 { n / block * block } else { n };
        let mut end_values = flat[..fixed].to_vec();
        end_values.extend(rows(&flat, fixed, &widths, n, tail_from, n));
        out.push(record(Kind::Checkpoint, keys::exact(&target, block), n, logits, end_values));
        for &(len, slot) in blocks.iter().filter(|&&(len, _)| (len / block).is_multiple_of(sparse)) {
            if let Ok(values) = self.engine.read_fixed(slot).await {
                out.push(record(Kind::Checkpoint, chain[len / block], len, vec![], values));
            }
        }
        let Some(store) = self.store.as_ref() else { return };
        out.retain(|r| r.kind != Kind::Page || !store.knows(Kind::Page, &r.key));
        store.write(out).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_assemble_are_inverse() {
        // Two growing regions of widths 2 and 3, 5 tokens, 4 fixed values.
        let widths = [2, 3];
        let flat: Vec<f32> = (0..4 + 5 * 5).map(|i| i as f32).collect();
        let (a, b, tail) = (
            rows(&flat, 4, &widths, 5, 0, 2),
            rows(&flat, 4, &widths, 5, 2, 4),
            rows(&flat, 4, &widths, 5, 4, 5),
        );
        assert_eq!(assemble(&flat[..4], &widths, &[(&a, 2), (&b, 2), (&tail, 1)]), flat);
    }
}
