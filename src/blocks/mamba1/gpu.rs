//! A Mamba-1 block on the GPU: its weight buffers and the calls it records, built once at load —
//! in_proj → conv1d_silu over x → x_proj (→ rms_slices: Falcon-Mamba's norms) → dt_proj +
//! softplus → scan_chunks / scan_carry (a prefill of several scan chunks) → scan_output (gated)
//! → out_proj. Every buffer is bound by the name of the WGSL global it feeds.

use crate::blocks::gpu_common::{GpuSsm, LayerCx, SsmShape, carry_call};
use crate::blocks::gpu_kind::{GpuKind, GpuParts};
use crate::blocks::mamba1::{Mamba1, decode};
use crate::error::{Error, Result};
use crate::gpu::{GpuContext, KernelSpec};
use crate::gpu_kit::WeightFormat;
use crate::gpu_kit::activations::Scratch;
use crate::gpu_kit::call::{Groups, Step};
use crate::gpu_kit::kv::KvFormat;
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::{conv1d_silu, linear, rms_slices, scan_carry, scan_chunks, scan_output};
use crate::model::Part;

/// A Mamba-1 block's weights on the GPU.
pub(crate) struct GpuWeights {
    /// in_proj (2·E·D, D), the conv (E·D, K), A ‖ D (E·D·N + E·D), out_proj (D, E·D).
    pub(crate) ssm: GpuSsm,
    pub(crate) x_proj: SplitMatrix,  // (R + 2N, E·D)
    pub(crate) dt_proj: SplitMatrix, // (E·D, R), bias (E·D)
    /// Jamba's gains of the δ, B and C norms: (R ‖ N ‖ N).
    pub(crate) dbc_gains: Option<wgpu::Buffer>,
}

impl GpuWeights {
    /// Allocates (zeroed) every buffer of block `p` (residual width `d`).
    pub(crate) fn allocate(p: &Mamba1, d: usize, a: &Alloc<'_>) -> Result<Self> {
        let (di, n, r) = (p.d_inner, p.d_state, p.dt_rank);
        let shape = SsmShape {
            in_proj: (p.in_proj_dim(), d),
            conv: (di, p.d_conv),
            a_d: (di * n + di, di * n),
            out_proj: (d, di),
        };
        Ok(Self {
            ssm: GpuSsm::allocate(shape, a)?,
            x_proj: a.matrix(Part::XProj, "x_proj", (r + 2 * n, di), false)?,
            dt_proj: a.matrix(Part::DtProj, "dt_proj", (di, r), true)?,
            dbc_gains: p.dbc_gains.then(|| a.vector("dt/b/c norms", r + 2 * n)).transpose()?,
        })
    }
}

impl GpuParts for GpuWeights {
    /// Where the rows of tensor `part` go.
    fn destination(&self, part: Part) -> Option<Destination<'_>> {
        match part {
            Part::XProj => Some(Destination::Matrix(&self.x_proj)),
            Part::DtProj => Some(Destination::Matrix(&self.dt_proj)),
            Part::DtProjBias => Some(Destination::Bias(&self.dt_proj)),
            Part::DtNorm | Part::BNorm | Part::CNorm => {
                let (r, n) = (self.dt_proj.cols, (self.x_proj.rows() - self.dt_proj.cols) / 2);
                let at = match part {
                    Part::DtNorm => 0,
                    Part::BNorm => r,
                    _ => r + n,
                };
                Some(Destination::Vector { buffer: self.dbc_gains.as_ref()?, at, neg_exp: false })
            }
            _ => self.ssm.destination(part),
        }
    }

    /// Its weight matrices.
    fn matrices(&self) -> Vec<&SplitMatrix> {
        vec![&self.ssm.in_proj, &self.x_proj, &self.dt_proj, &self.ssm.out_proj]
    }

    /// Its f32 vector buffers.
    fn vectors(&self) -> Vec<&wgpu::Buffer> {
        let mut out = self.ssm.vectors();
        out.extend(&self.dbc_gains);
        out
    }
}

/// The kernels it dispatches: the scans specialised for its N (loops unrolled, state in
/// registers), and Falcon-Mamba's norms where it has them.
pub(crate) fn kernels(p: &Mamba1) -> Vec<KernelSpec> {
    let spec = |name, source, bindings, n: Option<usize>| KernelSpec {
        name,
        source,
        bindings,
        constants: n.map(|n| ("N_STATE", n as f64)).into_iter().collect(),
    };
    let n = Some(p.d_state);
    let mut out = vec![
        spec("conv1d_silu", conv1d_silu::SOURCE, conv1d_silu::BINDINGS, None),
        spec("scan_chunks", scan_chunks::SOURCE, scan_chunks::BINDINGS, n),
        spec("scan_carry", scan_carry::SOURCE, scan_carry::BINDINGS, None),
        spec("scan_output", scan_output::SOURCE, scan_output::BINDINGS, n),
    ];
    if p.dbc_norm_eps.is_some() {
        out.push(spec("rms_slices", rms_slices::SOURCE, rms_slices::BINDINGS, None));
    }
    out
}

/// Its share of the scratch buffers for `t` tokens.
pub(crate) fn scratch(p: &Mamba1, t: usize) -> Scratch {
    let di = p.d_inner;
    // xz: in_proj's xs ‖ z (T, 2·E·D); ud: u then Δ (2, T, E·D); dbc: x_proj's δ ‖ B ‖ C
    // (T, R + 2N); y: the gated scan output (T, E·D).
    let s = Scratch { plane: di * p.d_state, chunk: scan_chunks::chunk_len(p.d_state), ..Scratch::none() };
    s.with("xz", t * p.in_proj_dim()).with("ud", 2 * t * di).with("dbc", t * p.x_proj_dim()).with("y", t * di)
}

/// Fails unless its kernels can run on `ctx`: the scans' workgroup memory (which grows with
/// the state size) within the device's, conv width and state size within what the shaders'
/// fixed-size arrays hold.
pub(crate) fn check(p: &Mamba1, ctx: &GpuContext) -> Result<()> {
    let shared = scan_output::workgroup_bytes(p.d_state).max(scan_chunks::workgroup_bytes(p.d_state));
    let limit = ctx.summary().max_compute_workgroup_storage_size;
    if shared > limit as usize {
        return Err(Error::UnsupportedModel(format!(
            "state_size {}: the scan needs {shared} bytes of workgroup memory, the device allows {limit}",
            p.d_state
        )));
    }
    if p.d_conv > conv1d_silu::K_MAX || p.d_state > scan_output::N_MAX {
        return Err(Error::UnsupportedModel(format!(
            "conv_kernel {} / state_size {}: the GPU kernels support at most {} / {}",
            p.d_conv,
            p.d_state,
            conv1d_silu::K_MAX,
            scan_output::N_MAX
        )));
    }
    Ok(())
}

/// The calls of a layer, a block `p` with weights `w`, in dispatch order.
pub(crate) fn plan(p: &Mamba1, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
    let LayerCx { b, a, s, i, residual, .. } = cx;
    let specs = kernels(p);
    let kernel = |name| cx.kernel(&specs, name);
    let d = w.ssm.in_proj.cols as u32;
    let (di, n, r) = (p.d_inner as u32, p.d_state as u32, p.dt_rank as u32);
    let cap = &a.capture_layout;
    let (map_len, slot_len) = (cap.map_len as u32, cap.slot_len as u32);
    let (conv_at, ssm_at) = (cap.conv_at(i) as u32, cap.ssm_at(i) as u32);
    let state_offset = cap.ssm_in_buffer(i) as u32;
    let lin = |x_stride, y_stride| linear::LinearParams { x_stride, y_stride, ..Default::default() };
    let conv = conv1d_silu::Conv1dParams {
        d_inner: di,
        d_conv: p.d_conv as u32,
        xz_stride: 2 * di,
        state_offset: conv_at,
        has_bias: w.ssm.conv_bias.is_some() as u32,
        map_len,
        slot_len,
        x_at: 0,
    };
    let dbc_stride = r + 2 * n;
    // Δ lands in the second half of u‖Δ: y_col works as a base offset.
    let delta_at = (a.max_tokens * p.d_inner) as u32;
    let (d_inner, dt_rank, chunk) = (di, r, a.chunk as u32);
    let chunks =
        scan_chunks::ScanChunksParams { d_inner, dbc_stride, dt_rank, chunk, delta_at, _pad: [0; 3] };
    let (xz_stride, slot_ssm_at, _pad) = (2 * di, ssm_at, [0; 2]);
    #[rustfmt::skip]
    let output = scan_output::ScanOutputParams {
        d_inner, dbc_stride, dt_rank, chunk, state_offset, xz_stride, delta_at, map_len, slot_len, slot_ssm_at, _pad,
    };
    let dt = linear::LinearParams { flags: linear::SOFTPLUS, y_col: delta_at, ..lin(dbc_stride, di) };
    let out = linear::LinearParams { flags: linear::ACCUMULATE, ..lin(di, d) }.scaled(residual);
    let scan = Groups::PerChunk(scan_chunks::groups(di, 1).0);
    // What both scan passes read: u ‖ Δ, δ ‖ B ‖ C, A ‖ D.
    let inputs = [("ud", a.scratch("ud")?), ("dbc", a.scratch("dbc")?), ("a_d", &w.ssm.a_d)];
    // With the fused decode step (decode.rs) the layer norms its own input, and the calls it
    // replaces run only for the other chunks.
    let fused = decode::fuses(p, &w.dt_proj, &cx);
    let unfused = |step: Step| if fused { Step::Unfused(Box::new(step)) } else { step };
    let mut steps = Vec::new();
    if fused {
        steps.push(crate::blocks::decode::norm(&cx, &a.h, d)?);
    }
    steps.extend([
        unfused(Step::Linear(b.linear(
            &w.ssm.in_proj,
            &[("x", &a.x_norm), ("y", a.scratch("xz")?)],
            lin(d, 2 * di),
        )?)),
        unfused(w.ssm.conv_call(b, kernel("conv1d_silu")?, &conv, (a, s))?),
        unfused(Step::Linear(b.linear(
            &w.x_proj,
            &[("x", a.scratch("ud")?), ("y", a.scratch("dbc")?)],
            lin(di, dbc_stride),
        )?)),
    ]);
    if fused {
        // A chunk runs the fused steps or the unfused ones, never both: their order relative
        // to each other does not matter.
        steps.extend(decode::in_proj(p, &w.ssm, &cx)?);
        steps.push(decode::x_proj(&w.x_proj, &cx, lin(2 * di, dbc_stride))?);
    }
    if let Some(eps) = p.dbc_norm_eps {
        // Falcon-Mamba's norms: a workgroup per (row, slice of δ, B, C).
        let flags = if w.dbc_gains.is_some() { rms_slices::HAS_GAINS } else { 0 };
        let norms = rms_slices::RmsSlicesParams {
            stride: dbc_stride,
            dt_rank: r,
            d_state: n,
            eps,
            flags,
            _pad: [0; 3],
        };
        let slices = Groups::Rows { per_token: 1, z: rms_slices::SLICES };
        let io = [("dbc", a.scratch("dbc")?), ("gains", w.dbc_gains.as_ref().unwrap_or(b.dummy))];
        steps.push(Step::Call(b.call(kernel("rms_slices")?, &norms, &io, slices)?));
    }
    let scan_out =
        [("chunk_h0", &a.chunk_h0), ("ssm_state", &s.ssm), ("y", a.scratch("y")?), ("capture", &a.capture)];
    steps.extend([
        unfused(Step::Linear(b.linear(
            &w.dt_proj,
            &[("x", a.scratch("dbc")?), ("y", a.scratch("ud")?)],
            dt,
        )?)),
        Step::Prefill(b.call(
            kernel("scan_chunks")?,
            &chunks,
            &[&inputs[..], &[("chunk_ab", &a.chunk_ab)]].concat(),
            scan,
        )?),
        carry_call(b, kernel("scan_carry")?, (di * n, state_offset), (a, s))?,
        // The gate z is in xz.
        unfused(Step::Call(b.call(
            kernel("scan_output")?,
            &output,
            &[&inputs[..], &[("xz", a.scratch("xz")?)], &scan_out].concat(),
            scan,
        )?)),
    ]);
    if fused {
        steps.push(decode::scan(p, (&w.ssm, &w.dt_proj), &cx)?);
    }
    steps.push(Step::Linear(b.linear(&w.ssm.out_proj, &[("x", a.scratch("y")?), ("y", &a.h)], out)?));
    Ok(steps)
}

impl GpuKind for Mamba1 {
    type GpuWeights = GpuWeights;

    fn allocate(&self, d: usize, alloc: &Alloc<'_>) -> Result<GpuWeights> {
        GpuWeights::allocate(self, d, alloc)
    }

    fn kernels(&self, _kv: KvFormat) -> Vec<KernelSpec> {
        kernels(self)
    }

    fn decode_kernels(&self, formats: &[WeightFormat], direct: bool) -> Vec<KernelSpec> {
        decode::kernels(self, formats, direct)
    }

    fn scratch(&self, _d: usize, t: usize) -> Scratch {
        scratch(self, t)
    }

    fn check(&self, ctx: &GpuContext, _kv: KvFormat) -> Result<()> {
        check(self, ctx)
    }

    /// With the fused decode step, which folds the norm into in_proj.
    fn norms_itself(&self, w: &GpuWeights, cx: &LayerCx<'_>) -> bool {
        decode::fuses(self, &w.dt_proj, cx)
    }

    fn plan(&self, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
        plan(self, w, cx)
    }
}
