//! A mixture of experts on the GPU: its weight buffers and the calls it records — the router's
//! matmul → moe_route (each token's k experts and weights, and each expert's indirect dispatch
//! arguments) → the shared expert, where there is one → every routed expert as an MLP whose
//! matmuls take their workgroups from moe_route (none for an expert no token chose: at a
//! decode step only the chosen experts' weights are read) and whose activation is weighted by
//! the router (0 for the tokens that did not choose it).
//!
//! The host writes, per forward chunk, the workgroups each expert matmul part needs for its T
//! (`template`); moe_route copies them to the chosen experts' arguments.

use crate::blocks::gpu_common::LayerCx;
use crate::blocks::gpu_kind::{GpuKind, GpuParts};
use crate::blocks::mlp;
use crate::blocks::moe::{Moe, Routing};
use crate::error::{Error, Result};
use crate::gpu::GpuContext;
use crate::gpu::KernelSpec;
use crate::gpu_kit::activations::Scratch;
use crate::gpu_kit::call::{Groups, Step};
use crate::gpu_kit::kv::KvFormat;
use crate::gpu_kit::pipelines::Kernels;
use crate::gpu_kit::split::{Alloc, Destination, SplitMatrix};
use crate::kernels::linear;
use crate::kernels::moe_route::{self, MoeRouteParams};
use crate::model::{MlpPart, Part};

/// A mixture's weights on the GPU, and its routing buffers.
pub(crate) struct GpuWeights {
    pub(crate) router: SplitMatrix,               // (E, D)
    pub(crate) router_bias: Option<wgpu::Buffer>, // (E) Nemotron-H's score correction
    pub(crate) experts: Vec<mlp::gpu::GpuWeights>,
    pub(crate) shared: Option<mlp::gpu::GpuWeights>,
    /// (P, 3) u32: the workgroups of each of an expert's matmul parts for this chunk's T.
    pub(crate) template: wgpu::Buffer,
    /// (E, P, 3) u32: each expert's indirect dispatch arguments (moe_route writes them).
    pub(crate) args: wgpu::Buffer,
}

impl GpuWeights {
    /// Allocates (zeroed) the buffers of mixture `p` (residual width `d`).
    pub(crate) fn allocate(p: &Moe, d: usize, a: &Alloc<'_>) -> Result<Self> {
        let e = p.n_experts;
        let experts = (0..e)
            .map(|x| mlp::gpu::GpuWeights::allocate(&p.expert, d, a, |m| Part::Expert(x as u16, m)))
            .collect::<Result<Vec<_>>>()?;
        let parts = parts_per_expert(&experts);
        let usage = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        let template = a.ctx.create_buffer("moe template", (12 * parts.max(1)) as u64, usage);
        let args = a.ctx.create_buffer(
            "moe dispatch arguments",
            (12 * e * parts.max(1)) as u64,
            usage | wgpu::BufferUsages::INDIRECT | wgpu::BufferUsages::COPY_SRC,
        );
        Ok(Self {
            router: a.matrix(Part::Router, "router", (e, d), false)?,
            router_bias: a.has(Part::RouterBias).then(|| a.vector("router bias", e)).transpose()?,
            experts,
            shared: p
                .shared
                .as_ref()
                .map(|s| mlp::gpu::GpuWeights::allocate(s, d, a, Part::Mlp))
                .transpose()?,
            template,
            args,
        })
    }

    /// Matmul parts per expert (P).
    pub(crate) fn parts(&self) -> usize {
        parts_per_expert(&self.experts)
    }

    /// Writes the workgroups of an expert's matmul parts for a chunk of `t` tokens (with the
    /// GEMV or GEMM `kernels` pick for that many rows).
    pub(crate) fn write_template(&self, queue: &wgpu::Queue, kernels: &Kernels, t: u32) -> Result<()> {
        let Some(expert) = self.experts.first() else { return Ok(()) };
        let mut groups = Vec::new();
        for m in expert.matrices() {
            let weight_kernels = kernels.for_format(m.format)?;
            for part in &m.parts {
                let n_out = part.rows as u32;
                let g = if t <= linear::GEMV_MAX_ROWS {
                    (weight_kernels.gemv_groups)(t, n_out)
                } else {
                    (weight_kernels.gemm_groups)(t, n_out)
                };
                groups.extend([g.0, g.1, g.2]);
            }
        }
        queue.write_buffer(&self.template, 0, bytemuck::cast_slice(&groups));
        Ok(())
    }
}

impl GpuParts for GpuWeights {
    /// Where the rows of its tensor `part` go.
    fn destination(&self, part: Part) -> Option<Destination<'_>> {
        match part {
            Part::Router => Some(Destination::Matrix(&self.router)),
            Part::RouterBias => {
                Some(Destination::Vector { buffer: self.router_bias.as_ref()?, at: 0, neg_exp: false })
            }
            Part::Expert(x, m) => self.experts.get(x as usize)?.destination(m),
            // A stacked tensor's rows: each expert's matrix of that part in turn.
            Part::Experts(MlpPart::Gate) => Some(Destination::Stacked(
                self.experts.iter().map(|x| x.gate.as_ref()).collect::<Option<_>>()?,
            )),
            Part::Experts(MlpPart::Up | MlpPart::GateUp) => {
                Some(Destination::Stacked(self.experts.iter().map(|x| &x.up).collect()))
            }
            Part::Experts(MlpPart::Down) => {
                Some(Destination::Stacked(self.experts.iter().map(|x| &x.down).collect()))
            }
            Part::Mlp(m) => self.shared.as_ref()?.destination(m),
            _ => None,
        }
    }

    /// Its weight matrices.
    fn matrices(&self) -> Vec<&SplitMatrix> {
        let mlps = self.experts.iter().chain(&self.shared).flat_map(mlp::gpu::GpuWeights::matrices);
        std::iter::once(&self.router).chain(mlps).collect()
    }

    /// Its f32 vector buffers.
    fn vectors(&self) -> Vec<&wgpu::Buffer> {
        self.router_bias.iter().collect()
    }
}

/// Matmul parts of one expert (all experts are split alike): the indirect dispatches each
/// expert has, P.
fn parts_per_expert(experts: &[mlp::gpu::GpuWeights]) -> usize {
    experts.first().map_or(0, |x| x.matrices().iter().map(|m| m.parts.len()).sum())
}

/// The kernels it dispatches beyond the matmuls.
pub(crate) fn kernels() -> Vec<KernelSpec> {
    let route = KernelSpec {
        name: "moe_route",
        source: moe_route::SOURCE,
        bindings: moe_route::BINDINGS,
        constants: Vec::new(),
    };
    [vec![route], mlp::gpu::kernels()].concat()
}

/// Its share of the scratch buffers for `t` tokens: the widest MLP's, the router's logits
/// (T, E) and its choices (T, 2k).
pub(crate) fn scratch(p: &Moe, t: usize) -> Scratch {
    let widest = p.shared.iter().map(|s| s.inner).chain([p.expert.inner]).max().unwrap_or(1);
    // xz, y: an expert's (or shared expert's) MLP's; router: the router logits (T, E);
    // route: the choices, ids (u32 bits) ‖ weights (T, 2k).
    Scratch::none()
        .with("xz", t * 2 * widest)
        .with("y", t * widest)
        .with("router", t * p.n_experts)
        .with("route", t * 2 * p.top_k)
}

/// Fails unless the kernels can run it: at most `GROUPS_MAX` expert groups; no bias on a
/// routed expert's down projection (its activation carries the routing weight, so the down
/// projection's output would be weighted but not its bias).
pub(crate) fn check(p: &Moe) -> Result<()> {
    if let Routing::Sigmoid { n_group, .. } = p.routing
        && n_group as u32 > moe_route::GROUPS_MAX
    {
        return Err(Error::UnsupportedModel(format!(
            "n_group {n_group}: the GPU router takes at most {} expert groups",
            moe_route::GROUPS_MAX
        )));
    }
    if p.expert.bias {
        return Err(Error::UnsupportedModel("routed experts with biases on the GPU backend".into()));
    }
    Ok(())
}

/// The calls of mixture `p` (weights `w`), in dispatch order.
pub(crate) fn plan(p: &Moe, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
    let LayerCx { b, a, residual, .. } = cx;
    let (d, e) = (w.router.cols as u32, p.n_experts as u32);
    let logits = linear::LinearParams { x_stride: d, y_stride: e, ..Default::default() };
    let mut steps =
        vec![Step::Linear(b.linear(&w.router, &[("x", &a.x_norm), ("y", a.scratch("router")?)], logits)?)];
    let parts = w.parts();
    let params = MoeRouteParams::new(p.routing, (p.n_experts, p.top_k), parts, w.router_bias.is_some());
    let io = [
        ("logits", a.scratch("router")?),
        ("bias", w.router_bias.as_ref().unwrap_or(b.dummy)),
        ("workgroups", &w.template),
        ("route", a.scratch("route")?),
        ("args", &w.args),
    ];
    let specs = kernels();
    steps.push(Step::Call(b.call(cx.kernel(&specs, "moe_route")?, &params, &io, Groups::Fixed(1, 1, 1))?));
    if let (Some(sp), Some(sw)) = (&p.shared, &w.shared) {
        steps.extend(mlp::gpu::plan(sp, sw, cx, mlp::gpu::Io::residual(&a.x_norm, residual))?);
    }
    for (x, expert) in w.experts.iter().enumerate() {
        let routed = mlp::gpu::Routed {
            route: a.scratch("route")?,
            expert: x as u32,
            top_k: p.top_k as u32,
            args: &w.args,
            at: (12 * x * parts) as u64,
        };
        let io = mlp::gpu::Io { routed: Some(routed), ..mlp::gpu::Io::residual(&a.x_norm, residual) };
        steps.extend(mlp::gpu::plan(&p.expert, expert, cx, io)?);
    }
    Ok(steps)
}

impl GpuKind for Moe {
    type GpuWeights = GpuWeights;

    fn allocate(&self, d: usize, alloc: &Alloc<'_>) -> Result<GpuWeights> {
        GpuWeights::allocate(self, d, alloc)
    }

    fn kernels(&self, _kv: KvFormat) -> Vec<KernelSpec> {
        kernels()
    }

    fn scratch(&self, _d: usize, t: usize) -> Scratch {
        scratch(self, t)
    }

    fn check(&self, _ctx: &GpuContext, _kv: KvFormat) -> Result<()> {
        check(self)
    }

    fn plan(&self, w: &GpuWeights, cx: LayerCx<'_>) -> Result<Vec<Step>> {
        plan(self, w, cx)
    }

    /// The experts' dispatch template for the chunk's T.
    fn before_chunk(w: &GpuWeights, queue: &wgpu::Queue, k: &Kernels, t: u32) -> Result<()> {
        w.write_template(queue, k, t)
    }

    /// Three workgroup counts per matmul part of each expert.
    fn expert_dispatches(w: &GpuWeights) -> Option<(&wgpu::Buffer, usize)> {
        Some((&w.args, 3 * w.parts().max(1)))
    }
}
