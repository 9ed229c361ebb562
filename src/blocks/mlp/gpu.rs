//! An MLP on the GPU: its weight buffers and the calls it records — gate and up projections
//! into one (T, gate ‖ up) row (or up alone for a plain MLP) → gated_act → the down projection,
//! scaled and added onto the residual. A mixture's experts are MLPs too (`src/blocks/moe/gpu.rs`).

use crate::blocks::gpu::LayerCx;
use crate::blocks::mlp::{Mlp, MlpNames};
use crate::error::Result;
use crate::gpu::KernelSpec;
use crate::gpu_model::activations::Scratch;
use crate::gpu_model::call::{Groups, Step};
use crate::gpu_model::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::gated_act::{self, GatedActParams};
use crate::kernels::linear;
use crate::model::{MlpPart, Part};

/// An MLP's weights on the GPU.
pub(crate) struct GpuWeights {
    pub gate: Option<SplitMatrix>, // (I, D) when the checkpoint has gate_proj of its own
    pub up: SplitMatrix,           // (I, D), or gate ‖ up (2·I, D)
    pub down: SplitMatrix,         // (D, I)
}

impl GpuWeights {
    /// Allocates (zeroed) the buffers of MLP `p` (residual width `d`), its tensors playing
    /// `part(m)` (`Part::Mlp` for a dense MLP).
    pub fn allocate(p: &Mlp, d: usize, a: &Alloc<'_>, part: impl Fn(MlpPart) -> Part) -> Result<Self> {
        let i = p.inner;
        let m = |label, shape, bias| a.matrix(label, shape, a.has(part(bias)));
        let (gate, up) = match p.names {
            MlpNames::Separate => {
                (Some(m("gate_proj", (i, d), MlpPart::GateBias)?), m("up_proj", (i, d), MlpPart::UpBias)?)
            }
            MlpNames::InputOutput | MlpNames::GateUp => {
                (None, m("gate_up", (2 * i, d), MlpPart::GateUpBias)?)
            }
            MlpNames::Plain => (None, m("up_proj", (i, d), MlpPart::UpBias)?),
        };
        Ok(Self { gate, up, down: m("down_proj", (d, i), MlpPart::DownBias)? })
    }

    /// Where the rows of its tensor `m` go.
    pub fn destination(&self, m: MlpPart) -> Option<Destination<'_>> {
        Some(match m {
            MlpPart::Gate => Destination::Matrix(self.gate.as_ref()?),
            MlpPart::GateBias => Destination::Bias(self.gate.as_ref()?),
            MlpPart::Up | MlpPart::GateUp => Destination::Matrix(&self.up),
            MlpPart::UpBias | MlpPart::GateUpBias => Destination::Bias(&self.up),
            MlpPart::Down => Destination::Matrix(&self.down),
            MlpPart::DownBias => Destination::Bias(&self.down),
        })
    }

    /// Its weight matrices.
    pub fn matrices(&self) -> Vec<&SplitMatrix> {
        self.gate.iter().chain([&self.up, &self.down]).collect()
    }
}

/// The kernel it dispatches beyond the matmuls.
pub(crate) fn kernels() -> Vec<KernelSpec> {
    vec![KernelSpec {
        name: "gated_act",
        source: gated_act::SOURCE,
        bindings: gated_act::BINDINGS,
        constants: Vec::new(),
    }]
}

/// Its share of the scratch buffers for `t` tokens: gate ‖ up rows in `xz`, the activation's
/// output in `y`.
pub(crate) fn scratch(p: &Mlp, t: usize) -> Scratch {
    Scratch { xz: t * 2 * p.inner, ud: 1, dbc: 1, y: t * p.inner, plane: 1, chunk: 0 }
}

/// How one MLP's calls run: its input `x` (T, D), the router's output when it is a routed
/// expert (`route`, with its expert id and top-k), and the multiplier of its output as the
/// down projection adds it onto the residual.
pub(crate) struct Io<'a> {
    pub x: &'a wgpu::Buffer,
    pub route: Option<(&'a wgpu::Buffer, u32, u32)>,
    pub out_scale: f32,
}

/// The calls of MLP `p` (weights `w`), in dispatch order.
pub(crate) fn plan(p: &Mlp, w: &GpuWeights, cx: LayerCx<'_>, io: Io<'_>) -> Result<Vec<Step>> {
    let LayerCx { b, a, .. } = cx;
    let (d, i) = (w.down.rows() as u32, p.inner as u32);
    let gated = p.gated();
    let row = if gated { 2 * i } else { i };
    let lin = |y_col| linear::LinearParams { x_stride: d, y_stride: row, y_col, ..Default::default() };
    let io_up = [("x", io.x), ("y", &a.xz)];
    let mut steps = Vec::new();
    // gate at column 0, up at column I (gate ‖ up: one matrix, the gate first).
    if let Some(gate) = &w.gate {
        steps.push(Step::Linear(b.linear(gate, &io_up, lin(0))?));
        steps.push(Step::Linear(b.linear(&w.up, &io_up, lin(i))?));
    } else {
        steps.push(Step::Linear(b.linear(&w.up, &io_up, lin(0))?));
    }
    let (route, expert, top_k) = io.route.unwrap_or((b.dummy, gated_act::NOT_ROUTED, 0));
    let act = GatedActParams {
        inner: i,
        x_stride: row,
        gate_col: 0,
        up_col: if gated { i } else { 0 },
        y_stride: i,
        act: gated_act::act_code(p.act),
        gated: gated as u32,
        gate_scale: p.scales.0,
        expert,
        top_k,
        _pad: [0; 2],
    };
    let specs = kernels();
    let groups = Groups::Values { per_token: i, wg: gated_act::WG };
    let io_act = [("x", &a.xz), ("route", route), ("y", &a.y)];
    steps.push(Step::Call(b.call(cx.kernel(&specs, "gated_act")?, &act, &io_act, groups)?));
    let down =
        linear::LinearParams { x_stride: i, y_stride: d, flags: linear::ACCUMULATE, ..Default::default() };
    let scale = io.out_scale * p.scales.1;
    steps.push(Step::Linear(b.linear(&w.down, &[("x", &a.y), ("y", &a.h)], down.scaled(scale))?));
    Ok(steps)
}
