//! Model weights on the GPU ([`GpuWeights`]): every buffer allocated from the checkpoint's
//! headers before any weight byte is read, then filled piece by piece as the checkpoint streams
//! in (`upload.rs`). Matrices are [`SplitMatrix`]es in a [`WeightFormat`]; small tensors f32.
//! Each layer's block allocates its own (`src/blocks/<kind>/gpu.rs`).

use crate::blocks::GpuBlockWeights;
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::gpu_kit::format::WeightFormat;
use crate::gpu_kit::split::{Alloc, SplitMatrix, kept_blocks};
use crate::model::{Config, Layout, Role};

/// One layer's weights on the GPU: the RMSNorm before its block, and its block's by kind.
pub(crate) struct GpuLayer {
    pub(crate) norm: wgpu::Buffer, // (D)
    pub(crate) mixer: GpuBlockWeights,
}

/// All weights on the GPU.
pub(crate) struct GpuWeights {
    pub(crate) embedding: SplitMatrix,       // (V, D)
    pub(crate) lm_head: Option<SplitMatrix>, // (V, D) when untied
    pub(crate) layers: Vec<GpuLayer>,
    pub(crate) norm_f: wgpu::Buffer, // (D)
    /// A 1-element buffer bound where a kernel's optional input (a bias) is absent.
    pub(crate) dummy: wgpu::Buffer,
}

impl GpuWeights {
    /// Allocates (zeroed) every buffer the model's weights need, matrices in `format`, each
    /// buffer at most `max_binding` bytes (else the device's limit).
    pub(crate) fn allocate(
        ctx: &GpuContext,
        c: &Config,
        layout: &Layout,
        (format, blocks): (WeightFormat, bool),
        max_binding: Option<u64>,
    ) -> Result<Self> {
        let (d, v) = (c.d_model, c.vocab_size);
        let max_binding = max_binding.unwrap_or(u64::MAX).min(ctx.max_binding());
        let z = |label: &str, len: usize| ctx.storage_zeroed_f32(label, len);
        // The embedding and LM head in the file's blocks, as a layer's matrices.
        let role_format = |role| match kept_blocks(layout.get(role)) {
            Some(ty) if blocks => WeightFormat::Ggml(ty),
            _ => format,
        };
        let m = |role, label: &str, shape| {
            SplitMatrix::allocate(ctx, label, shape, (role_format(role), max_binding), false)
        };
        let layers = c
            .blocks
            .iter()
            .enumerate()
            .map(|(layer, kind)| {
                let alloc = Alloc { ctx, layout, format, max_binding, layer, blocks };
                Ok(GpuLayer {
                    norm: alloc.vector("norm", d)?,
                    mixer: GpuBlockWeights::allocate(&kind.kind, d, &alloc)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            embedding: m(Role::Embedding, "embedding", (v, d))?,
            lm_head: layout.get(Role::LmHead).map(|_| m(Role::LmHead, "lm_head", (v, d))).transpose()?,
            layers,
            norm_f: z("norm_f", d)?,
            dummy: z("absent input", 1)?,
        })
    }

    /// The LM head: `lm_head.weight` if the checkpoint has one, else the tied embedding.
    pub(crate) fn lm_head(&self) -> &SplitMatrix {
        self.lm_head.as_ref().unwrap_or(&self.embedding)
    }

    /// Every matrix, for listing formats and bytes.
    pub(crate) fn matrices(&self) -> impl Iterator<Item = &SplitMatrix> {
        let layers = self.layers.iter().flat_map(|l| l.mixer.matrices());
        std::iter::once(&self.embedding).chain(self.lm_head.as_ref()).chain(layers)
    }

    /// Bytes of every weight buffer.
    pub(crate) fn bytes(&self) -> u64 {
        let vectors = |l: &GpuLayer| l.norm.size() + l.mixer.vectors().iter().map(|b| b.size()).sum::<u64>();
        self.matrices().map(SplitMatrix::bytes).sum::<u64>()
            + self.layers.iter().map(vectors).sum::<u64>()
            + self.norm_f.size()
    }
}
