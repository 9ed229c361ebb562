//! An attention block on the GPU: its weight buffers and the calls it records, built once per
//! cache capacity (`src/gpu_kit/kv.rs`) — q_proj, k_proj (× the key multiplier), v_proj (and
//! Qwen3.5's output gate) into one (T, q ‖ k ‖ v ‖ gate) row → the per-head q/k norms (where the
//! model has them) → rope over q and k (where it has RoPE) → kv_append (k, v into the layer's
//! cache at positions past..past+T) → attention_prefill for a chunk of several tokens, or
//! attention_decode + attention_combine for a decode step → × σ(gate) (Qwen3.5) → o_proj,
//! scaled and added onto the residual. Every buffer is bound by the name of the WGSL global it
//! feeds.
//!
//! Qwen3.5's q_proj holds per head hd query rows, then hd gate rows: they are dealt to two
//! matrices as they load (`Destination::Dealt`), so the gate is a matmul of its own and no
//! kernel ever reads the interleaved layout.

use crate::blocks::attention::Attention;
use crate::blocks::gpu_common::{GpuAdapter, LayerCx, Out, adapter_steps};
use crate::blocks::gpu_kind::{GpuKind, GpuParts};
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu::KernelSpec;
use crate::gpu_kit::activations::Scratch;
use crate::gpu_kit::call::{Groups, Step};
use crate::gpu_kit::kv::{KvFormat, LayerKv};
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::attention::AttentionShape;
use crate::kernels::attention_combine::{self, AttentionCombineParams};
use crate::kernels::attention_decode::{self, AttentionDecodeParams};
use crate::kernels::attention_prefill::{self, AttentionPrefillParams};
use crate::kernels::head_norm::{self, HeadNormParams};
use crate::kernels::kv_append::{self, KvAppendParams};
use crate::kernels::linear;
use crate::kernels::rope::{self, RopeParams};
use crate::kernels::silu_gate::{self, SiluGateParams};
use crate::model::Part;

/// An attention block's weights on the GPU.
pub(crate) struct GpuWeights {
    pub(crate) q: SplitMatrix, // (Hq·hd, D_in), bias when qkv_bias
    pub(crate) k: SplitMatrix, // (Hkv·hd, D_in)
    pub(crate) v: SplitMatrix, // (Hkv·hd, D_in)
    pub(crate) o: SplitMatrix, // (D_out, Hq·hd), bias when o_bias
    /// The output gate (Hq·hd, D_in), bias when qkv_bias: q_proj's gate rows (Qwen3.5).
    pub(crate) gate: Option<SplitMatrix>,
    /// hd: the blocks of rows q_proj deals to `q` and `gate` in turn.
    head_dim: usize,
    /// The per-head norms' gains (2, hd): q's, then k's, where it has them.
    pub(crate) qk_gains: Option<wgpu::Buffer>,
}

impl GpuWeights {
    /// Allocates (zeroed) the buffers of block `p` reading rows of `d_in` and writing `d_out`.
    pub(crate) fn allocate(p: &Attention, (d_in, d_out): (usize, usize), a: &Alloc<'_>) -> Result<Self> {
        let (q, kv) = (p.q_dim(), p.kv_dim());
        // With a gate, q_proj's rows arrive in blocks of hd: a format whose quantization
        // groups span two rows (q4 on 32-column rows) must not straddle two blocks.
        let dealt = Alloc { format: a.format.for_shape(p.head_dim, d_in), ..*a };
        let q_alloc = if p.output_gate { &dealt } else { a };
        Ok(Self {
            q: q_alloc.matrix(Part::Q, "q_proj", (q, d_in), a.has(Part::QBias))?,
            gate: p
                .output_gate
                .then(|| dealt.matrix(Part::Q, "q_proj gate", (q, d_in), a.has(Part::QBias)))
                .transpose()?,
            head_dim: p.head_dim,
            k: a.matrix(Part::K, "k_proj", (kv, d_in), a.has(Part::KBias))?,
            v: a.matrix(Part::V, "v_proj", (kv, d_in), a.has(Part::VBias))?,
            o: a.matrix(Part::O, "o_proj", (d_out, q), a.has(Part::OBias))?,
            qk_gains: p.qk_norm.map(|_| a.vector("qk_norm", 2 * p.head_dim)).transpose()?,
        })
    }
}

impl GpuParts for GpuWeights {
    /// Where the rows of its tensor `part` go.
    fn destination(&self, part: Part) -> Option<Destination<'_>> {
        if let (Some(gate), Part::Q | Part::QBias) = (&self.gate, part) {
            // Per head hd query rows, then hd gate rows.
            let (matrices, block) = (vec![&self.q, gate], self.head_dim);
            return Some(match part {
                Part::Q => Destination::Dealt { matrices, block },
                _ => Destination::DealtBias { matrices, block },
            });
        }
        Some(match part {
            Part::Q => Destination::Matrix(&self.q),
            Part::QBias => Destination::Bias(&self.q),
            Part::K => Destination::Matrix(&self.k),
            Part::KBias => Destination::Bias(&self.k),
            Part::V => Destination::Matrix(&self.v),
            Part::VBias => Destination::Bias(&self.v),
            Part::O => Destination::Matrix(&self.o),
            Part::OBias => Destination::Bias(&self.o),
            Part::QNorm | Part::KNorm => {
                // (2, hd): k's gain after q's.
                let buffer = self.qk_gains.as_ref()?;
                let at = if part == Part::QNorm { 0 } else { (buffer.size() / 8) as usize };
                Destination::Vector { buffer, at, neg_exp: false }
            }
            _ => return None,
        })
    }

    /// Its weight matrices.
    fn matrices(&self) -> Vec<&SplitMatrix> {
        [&self.q, &self.k, &self.v, &self.o].into_iter().chain(&self.gate).collect()
    }

    /// Its f32 vector buffers.
    fn vectors(&self) -> Vec<&wgpu::Buffer> {
        self.qk_gains.iter().collect()
    }
}

/// The kernels it dispatches, those reading or writing the caches for their `format`.
pub(crate) fn kernels(p: &Attention, format: KvFormat) -> Vec<KernelSpec> {
    let kv = vec![("KV_FORMAT", format.shader_value())];
    let spec = |name, source, bindings, constants| KernelSpec { name, source, bindings, constants };
    let mut out = vec![
        spec("kv_append", kv_append::SOURCE, kv_append::BINDINGS, kv.clone()),
        spec("attention_prefill", attention_prefill::SOURCE, attention_prefill::BINDINGS, kv.clone()),
        spec("attention_decode", attention_decode::SOURCE, attention_decode::BINDINGS, kv),
        spec("attention_combine", attention_combine::SOURCE, attention_combine::BINDINGS, Vec::new()),
    ];
    if p.rope.is_some() {
        out.push(spec("rope", rope::SOURCE, rope::BINDINGS, Vec::new()));
    }
    if p.qk_norm.is_some() {
        out.push(spec("head_norm", head_norm::SOURCE, head_norm::BINDINGS, Vec::new()));
    }
    if p.output_gate {
        let sigmoid = vec![(silu_gate::SIGMOID, 1.0)];
        out.push(spec("silu_gate", silu_gate::SOURCE, silu_gate::BINDINGS, sigmoid));
    }
    out
}

/// Floats per token of its `xz` rows: q ‖ k ‖ v (Hq·hd + 2·Hkv·hd), then the gate (Hq·hd)
/// where it has one.
fn row_width(p: &Attention) -> usize {
    let gate = if p.output_gate { p.q_dim() } else { 0 };
    p.q_dim() + 2 * p.kv_dim() + gate
}

/// Its share of the scratch buffers for `t` tokens: q ‖ k ‖ v (‖ gate) rows in `xz`, the
/// attention's output (before o_proj) in `y`.
pub(crate) fn scratch(p: &Attention, t: usize) -> Scratch {
    // xz: q ‖ k ‖ v ‖ gate (T, Hq·hd + 2·Hkv·hd (+ Hq·hd)); y: the attention output (T, Hq·hd);
    // lora: an adapter's rows (Zamba2's; asked for by its kind).
    Scratch::none().with("xz", t * row_width(p)).with("y", t * p.q_dim())
}

/// Fails unless the kernels can run it (head_dim within `HEAD_DIM_MAX`; f16 caches pack
/// values in pairs, so they need an even Hkv·hd).
pub(crate) fn check(p: &Attention, format: KvFormat) -> Result<()> {
    if format == KvFormat::F16 && !p.kv_dim().is_multiple_of(2) {
        return Err(Error::UnsupportedModel(format!(
            "kvFormat f16 with an odd key/value width ({}): use kvFormat f32",
            p.kv_dim()
        )));
    }
    shape(p, 1).check()
}

fn shape(p: &Attention, capacity: usize) -> AttentionShape {
    AttentionShape {
        heads: p.n_heads as u32,
        kv_heads: p.n_kv_heads as u32,
        head_dim: p.head_dim as u32,
        kv_offset: 0,
        capacity: capacity as u32,
        scale: p.scale,
    }
}

/// What an attention's calls read and write: its input rows `x` (the normed residual; for
/// Zamba2's shared block hidden ‖ embeddings), where o_proj's output goes, and LoRA adapters on
/// q, k, v (Zamba2's per-use ones).
pub(crate) struct Io<'a> {
    pub(crate) x: &'a wgpu::Buffer,
    pub(crate) out: Out<'a>,
    pub(crate) adapters: [Option<&'a GpuAdapter>; 3],
}

/// The calls of attention block `p` (weights `w`, cache `kv` of `capacity` positions), in
/// dispatch order.
pub(crate) fn plan(
    p: &Attention,
    w: &GpuWeights,
    cx: LayerCx<'_>,
    kv: (&LayerKv, usize),
    io: Io<'_>,
) -> Result<Vec<Step>> {
    plan_scaled(p, w, cx, kv, io, 1.0)
}

/// [`plan`] over its input times `in_scale` (Falcon-H1's `attention_in_multiplier`), folded into
/// q/k/v_proj's results: W(s·x) = s·(W x), exact without biases (an Internal error with them).
pub(crate) fn plan_scaled(
    p: &Attention,
    w: &GpuWeights,
    cx: LayerCx<'_>,
    (kv, capacity): (&LayerKv, usize),
    io: Io<'_>,
    in_scale: f32,
) -> Result<Vec<Step>> {
    let LayerCx { b, a, i, .. } = cx;
    if in_scale != 1.0 && p.qkv_bias {
        return Err(Error::Internal(format!(
            "layer {i}: an input multiplier on an attention with q/k/v biases"
        )));
    }
    let specs = kernels(p, cx.kv.format);
    let kernel = |name| cx.kernel(&specs, name);
    let (q_dim, kv_dim) = (p.q_dim() as u32, p.kv_dim() as u32);
    let (row, gate_col) = (row_width(p) as u32, q_dim + 2 * kv_dim);
    let (d_in, d_out) = (w.q.cols as u32, w.o.rows() as u32);
    let sh = shape(p, capacity);
    let lin = |y_col| linear::LinearParams { x_stride: d_in, y_stride: row, y_col, ..Default::default() };
    let qkv_out = [("x", io.x), ("y", a.scratch("xz")?)];
    let mut steps = Vec::new();
    for (j, (m, col)) in [(&w.q, 0), (&w.k, q_dim), (&w.v, q_dim + kv_dim)].into_iter().enumerate() {
        let scale = if j == 1 { in_scale * p.key_scale } else { in_scale };
        steps.push(Step::Linear(b.linear(m, &qkv_out, lin(col).scaled(scale))?));
        if let Some(adapter) = io.adapters[j] {
            steps.extend(adapter_steps(
                b,
                adapter,
                (io.x, a.scratch("lora")?),
                (a.scratch("xz")?, row, col),
            )?);
        }
    }
    if let Some(gate) = &w.gate {
        steps.push(Step::Linear(b.linear(gate, &qkv_out, lin(gate_col).scaled(in_scale))?));
    }
    if let (Some(norm), Some(gains)) = (p.qk_norm, w.qk_gains.as_ref()) {
        // q's and k's heads by their own RMS, in place, before RoPE.
        let heads = sh.heads + sh.kv_heads;
        let params = HeadNormParams {
            stride: row,
            heads,
            q_heads: sh.heads,
            head_dim: sh.head_dim,
            eps: norm.eps,
            _pad: [0; 3],
        };
        let io = [("x", a.scratch("xz")?), ("gains", gains)];
        steps.push(Step::Call(b.call(
            kernel("head_norm")?,
            &params,
            &io,
            Groups::Rows { per_token: heads, z: 1 },
        )?));
    }
    if let (Some(r), Some(table)) = (p.rope, kv.rope.as_ref()) {
        let rot = r.dims as u32;
        for (col, heads) in [(0, sh.heads), (q_dim, sh.kv_heads)] {
            let params = RopeParams {
                stride: row,
                col,
                heads,
                head_dim: sh.head_dim,
                rot,
                positions: capacity as u32,
                _pad: [0; 2],
            };
            let groups = Groups::Values { per_token: heads * rot / 2, wg: rope::WG };
            steps.push(Step::Call(b.call(
                kernel("rope")?,
                &params,
                &[("cos_sin", table), ("x", a.scratch("xz")?)],
                groups,
            )?));
        }
    }
    let append = KvAppendParams {
        width: kv_dim,
        k_stride: row,
        k_col: q_dim,
        v_stride: row,
        v_col: q_dim + kv_dim,
        kv_offset: 0,
        capacity: capacity as u32,
        _pad: 0,
    };
    let groups = Groups::Values { per_token: kv_dim, wg: kv_append::WG };
    let io_kv = [("k", a.scratch("xz")?), ("v", a.scratch("xz")?), ("kv", &kv.kv)];
    steps.push(Step::Call(b.call(kernel("kv_append")?, &append, &io_kv, groups)?));
    // Several tokens: tiles of query rows, each over its keys.
    let prefill = AttentionPrefillParams { q_stride: row, ..AttentionPrefillParams::new(&sh) };
    let groups = Groups::Tiles { per_token: sh.heads / sh.kv_heads, tile: prefill.rows, times: sh.kv_heads };
    let io_prefill = [("q", a.scratch("xz")?), ("kv", &kv.kv), ("o", a.scratch("y")?)];
    steps.push(Step::Bulk(b.call(kernel("attention_prefill")?, &prefill, &io_prefill, groups)?));
    // A decode step: the context cut into splits, then the splits merged.
    let split_keys = attention_decode::splits(capacity as u32, sh.heads, 1, sh.head_dim).split_keys;
    let decode = AttentionDecodeParams { q_stride: row, ..AttentionDecodeParams::new(&sh, split_keys) };
    let io_decode = [("q", a.scratch("xz")?), ("kv", &kv.kv), ("scratch", &cx.kv.scratch)];
    let groups = Groups::Splits { per_token: sh.heads, keys: split_keys };
    steps.push(Step::Decode(b.call(kernel("attention_decode")?, &decode, &io_decode, groups)?));
    let combine = AttentionCombineParams {
        o_stride: q_dim,
        o_col: 0,
        heads: sh.heads,
        head_dim: sh.head_dim,
        split_keys,
        _pad: [0; 3],
    };
    let io_combine = [("scratch", &cx.kv.scratch), ("o", a.scratch("y")?)];
    let groups = Groups::Rows { per_token: sh.heads, z: 1 };
    steps.push(Step::Decode(b.call(kernel("attention_combine")?, &combine, &io_combine, groups)?));
    if w.gate.is_some() {
        // y ← y · σ(gate), before o_proj.
        let params = SiluGateParams { cols: q_dim, y_stride: q_dim, z_stride: row, z_col: gate_col };
        let io_gate = [("z", a.scratch("xz")?), ("y", a.scratch("y")?)];
        let values = Groups::Values { per_token: q_dim, wg: silu_gate::WG };
        steps.push(Step::Call(b.call(kernel("silu_gate")?, &params, &io_gate, values)?));
    }
    let out = linear::LinearParams { x_stride: q_dim, y_stride: d_out, ..Default::default() };
    let (y, out) = io.out.apply(&a.h, out);
    steps.push(Step::Linear(b.linear(&w.o, &[("x", a.scratch("y")?), ("y", y)], out)?));
    Ok(steps)
}

impl GpuKind for Attention {
    type GpuWeights = GpuWeights;

    fn allocate(&self, d: usize, alloc: &Alloc<'_>) -> Result<GpuWeights> {
        GpuWeights::allocate(self, (d, d), alloc)
    }

    fn kernels(&self, kv: KvFormat) -> Vec<KernelSpec> {
        kernels(self, kv)
    }

    fn scratch(&self, _d: usize, t: usize) -> Scratch {
        scratch(self, t)
    }

    fn check(&self, _ctx: &GpuContext, kv: KvFormat) -> Result<()> {
        check(self, kv)
    }

    fn plan(&self, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
        let kv = cx.kv.layers[cx.i]
            .as_ref()
            .ok_or_else(|| Error::Internal(format!("layer {} has attention but no key/value cache", cx.i)))?;
        let io = Io { x: &cx.a.x_norm, out: Out::Residual(cx.residual), adapters: [None; 3] };
        plan(self, w, cx, (kv, cx.kv.capacity), io)
    }
}
