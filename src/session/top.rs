//! The decode loop's top-k strategy on a device that picks ([`crate::engine::DevicePicks`]):
//! each decode step reads back the top k of its logits (a few KB, not V floats) and the host
//! draws the next token from them exactly as from all the logits
//! ([`crate::sampling::Sampler::sample_top`]: the same tokens and generator state), reading all
//! V only when the top cannot decide (`decode.rs`, `pick`). The device also says whether every
//! logit was finite: if not, the token fed stays and the step after it fails with
//! [`crate::Error::NonFiniteOutput`] (`session/finite.rs`).

use crate::error::{Error, Result};
use crate::kernels::top_k::Top;
use crate::session::ahead::Ahead;
use crate::session::decode::Decoding;
use crate::session::{Runtime, SessionId};

impl Runtime {
    /// Feeds `token` (one decode step on the device) and keeps the top `k` of the logits after
    /// it for the next pick; the logits themselves stay on the device.
    pub(super) async fn feed_top(
        &mut self,
        id: SessionId,
        d: &mut Decoding,
        token: u32,
        k: usize,
    ) -> Result<()> {
        let s = self.session_mut(id)?;
        s.live_valid = false; // until the step is accounted for
        s.logits = None;
        d.ahead = Ahead::Nothing;
        let mut device =
            self.engine.device_picks().ok_or_else(|| Error::Internal("top-k without a device".into()))?;
        let top = device.forward_top(token, k).await?;
        let s = self.session_mut(id)?;
        let boundary = s.history.push(token);
        s.prefilled += 1;
        s.live_valid = true;
        // The logits after `token` are not finite: the state after it is not kept.
        let finite = top != Top::NonFinite;
        d.ahead = Ahead::Top(top);
        if boundary && finite {
            self.block_reached(id)?;
        }
        Ok(())
    }
}
