//! [`State`]: the recurrent state a model carries between tokens, on the host — per layer, the
//! regions its block kind declares ([`StateLayout`]): for a Mamba block the conv1d window and
//! the SSM state. This is what the checkpoint cache saves and restores, and what is exported.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::model::Config;
use crate::model::state_layout::{Extent, StateLayout};

/// One layer's state: its regions' values, in its block kind's order (a Mamba block: the conv
/// window (K−1, conv_dim), then the SSM state (E·D, N); see `BlockKind::state_regions`).
#[derive(Clone, Debug, PartialEq)]
pub struct LayerState {
    /// One vector per region.
    pub regions: Vec<Vec<f32>>,
}

/// The state of every layer after some prefix of tokens (all zeros before the first token).
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    layout: Arc<StateLayout>,
    /// One entry per layer.
    pub layers: Vec<LayerState>,
}

impl State {
    /// The state before any token: fixed regions all zeros, growing ones empty.
    pub fn zeros(c: &Config) -> Self {
        Self::empty(Arc::new(c.state_layout()))
    }

    /// The state before any token for `layout`.
    pub(crate) fn empty(layout: Arc<StateLayout>) -> Self {
        let layers = (0..layout.layers())
            .map(|l| {
                let regions = layout
                    .layer(l)
                    .map(|r| match r.extent {
                        Extent::Fixed(n) => vec![0.0; n],
                        Extent::PerToken(_) => Vec::new(),
                    })
                    .collect();
                LayerState { regions }
            })
            .collect();
        Self { layout, layers }
    }

    /// Its layout.
    pub(crate) fn layout(&self) -> &Arc<StateLayout> {
        &self.layout
    }

    /// Region `name` of `layer`.
    pub fn region(&self, layer: usize, name: &str) -> Option<&[f32]> {
        let i = self.layout.layer(layer).position(|r| r.name == name)?;
        Some(&self.layers[layer].regions[i])
    }

    /// A copy, or [`Error::OutOfMemory`] when the allocator refuses it (a CPU checkpoint cache
    /// that grows into the end of memory — wasm32's 4 GiB — must fail, not abort).
    pub(crate) fn try_clone(&self) -> Result<Self> {
        self.copy(true)
    }

    /// A copy of the fixed regions, the growing ones empty ([`State::try_clone`]'s errors).
    pub(crate) fn try_clone_fixed(&self) -> Result<Self> {
        self.copy(false)
    }

    fn copy(&self, growing: bool) -> Result<Self> {
        let layers = self
            .layers
            .iter()
            .enumerate()
            .map(|(l, s)| {
                let regions = self
                    .layout
                    .layer(l)
                    .zip(&s.regions)
                    .map(|(r, v)| match r.extent {
                        Extent::PerToken(_) if !growing => Ok(Vec::new()),
                        _ => try_copy(v, "a state checkpoint on the CPU backend"),
                    })
                    .collect::<Result<_>>()?;
                Ok(LayerState { regions })
            })
            .collect::<Result<_>>()?;
        Ok(Self { layout: self.layout.clone(), layers })
    }

    /// Fails unless this state has the shape of `c`'s states.
    pub(crate) fn check_fits(&self, c: &Config) -> Result<()> {
        let layout = c.state_layout();
        let fits = *self.layout == layout
            && self.layers.iter().enumerate().all(|(l, s)| {
                layout.layer(l).zip(&s.regions).all(|(r, v)| match r.extent {
                    Extent::Fixed(n) => v.len() == n,
                    Extent::PerToken(n) => v.len().is_multiple_of(n.max(1)),
                })
            });
        if fits {
            Ok(())
        } else {
            Err(Error::InvalidInput("the state does not have this model's shape".into()))
        }
    }

    /// Floats in a state for `c` (before any token: the fixed regions).
    pub fn floats(c: &Config) -> usize {
        c.state_layout().fixed_floats()
    }

    /// Size in bytes of a state for `c` in f32 (what a checkpoint costs).
    pub fn bytes(c: &Config) -> usize {
        4 * Self::floats(c)
    }

    /// The state as one flat vector, its regions in the layout's flat order (for today's
    /// models every layer's conv window, then every layer's SSM state: the layout of a GPU
    /// checkpoint slot and of exported states).
    pub fn to_flat(&self) -> Vec<f32> {
        let mut flat = Vec::with_capacity(self.layout.fixed_floats());
        for r in self.layout.regions() {
            let i = self.layout.layer(r.layer).position(|q| q.name == r.name).unwrap_or(0);
            flat.extend_from_slice(&self.layers[r.layer].regions[i]);
        }
        flat
    }

    /// Tokens of history its growing regions hold (none: a model without them).
    pub fn context(&self) -> Option<usize> {
        let r = self.layout.regions().iter().find(|r| matches!(r.extent, Extent::PerToken(_)))?;
        let Extent::PerToken(per) = r.extent else { return None };
        let i = self.layout.layer(r.layer).position(|q| q.name == r.name)?;
        Some(self.layers[r.layer].regions[i].len().checked_div(per).unwrap_or(0))
    }

    /// The inverse of [`State::to_flat`]: the fixed regions, then the growing ones, each
    /// holding as many tokens as the length says (the same for every growing region).
    pub(crate) fn from_flat(c: &Config, flat: &[f32]) -> Result<Self> {
        let mut state = Self::zeros(c);
        let layout = state.layout.clone();
        let (fixed, per_token) = (layout.fixed_floats(), layout.per_token_floats());
        let tokens = match flat.len().checked_sub(fixed) {
            Some(0) => 0,
            Some(rest) if per_token > 0 && rest.is_multiple_of(per_token) => rest / per_token,
            _ => {
                return Err(Error::InvalidInput(format!(
                    "a state of this model has {fixed} values{}, not {}",
                    if per_token > 0 {
                        format!(" and {per_token} per token of context")
                    } else {
                        String::new()
                    },
                    flat.len()
                )));
            }
        };
        let mut at_growing = fixed;
        for r in layout.regions() {
            let i = layout.layer(r.layer).position(|q| q.name == r.name).unwrap_or(0);
            let values = &mut state.layers[r.layer].regions[i];
            match r.extent {
                Extent::Fixed(n) => {
                    let at = layout.offset(r.layer, r.name).unwrap_or(0);
                    values.copy_from_slice(&flat[at..at + n]);
                }
                Extent::PerToken(n) => {
                    values.extend_from_slice(&flat[at_growing..at_growing + n * tokens]);
                    at_growing += n * tokens;
                }
            }
        }
        Ok(state)
    }
}

/// The error of a host allocation of `floats` values for `what` that the allocator refused (a
/// CPU checkpoint cache that grows into the end of memory — wasm32's 4 GiB — must fail, not
/// abort).
pub(crate) fn refused(what: &str, floats: usize) -> Error {
    Error::OutOfMemory {
        what: what.into(),
        needed: 4 * floats as u64,
        limit: "the allocator refused it (lower the cache budget)".into(),
    }
}

/// A copy of `v` for `what`, or [`refused`]'s error.
pub(crate) fn try_copy(v: &[f32], what: &str) -> Result<Vec<f32>> {
    let mut out = Vec::new();
    out.try_reserve_exact(v.len()).map_err(|_| refused(what, v.len()))?;
    out.extend_from_slice(v);
    Ok(out)
}
