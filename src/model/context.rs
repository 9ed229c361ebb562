//! How long a context a model may hold: the attention layers' key/value caches grow by one
//! position per token, so a model with attention has a `max_context` (a model without has no
//! limit). A call that would pass it is [`Error::ContextFull`] before anything runs, on both
//! backends: never a silently shortened context.

use crate::error::{Error, Result};
use crate::model::Config;

/// Memory the key/value caches may take together when a load does not say how long a
/// context it wants (`maxContext`): 1 GiB of f32 keys and values.
pub(crate) const KV_BUDGET_BYTES: u64 = 1 << 30;

/// Bytes one position takes in every attention layer's cache together (f32 keys and values).
pub(crate) fn kv_bytes_per_position(c: &Config) -> u64 {
    c.blocks.iter().filter_map(|b| b.kind.attention()).map(|a| 8 * a.kv_dim() as u64).sum()
}

/// The `max_context` of a load asking for `wanted`, where one layer's cache may hold at most
/// `per_layer` positions (the GPU's binding limit; `u64::MAX` on the CPU). `None`: what
/// [`KV_BUDGET_BYTES`] holds, at most `max_position_embeddings` where the model has RoPE. A
/// model without attention: no limit (`usize::MAX`) unless asked.
pub(crate) fn max_context(c: &Config, wanted: Option<usize>, per_layer: u64) -> Result<usize> {
    let per_position = kv_bytes_per_position(c);
    match wanted {
        Some(0) => Err(Error::InvalidInput("maxContext must be at least 1".into())),
        Some(n) if per_position > 0 && n as u64 > per_layer => Err(Error::LimitExceeded {
            what: "maxContext (positions of one attention layer's key/value buffer)",
            requested: n as u64,
            limit: per_layer,
        }),
        Some(n) => Ok(n),
        None if per_position == 0 => Ok(usize::MAX),
        None => {
            let budget = KV_BUDGET_BYTES / per_position;
            let rope = c.max_positions.map_or(u64::MAX, |p| p as u64);
            Ok(budget.min(per_layer).min(rope).clamp(1, usize::MAX as u64) as usize)
        }
    }
}

/// Fails with [`Error::ContextFull`] when a context of `needed` positions passes `max_context`.
pub(crate) fn check_room(needed: usize, max_context: usize) -> Result<()> {
    if needed > max_context {
        return Err(Error::ContextFull { needed: needed as u64, max_context: max_context as u64 });
    }
    Ok(())
}
