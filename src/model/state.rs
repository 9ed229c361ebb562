//! [`State`]: the recurrent state a Mamba model carries between tokens — per layer, the conv1d
//! window and the SSM state. Fixed size whatever the history length: this is what the
//! checkpoint cache saves and restores.

use crate::error::{Error, Result};
use crate::model::Config;

/// One layer's recurrent state.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerState {
    /// The last K−1 conv inputs (`xs`; Mamba-2: x ‖ B ‖ C), oldest first; zeros before the
    /// first token. (K−1, conv_dim), conv_dim = E·D (Mamba-1) or E·D + 2·G·N (Mamba-2)
    pub conv: Vec<f32>,
    /// The SSM state h. (E·D, N); Mamba-2 reads it as (H, P, N)
    pub ssm: Vec<f32>,
}

/// The state of every layer after some prefix of tokens (all zeros before the first token).
#[derive(Clone, Debug, PartialEq)]
pub struct State {
    /// One entry per layer.
    pub layers: Vec<LayerState>,
}

impl State {
    /// The state before any token: all zeros.
    pub fn zeros(c: &Config) -> Self {
        let layer = LayerState {
            conv: vec![0.0; (c.d_conv - 1) * c.conv_dim()],
            ssm: vec![0.0; c.d_inner * c.d_state],
        };
        Self { layers: vec![layer; c.n_layer] }
    }

    /// A copy, or [`Error::OutOfMemory`] when the allocator refuses it (a CPU checkpoint cache
    /// that grows into the end of memory — wasm32's 4 GiB — must fail, not abort).
    pub fn try_clone(&self) -> Result<Self> {
        let copy = |v: &Vec<f32>| -> Result<Vec<f32>> {
            let mut out = Vec::new();
            out.try_reserve_exact(v.len()).map_err(|_| Error::OutOfMemory {
                what: "a state checkpoint on the CPU backend".into(),
                needed: 4 * v.len() as u64,
                limit: "the allocator refused it (lower the cache budget)".into(),
            })?;
            out.extend_from_slice(v);
            Ok(out)
        };
        let layers = self
            .layers
            .iter()
            .map(|l| Ok(LayerState { conv: copy(&l.conv)?, ssm: copy(&l.ssm)? }))
            .collect::<Result<_>>()?;
        Ok(Self { layers })
    }

    /// Fails unless this state has the shape of `c`'s states.
    pub fn check_fits(&self, c: &Config) -> Result<()> {
        let fits = self.layers.len() == c.n_layer
            && self.layers.iter().all(|l| {
                l.conv.len() == (c.d_conv - 1) * c.conv_dim() && l.ssm.len() == c.d_inner * c.d_state
            });
        if fits {
            Ok(())
        } else {
            Err(Error::InvalidInput("the state does not have this model's shape".into()))
        }
    }

    /// Floats in a state for `c`.
    pub fn floats(c: &Config) -> usize {
        c.n_layer * ((c.d_conv - 1) * c.conv_dim() + c.d_inner * c.d_state)
    }

    /// Size in bytes of a state for `c` in f32 (what a checkpoint costs).
    pub fn bytes(c: &Config) -> usize {
        4 * Self::floats(c)
    }

    /// The state as one flat vector: every layer's conv window, then every layer's SSM state
    /// (the layout of a GPU checkpoint slot and of exported states).
    pub fn to_flat(&self) -> Vec<f32> {
        let conv = self.layers.iter().flat_map(|l| l.conv.iter().copied());
        conv.chain(self.layers.iter().flat_map(|l| l.ssm.iter().copied())).collect()
    }

    /// The inverse of [`State::to_flat`].
    pub fn from_flat(c: &Config, flat: &[f32]) -> Result<Self> {
        if flat.len() != Self::floats(c) {
            return Err(Error::InvalidInput(format!(
                "a state of this model has {} values, not {}",
                Self::floats(c),
                flat.len()
            )));
        }
        let (conv_len, ssm_len) = ((c.d_conv - 1) * c.conv_dim(), c.d_inner * c.d_state);
        let (conv, ssm) = flat.split_at(c.n_layer * conv_len);
        let layers = (0..c.n_layer)
            .map(|l| LayerState {
                conv: conv[l * conv_len..(l + 1) * conv_len].to_vec(),
                ssm: ssm[l * ssm_len..(l + 1) * ssm_len].to_vec(),
            })
            .collect();
        Ok(Self { layers })
    }
}
