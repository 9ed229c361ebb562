//! Sampled decoding with top-k on the GPU side: after a decode step, `shaders/top_k.wgsl`
//! summarises the logits as their top k (ties included) and the largest logit below, so the
//! step reads back a few KB instead of V floats; the host draws from that summary exactly as
//! from the whole logits ([`crate::sampling::Sampler::sample_top`]).

use crate::error::{Error, Result};
use crate::gpu_model::GpuModel;
use crate::gpu_model::encode::{self, Head};
use crate::kernels::top_k::{self, Top};

impl GpuModel {
    /// Feeds `token` (one decode step) and returns the top `k` of the logits after it, or
    /// [`Top::TooManyTies`] (more logits tied at the k-th than [`top_k::CAPACITY`]: read them
    /// with [`GpuModel::last_logits`]) or [`Top::NonFinite`] (a NaN or ±Inf among them).
    pub(crate) async fn forward_top(&mut self, token: u32, k: usize) -> Result<Top> {
        let v = self.config.vocab_size;
        if k == 0 || k > self.max_top_k() {
            return Err(Error::InvalidInput(format!(
                "the GPU summarises the top 1 to {} logits, not {k}",
                self.max_top_k()
            )));
        }
        let dims = self.begin_decode_step(token, 1, "before a sampled decode step")?;
        let (a, queue) = (&self.acts, self.ctx.queue());
        let params =
            top_k::TopKParams { vocab: v as u32, k: k as u32, capacity: top_k::CAPACITY as u32, _pad: 0 };
        for call in &self.plan.top_k {
            queue.write_buffer(&call.params, 0, bytemuck::bytes_of(&params));
        }
        self.ctx
            .scoped("running a sampled decode step", || {
                let mut encoder = self.ctx.encoder("decode step, top k");
                {
                    let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                    encode::body(&mut pass, &self.plan, dims, Head::Last);
                    self.plan.top_k.iter().for_each(|call| call.dispatch(&mut pass, dims));
                }
                queue.submit([encoder.finish()]);
            })
            .await?;
        self.context += 1;
        let words = top_k::words(top_k::CAPACITY);
        let raw = a.picks_readback.read::<u32>(&self.ctx, &a.picks, 0, words).await;
        Ok(top_k::decode(&self.ctx.checked("running a sampled decode step", raw)?, v))
    }

    /// The largest `k` [`GpuModel::forward_top`] serves: the `top` buffer's room
    /// ([`top_k::CAPACITY`]), at most V.
    pub(crate) fn max_top_k(&self) -> usize {
        top_k::CAPACITY.min(self.config.vocab_size)
    }
}
