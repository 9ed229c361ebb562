//! [`Part`]: what one tensor of a block is to it — the roles the block kinds' tensors play
//! (`src/blocks/<kind>/mod.rs` lists which a kind has, with their names and shapes).

/// One tensor of a Mamba block (`backbone.layers.N.…`). Shapes are Mamba-1's; Mamba-2's
/// (H heads, G groups, conv_dim = E·D + 2·G·N) are given where they differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// `norm.weight` (D)
    Norm,
    /// `mixer.in_proj.weight` (2·E·D, D); Mamba-2 (E·D + conv_dim + H, D)
    InProj,
    /// `mixer.in_proj.bias` (2·E·D); Mamba-2 (E·D + conv_dim + H)
    InProjBias,
    /// `mixer.conv1d.weight` (E·D, 1, K); Mamba-2 (conv_dim, 1, K)
    Conv,
    /// `mixer.conv1d.bias` (E·D); Mamba-2 (conv_dim)
    ConvBias,
    /// `mixer.x_proj.weight` (R + 2N, E·D)
    XProj,
    /// `mixer.dt_proj.weight` (E·D, R)
    DtProj,
    /// `mixer.dt_proj.bias` (E·D)
    DtProjBias,
    /// `mixer.A_log` (E·D, N); Mamba-2 (H)
    ALog,
    /// `mixer.D` (E·D); Mamba-2 (H)
    D,
    /// Mamba-2: `mixer.dt_bias` (H)
    DtBias,
    /// Mamba-2: `mixer.norm.weight`, the gated RMSNorm's gain (E·D)
    GatedNorm,
    /// `mixer.out_proj.weight` (D, E·D)
    OutProj,
    /// `mixer.out_proj.bias` (D)
    OutProjBias,
}
