//! An MLP on the GPU: its weight buffers and the calls it records — gate and up projections
//! into one (T, gate ‖ up) row (or up alone for a plain MLP) → gated_act → the down projection,
//! scaled and added onto the residual. A mixture's experts are MLPs too (`src/blocks/moe/gpu.rs`).

use crate::blocks::gpu_common::{GpuAdapter, LayerCx, Out, adapter_steps};
use crate::blocks::gpu_kind::{GpuKind, GpuParts};
use crate::blocks::mlp::{Mlp, MlpNames};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::gpu::KernelSpec;
use crate::gpu_kit::activations::Scratch;
use crate::gpu_kit::call::{Groups, IndirectLinear, LinearCall, Step};
use crate::gpu_kit::kv::KvFormat;
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::gated_act::{self, GatedActParams};
use crate::kernels::linear;
use crate::model::{MlpPart, Part};

/// An MLP's weights on the GPU.
pub(crate) struct GpuWeights {
    pub(crate) gate: Option<SplitMatrix>, // (I, D) when the checkpoint has gate_proj of its own
    pub(crate) up: SplitMatrix,           // (I, D), or gate ‖ up (2·I, D)
    pub(crate) down: SplitMatrix,         // (D, I)
}

impl GpuWeights {
    /// Allocates (zeroed) the buffers of MLP `p` (residual width `d`), its tensors playing
    /// `part(m)` (`Part::Mlp` for a dense MLP).
    pub(crate) fn allocate(p: &Mlp, d: usize, a: &Alloc<'_>, part: impl Fn(MlpPart) -> Part) -> Result<Self> {
        let i = p.inner;
        let m = |label, shape, (weight, bias)| a.matrix(part(weight), label, shape, a.has(part(bias)));
        let (gate, up) = match p.names {
            MlpNames::Separate | MlpNames::W123 => (
                Some(m("gate_proj", (i, d), (MlpPart::Gate, MlpPart::GateBias))?),
                m("up_proj", (i, d), (MlpPart::Up, MlpPart::UpBias))?,
            ),
            MlpNames::InputOutput | MlpNames::GateUp => {
                (None, m("gate_up", (2 * i, d), (MlpPart::GateUp, MlpPart::GateUpBias))?)
            }
            MlpNames::Plain => (None, m("up_proj", (i, d), (MlpPart::Up, MlpPart::UpBias))?),
        };
        Ok(Self { gate, up, down: m("down_proj", (d, i), (MlpPart::Down, MlpPart::DownBias))? })
    }

    /// Where the rows of its tensor `m` go.
    pub(crate) fn destination(&self, m: MlpPart) -> Option<Destination<'_>> {
        Some(match m {
            MlpPart::Gate => Destination::Matrix(self.gate.as_ref()?),
            MlpPart::GateBias => Destination::Bias(self.gate.as_ref()?),
            MlpPart::Up | MlpPart::GateUp => Destination::Matrix(&self.up),
            MlpPart::UpBias | MlpPart::GateUpBias => Destination::Bias(&self.up),
            MlpPart::Down => Destination::Matrix(&self.down),
            MlpPart::DownBias => Destination::Bias(&self.down),
        })
    }

    /// Its weight matrices, in the order its matmuls run (gate, up, down).
    pub(crate) fn matrices(&self) -> Vec<&SplitMatrix> {
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
    // xz: gate ‖ up (T, 2·I); y: the activation (T, I).
    Scratch::none().with("xz", t * 2 * p.inner).with("y", t * p.inner)
}

/// How one MLP's calls run: its input `x` (T, D), where the down projection's output goes, a
/// LoRA adapter on gate ‖ up (Zamba2's), and for a routed expert of a mixture its routing.
pub(crate) struct Io<'a> {
    pub(crate) x: &'a wgpu::Buffer,
    pub(crate) out: Out<'a>,
    pub(crate) adapter: Option<&'a GpuAdapter>,
    pub(crate) routed: Option<Routed<'a>>,
}

impl<'a> Io<'a> {
    /// A dense MLP over `x` added onto the residual times `scale`.
    pub(crate) fn residual(x: &'a wgpu::Buffer, scale: f32) -> Self {
        Self { x, out: Out::Residual(scale), adapter: None, routed: None }
    }
}

/// A routed expert's share of the router's output: the chosen experts and weights (`route`,
/// (T, 2k)), its id, and where its matmuls' workgroup counts are (`args` from byte `at`, three
/// u32 per matrix part: gate, up, down in order).
pub(crate) struct Routed<'a> {
    pub(crate) route: &'a wgpu::Buffer,
    pub(crate) expert: u32,
    pub(crate) top_k: u32,
    pub(crate) args: &'a wgpu::Buffer,
    pub(crate) at: u64,
}

/// The calls of MLP `p` (weights `w`), in dispatch order.
pub(crate) fn plan(p: &Mlp, w: &GpuWeights, cx: LayerCx<'_>, io: Io<'_>) -> Result<Vec<Step>> {
    let LayerCx { b, a, .. } = cx;
    let (d, i) = (w.down.rows() as u32, p.inner as u32);
    let gated = p.gated();
    let row = if gated { 2 * i } else { i };
    let lin = |y_col| linear::LinearParams { x_stride: d, y_stride: row, y_col, ..Default::default() };
    let io_up = [("x", io.x), ("y", a.scratch("xz")?)];
    // A routed expert's matmuls take their workgroups from the router's output.
    let mut next_part = 0;
    let mut step = |linear: LinearCall| match &io.routed {
        Some(r) => {
            let at = r.at + 12 * next_part;
            next_part += linear.parts.len() as u64;
            Step::Indirect(IndirectLinear { linear, args: r.args.clone(), at })
        }
        None => Step::Linear(linear),
    };
    let mut steps = Vec::new();
    // gate at column 0, up at column I (gate ‖ up: one matrix, the gate first).
    if let Some(gate) = &w.gate {
        steps.push(step(b.linear(gate, &io_up, lin(0))?));
        steps.push(step(b.linear(&w.up, &io_up, lin(i))?));
    } else {
        steps.push(step(b.linear(&w.up, &io_up, lin(0))?));
    }
    if let Some(adapter) = io.adapter {
        steps.extend(adapter_steps(b, adapter, (io.x, a.scratch("lora")?), (a.scratch("xz")?, row, 0))?);
    }
    let (route, expert, top_k) = match &io.routed {
        Some(r) => (r.route, r.expert, r.top_k),
        None => (b.dummy, gated_act::NOT_ROUTED, 0),
    };
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
    let io_act = [("x", a.scratch("xz")?), ("route", route), ("y", a.scratch("y")?)];
    steps.push(Step::Call(b.call(cx.kernel(&specs, "gated_act")?, &act, &io_act, groups)?));
    let down = linear::LinearParams { x_stride: i, y_stride: d, ..Default::default() };
    let (y, down) = match io.out {
        Out::Residual(s) => Out::Residual(s * p.scales.1).apply(&a.h, down),
        Out::Into(buffer) => (buffer, down.scaled(p.scales.1)),
    };
    steps.push(step(b.linear(&w.down, &[("x", a.scratch("y")?), ("y", y)], down)?));
    Ok(steps)
}

/// As a block of its own, its tensors are the layer's `Part::Mlp`s.
impl GpuParts for GpuWeights {
    fn destination(&self, part: Part) -> Option<Destination<'_>> {
        match part {
            Part::Mlp(m) => GpuWeights::destination(self, m),
            _ => None,
        }
    }

    fn matrices(&self) -> Vec<&SplitMatrix> {
        GpuWeights::matrices(self)
    }
}

impl GpuKind for Mlp {
    type GpuWeights = GpuWeights;

    fn allocate(&self, d: usize, alloc: &Alloc<'_>) -> Result<GpuWeights> {
        GpuWeights::allocate(self, d, alloc, Part::Mlp)
    }

    fn kernels(&self, _kv: KvFormat) -> Vec<KernelSpec> {
        kernels()
    }

    fn scratch(&self, _d: usize, t: usize) -> Scratch {
        scratch(self, t)
    }

    fn check(&self, _ctx: &GpuContext, _kv: KvFormat) -> Result<()> {
        Ok(())
    }

    fn plan(&self, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
        plan(self, w, cx, Io::residual(&cx.a.x_norm, cx.residual))
    }
}
