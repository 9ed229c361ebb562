//! [`Ahead`]: what the device did beyond the session's host copy during a decode — the
//! history whole on the device with its logits (or their greedy pick, or their top) there only,
//! or a greedy batch being handed out ([`Batch`], the greedy strategy's, `greedy.rs`). The
//! decode loop (`decode.rs`) reconciles it when the decode ends.

use crate::kernels::top_k::Top;

/// What the device holds beyond the session's host copy.
pub(super) enum Ahead {
    /// Nothing: the logits after the history are on the host (or there are none yet).
    Nothing,
    /// The history is whole on the device, its logits there only, with the device's greedy
    /// pick after them (none: they are not finite).
    Pick(Option<u32>),
    /// The history is whole on the device, its logits there only, summarised by their top.
    Top(Top),
    /// A greedy batch being handed out (`greedy.rs`).
    Batch(Batch),
}

/// A greedy batch being handed out: `fed` went through the model on the device after the
/// history it started from; the first `handed` of them are in the history now.
pub(super) struct Batch {
    pub(super) fed: Vec<u32>,
    pub(super) handed: usize,
    /// The device's pick after the last token fed (none: its logits are not finite).
    pub(super) next: Option<u32>,
    /// Whether the device's working state is the state after `fed` (not when it ran steps past
    /// logits that were not finite).
    pub(super) exact: bool,
}
