//! A Mamba-2 block on the GPU: its weight buffers and the calls it records, built once at load —
//! in_proj (z ‖ x ‖ B ‖ C ‖ δ; Falcon-H1: then scale_segments, its per-segment multipliers) →
//! conv1d_silu over x ‖ B ‖ C → ssd_chunks / scan_carry (a prefill of several scan chunks) →
//! ssd_output (Δ from δ inside the scan, gated) → rms_norm over G groups per token (the gated
//! RMSNorm) → out_proj. Falcon-H1's variants: the norm before the gate (ssd_output ungated, the
//! norm, then silu_gate), or the gate alone (no norm). Every buffer is bound by the name of the
//! WGSL global it feeds.

use crate::blocks::decode;
use crate::blocks::gpu_common::{GpuSsm, LayerCx, Out, SsmShape, carry_call};
use crate::blocks::gpu_kind::{GpuKind, GpuParts};
use crate::blocks::mamba2::{GatedNorm, Mamba2};
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu::KernelSpec;
use crate::gpu_kit::WeightFormat;
use crate::gpu_kit::activations::Scratch;
use crate::gpu_kit::call::{Groups, Step};
use crate::gpu_kit::kv::KvFormat;
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::scale_segments::{self, ScaleSegmentsParams, Segments};
use crate::kernels::silu_gate::{self, SiluGateParams};
use crate::kernels::ssd_chunks::{self, SsdParams};
use crate::kernels::ssd_output::{self, SsdOutputParams};
use crate::kernels::{conv1d_silu, decode_out_proj, linear, rms_norm, scan_carry};
use crate::model::Part;

/// A Mamba-2 block's weights on the GPU.
pub(crate) struct GpuWeights {
    /// in_proj (E·D + conv_dim + H, D), the conv (conv_dim, K), A ‖ D ‖ dt_bias (3·H),
    /// out_proj (D, E·D).
    pub(crate) ssm: GpuSsm,
    pub(crate) gated_norm: wgpu::Buffer, // (E·D): the gated RMSNorm's gain
}

impl GpuWeights {
    /// Allocates (zeroed) every buffer of block `p` (residual width `d`).
    pub(crate) fn allocate(p: &Mamba2, d: usize, a: &Alloc<'_>) -> Result<Self> {
        let h = p.n_heads;
        let shape = SsmShape {
            in_proj: (p.in_proj_dim(), d),
            conv: (p.conv_dim(), p.d_conv),
            a_d: (3 * h, h),
            out_proj: (d, p.d_inner),
        };
        Ok(Self { ssm: GpuSsm::allocate(shape, a)?, gated_norm: a.vector("mixer.norm", p.d_inner)? })
    }
}

impl GpuParts for GpuWeights {
    /// Where the rows of tensor `part` go.
    fn destination(&self, part: Part) -> Option<Destination<'_>> {
        let vector = |buffer, at| Some(Destination::Vector { buffer, at, neg_exp: false });
        match part {
            // dt_bias after A and D.
            Part::DtBias => vector(&self.ssm.a_d, 2 * self.ssm.d_at),
            Part::GatedNorm => vector(&self.gated_norm, 0),
            _ => self.ssm.destination(part),
        }
    }

    /// Its weight matrices.
    fn matrices(&self) -> Vec<&SplitMatrix> {
        vec![&self.ssm.in_proj, &self.ssm.out_proj]
    }

    /// Its f32 vector buffers.
    fn vectors(&self) -> Vec<&wgpu::Buffer> {
        let mut out = self.ssm.vectors();
        out.push(&self.gated_norm);
        out
    }
}

/// The kernels it dispatches: the SSD scans specialised for its N (the output pass gated
/// unless the norm comes first), and Falcon-H1's segment multipliers and late gate where it
/// has them.
pub(crate) fn kernels(p: &Mamba2) -> Vec<KernelSpec> {
    let n = vec![("N_STATE", p.d_state as f64), ("SPLIT", ssd_chunks::split(p.d_state) as f64)];
    let gate = (p.gated_norm != GatedNorm::NormThenGate) as u32 as f64;
    let spec = |name, source, bindings, constants| KernelSpec { name, source, bindings, constants };
    let mut out = vec![
        spec("conv1d_silu", conv1d_silu::SOURCE, conv1d_silu::BINDINGS, Vec::new()),
        spec("ssd_chunks", ssd_chunks::SOURCE, ssd_chunks::BINDINGS, n.clone()),
        spec("scan_carry", scan_carry::SOURCE, scan_carry::BINDINGS, Vec::new()),
        spec("ssd_output", ssd_output::SOURCE, ssd_output::BINDINGS, [n, vec![("GATE", gate)]].concat()),
    ];
    if p.in_scales != [1.0; 5] {
        out.push(spec("scale_segments", scale_segments::SOURCE, scale_segments::BINDINGS, Vec::new()));
    }
    if p.gated_norm == GatedNorm::NormThenGate {
        out.push(spec("silu_gate", silu_gate::SOURCE, silu_gate::BINDINGS, Vec::new()));
    }
    out
}

/// The fused decode kernels it may dispatch (decode_in_proj, decode_out_proj), one of each per
/// weight format in `formats`.
pub(crate) fn decode_kernels(formats: &[WeightFormat], direct: bool) -> Vec<KernelSpec> {
    formats
        .iter()
        .flat_map(|&f| [decode::in_proj_spec(f, direct), decode::out_proj_spec(f, direct)])
        .collect()
}

/// Its share of the scratch buffers for `t` tokens.
pub(crate) fn scratch(p: &Mamba2, t: usize) -> Scratch {
    // xz: in_proj's z ‖ x ‖ B ‖ C ‖ δ (T, E·D + conv_dim + H); ud: x ‖ B ‖ C after the conv
    // (T, conv_dim), then the gated norm's output; y: the scan output (T, E·D).
    let s = Scratch { plane: p.d_inner * p.d_state, chunk: ssd_chunks::CHUNK, ..Scratch::none() };
    s.with("xz", t * p.in_proj_dim()).with("ud", t * p.conv_dim()).with("y", t * p.d_inner)
}

/// Fails unless its kernels can run: the SSD kernels stage B ‖ C in a fixed 8 KiB, a tile of
/// tokens at a time, and the conv's window is a fixed-size array.
pub(crate) fn check(p: &Mamba2) -> Result<()> {
    if p.d_conv > conv1d_silu::K_MAX || p.d_state > ssd_chunks::N_MAX {
        return Err(Error::UnsupportedModel(format!(
            "conv_kernel {} / state_size {}: the Mamba-2 GPU kernels support at most {} / {}",
            p.d_conv,
            p.d_state,
            conv1d_silu::K_MAX,
            ssd_chunks::N_MAX
        )));
    }
    Ok(())
}

/// What a Mamba-2 block's calls read and write: its input rows `x`, the multiplier of that
/// input (folded into in_proj's result, exact without a bias: W(s·x) = s·(W x); Falcon-H1's
/// `ssm_in_multiplier`), and where out_proj's output goes.
pub(crate) struct Io<'a> {
    pub(crate) x: &'a wgpu::Buffer,
    pub(crate) in_scale: f32,
    pub(crate) out: Out<'a>,
    /// Decode steps fuse the RMSNorm of this buffer (row 0: the residual h, or Zamba2's Mamba
    /// input; the norm's output is `x`, x_norm), in_proj and the conv; `None`: never.
    pub(crate) fused: Option<&'a wgpu::Buffer>,
    /// The block makes `x` itself (an RMSNorm step that fused decode steps skip); false where
    /// the plan's norm before the block makes it for other readers too (Falcon-H1's attention).
    pub(crate) own_norm: bool,
}

/// The calls of a layer, a block `p` with weights `w`, in dispatch order: over the normed
/// residual, added onto the residual times the block's multiplier.
pub(crate) fn plan(p: &Mamba2, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
    let fused = fuses(p, &cx).then_some(&cx.a.h);
    let io = Io { x: &cx.a.x_norm, in_scale: 1.0, out: Out::Residual(cx.residual), fused, own_norm: true };
    plan_io(p, w, cx, io)
}

/// Whether a layer of block `p` (the residual's norm in, out onto the residual) runs the fused
/// decode step (`src/blocks/decode.rs`): its RMSNorm, in_proj and conv as one decode_in_proj,
/// then ssd_output reading the conv's output where decode_in_proj leaves it, then (with the
/// gate before the norm, as HF's Mamba-2) the gated norm, out_proj and the residual add as one
/// decode_out_proj — 3 dispatches fewer (Zamba2's layers too, norming their own Mamba
/// input; Falcon-H1's parallel blocks with their multipliers, see `parallel/gpu.rs`).
pub(crate) fn fuses(p: &Mamba2, cx: &LayerCx<'_>) -> bool {
    decode::possible(cx, p.d_conv)
}

/// The calls of a layer, a block `p` with weights `w`, reading and writing as `io` says.
pub(crate) fn plan_io(p: &Mamba2, w: &GpuWeights, cx: LayerCx<'_>, io: Io<'_>) -> Result<Vec<Step>> {
    let LayerCx { b, a, s, i, .. } = cx;
    if io.in_scale != 1.0 && p.use_bias {
        return Err(Error::Internal(format!(
            "layer {i}: an input multiplier on a Mamba-2 in_proj with a bias"
        )));
    }
    let specs = kernels(p);
    let kernel = |name| cx.kernel(&specs, name);
    let (d, di, n) = (w.ssm.in_proj.cols as u32, p.d_inner as u32, p.d_state as u32);
    let (cd, width) = (p.conv_dim() as u32, p.in_proj_dim() as u32);
    let cap = &a.capture_layout;
    let (map_len, slot_len) = (cap.map_len as u32, cap.slot_len as u32);
    let state_offset = cap.ssm_in_buffer(i) as u32;
    let lin = |x_stride, y_stride| linear::LinearParams { x_stride, y_stride, ..Default::default() };
    let conv = conv1d_silu::Conv1dParams {
        d_inner: cd,
        d_conv: p.d_conv as u32,
        xz_stride: width,
        state_offset: cap.conv_at(i) as u32,
        has_bias: w.ssm.conv_bias.is_some() as u32,
        map_len,
        slot_len,
        // The conv input x ‖ B ‖ C follows z.
        x_at: di,
    };
    let ssd = SsdParams::new(p, a.chunk);
    let slot_ssm_at = cap.ssm_at(i) as u32;
    let output = SsdOutputParams { ssd, state_offset, map_len, slot_len, slot_ssm_at, u_at: 0, _pad: [0; 3] };
    let groups = p.n_groups as u32;
    let gated = rms_norm::RmsNormParams { cols: di / groups, eps: p.norm_eps, flags: 0, groups };
    let (out_y, out) = io.out.apply(&a.h, lin(di, d));
    let scan = Groups::PerChunk(ssd.groups(1).0);
    // What both scan passes read: u (x ‖ B ‖ C), δ in zxbcdt, A ‖ D ‖ dt_bias.
    let inputs = [("u", a.scratch("ud")?), ("zxbcdt", a.scratch("xz")?), ("a_dt", &w.ssm.a_d)];
    let scan_out =
        [("chunk_h0", &a.chunk_h0), ("ssm_state", &s.ssm), ("y", a.scratch("y")?), ("capture", &a.capture)];
    let in_proj = lin(d, width).scaled(io.in_scale);
    let unfused = |step: Step| if io.fused.is_some() { Step::Unfused(Box::new(step)) } else { step };
    let mut steps = Vec::new();
    if let (Some(input), true) = (io.fused, io.own_norm) {
        steps.push(decode::norm(&cx, input, d)?);
    }
    // Falcon-H1's multipliers per segment of in_proj's output (the unfused path's
    // scale_segments; the fused decode_in_proj applies the same).
    let segments = (p.in_scales != [1.0; 5]).then(|| {
        let gn = groups * n;
        let [scale_z, scale_x, scale_b, scale_c, scale_dt] = p.in_scales;
        Segments {
            end_z: di,
            end_x: 2 * di,
            end_b: 2 * di + gn,
            end_c: 2 * di + 2 * gn,
            scale_z,
            scale_x,
            scale_b,
            scale_c,
            scale_dt,
        }
    });
    steps.push(unfused(Step::Linear(b.linear(
        &w.ssm.in_proj,
        &[("x", io.x), ("y", a.scratch("xz")?)],
        in_proj,
    )?)));
    if let Some(segments) = segments {
        let params = ScaleSegmentsParams { width, segments, _pad: [0; 2] };
        let values = Groups::Values { per_token: width, wg: scale_segments::WG };
        steps.push(unfused(Step::Call(b.call(
            kernel("scale_segments")?,
            &params,
            &[("x", a.scratch("xz")?)],
            values,
        )?)));
    }
    steps.extend([
        unfused(w.ssm.conv_call(b, kernel("conv1d_silu")?, &conv, (a, s))?),
        Step::Prefill(b.call(
            kernel("ssd_chunks")?,
            &ssd,
            &[&inputs[..], &[("chunk_ab", &a.chunk_ab)]].concat(),
            scan,
        )?),
        carry_call(b, kernel("scan_carry")?, (di * n, state_offset), (a, s))?,
        unfused(Step::Call(b.call(
            kernel("ssd_output")?,
            &output,
            &[&inputs[..], &scan_out].concat(),
            scan,
        )?)),
    ]);
    if let Some(input) = io.fused {
        // The conv's output x ‖ B ‖ C is in zxbcdt, from column E·D: bound as u too.
        let conv_rows = decode::ConvRows { from: p.d_inner, channels: p.conv_dim(), taps: p.d_conv };
        let mult = decode::InMultipliers { scale: io.in_scale, segments };
        steps.extend(decode::in_proj(&w.ssm, (input, conv_rows, mult), &cx)?);
        let fused = SsdOutputParams { u_at: di, ..output };
        let io = [("u", a.scratch("xz")?), ("zxbcdt", a.scratch("xz")?), ("a_dt", &w.ssm.a_d)];
        let call = b.call(kernel("ssd_output")?, &fused, &[&io[..], &scan_out].concat(), scan)?;
        steps.push(Step::Fused(Box::new(Step::Call(call))));
    }
    // The block's output before out_proj, (T, E·D): the scan's (gated) y, or — the scan has
    // read u — the normalised output in u's rows.
    // Fused decode steps run the gated norm (y · silu(z) first, or Falcon-H1's norm first and
    // silu(z) after) and out_proj + the residual add as one decode_out_proj.
    let residual = match io.out {
        Out::Residual(s) => Some(s),
        Out::Into(_) => None,
    };
    let fuse_out = io.fused.is_some()
        && p.gated_norm != GatedNorm::GateOnly
        && p.n_groups <= decode_out_proj::G_MAX
        && residual.is_some();
    let unfused_out = |step: Step| if fuse_out { Step::Unfused(Box::new(step)) } else { step };
    let mut y = a.scratch("y")?;
    if p.gated_norm != GatedNorm::GateOnly {
        steps.push(unfused_out(Step::Call(b.call(
            &b.k.rms_norm,
            &gated,
            &[("x", a.scratch("y")?), ("weight", &w.gated_norm), ("y", a.scratch("ud")?)],
            Groups::Rows { per_token: groups, z: 1 },
        )?)));
        y = a.scratch("ud")?;
    }
    if p.gated_norm == GatedNorm::NormThenGate {
        let params = SiluGateParams { cols: di, y_stride: di, z_stride: width, z_col: 0 };
        let values = Groups::Values { per_token: di, wg: silu_gate::WG };
        let io_gate = [("z", a.scratch("xz")?), ("y", a.scratch("ud")?)];
        steps.push(unfused_out(Step::Call(b.call(kernel("silu_gate")?, &params, &io_gate, values)?)));
    }
    steps.push(unfused_out(Step::Linear(b.linear(&w.ssm.out_proj, &[("x", y), ("y", out_y)], out)?)));
    if let (true, Some(residual)) = (fuse_out, residual) {
        let norm = (p.n_groups, p.norm_eps, residual);
        let gate_after = p.gated_norm == GatedNorm::NormThenGate;
        let inputs = (a.scratch("y")?, &w.gated_norm, gate_after.then_some(a.scratch("xz")?));
        steps.extend(decode::out_proj(&w.ssm.out_proj, inputs, norm, &cx)?);
    }
    Ok(steps)
}

impl GpuKind for Mamba2 {
    type GpuWeights = GpuWeights;

    fn allocate(&self, d: usize, alloc: &Alloc<'_>) -> Result<GpuWeights> {
        GpuWeights::allocate(self, d, alloc)
    }

    fn kernels(&self, _kv: KvFormat) -> Vec<KernelSpec> {
        kernels(self)
    }

    fn decode_kernels(&self, formats: &[WeightFormat], direct: bool) -> Vec<KernelSpec> {
        decode_kernels(formats, direct)
    }

    fn scratch(&self, _d: usize, t: usize) -> Scratch {
        scratch(self, t)
    }

    fn check(&self, _ctx: &GpuContext, _kv: KvFormat) -> Result<()> {
        check(self)
    }

    /// With the fused decode step, which folds the norm into in_proj.
    fn norms_itself(&self, _w: &GpuWeights, cx: &LayerCx<'_>) -> bool {
        fuses(self, cx)
    }

    fn plan(&self, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
        plan(self, w, cx)
    }
}
