//! Recording a forward chunk into a compute pass by walking the [`Plan`]: only dispatches,
//! nothing is created here, and nothing here knows a kernel — each call carries its pipeline,
//! bind group and how its workgroups follow from this chunk's sizes ([`Dims`]).

use crate::gpu_kit::call::Dims;
use crate::gpu_model::plan::Plan;

/// What `body` finishes with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Head {
    /// Nothing after the last layer (a chunk whose logits nobody needs).
    None,
    /// norm_f of row T−1 and the LM head over it: logits (1, V) (one fused call per part of
    /// the head in a fused decode step).
    Last,
    /// norm_f of every row; the LM head runs afterwards, block by block.
    AllRowsNormalised,
}

/// Records embedding → every layer → norm_f (→ LM head for `Head::Last`) for T tokens.
pub(crate) fn body(pass: &mut wgpu::ComputePass<'_>, plan: &Plan, d: Dims, head: Head) {
    for call in &plan.embedding {
        call.dispatch(pass, d);
    }
    for step in plan.layers.iter().flatten() {
        step.dispatch(pass, d);
    }
    match head {
        Head::None => {}
        Head::Last => match &plan.head_fused {
            Some(calls) if d.fused() => calls.iter().for_each(|call| call.dispatch(pass, d)),
            _ => {
                plan.norm_last.dispatch(pass, d);
                plan.head_last.dispatch(pass, 1);
            }
        },
        Head::AllRowsNormalised => plan.norm_all.dispatch(pass, d),
    }
}
