//! Sampled generation with top-k on the GPU engine: each decode step reads back the top k of
//! its logits (`GpuModel::forward_top`: a few KB, not V floats) and the host draws from them
//! exactly as from all the logits ([`Sampler::sample_top`]: the same tokens and generator
//! state), reading all V only when the top cannot decide. The logits after the last token are
//! read once, at the end. The kernel also says whether every logit was finite: if not, the
//! token fed stays and generation ends with [`Error::NonFiniteOutput`] (`session/finite.rs`).

use crate::error::{Error, Result};
use crate::kernels::top_k::Top;
use crate::sampling::Sampler;
use crate::session::{GenerateOptions, Runtime, SessionId, finite};

impl Runtime {
    /// [`Runtime::generate`] (`max_tokens` ≥ 1) for a sampler whose draws depend on the top `k`
    /// logits only.
    pub(super) async fn generate_top(
        &mut self,
        id: SessionId,
        sampler: &mut Sampler,
        k: usize,
        options: GenerateOptions,
        mut on_token: impl FnMut(u32) -> bool,
    ) -> Result<Vec<u32>> {
        let mut out = Vec::new();
        let eos = self.engine.config().eos_token_id;
        let mut next = self.sample_next(id, sampler).await?;
        let failure: Option<Error> = loop {
            let s = self.session_mut(id)?;
            s.live_valid = false; // until the step is accounted for
            s.logits = None;
            let top = self.device()?.forward_top(next, k).await?;
            let s = self.session_mut(id)?;
            let boundary = s.history.push(next);
            s.prefilled += 1;
            s.live_valid = true;
            out.push(next);
            // The logits after `next` are not finite: it stays, and the run ends after it.
            let non_finite = (top == Top::NonFinite).then(|| finite::non_finite(s.history.len()));
            if boundary && non_finite.is_none() {
                self.block_reached(id)?;
            }
            if (options.stop_at_eos && Some(next) == eos)
                || !on_token(next)
                || out.len() == options.max_tokens
                || non_finite.is_some()
            {
                break non_finite;
            }
            let history = self.session(id)?.history.tokens();
            let from_top = match &top {
                Top::Found(t) => sampler.sample_top(t, history),
                Top::TooManyTies | Top::NonFinite => None,
            };
            let picked = match from_top {
                Some(picked) => picked,
                None => match self.device()?.last_logits().await {
                    Ok(logits) => sampler.sample(&logits, self.session(id)?.history.tokens()),
                    Err(e) => Err(e),
                },
            };
            match picked {
                Ok(t) => next = t,
                Err(e) => break Some(e),
            }
            crate::platform::yield_now().await;
        };
        self.settle_from_device(id).await?;
        failure.map_or(Ok(out), Err)
    }
}
