//! [`Part`]: what one tensor of a block is to it — the roles the block kinds' tensors play
//! (`src/blocks/<kind>/mod.rs` lists which a kind has, with their names and shapes).

/// One matrix of a feed-forward network: a dense MLP's, a shared expert's or a routed expert's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MlpPart {
    /// `gate_proj` (I, D)
    Gate,
    /// `up_proj` (I, D)
    Up,
    /// gate ‖ up in one matrix (`input_linear`, `gate_up_proj`): (2·I, D), the gate first
    GateUp,
    /// `down_proj` / `output_linear` (D, I)
    Down,
    /// The biases of those, when the config has them (`mlp_bias`)
    GateBias,
    UpBias,
    GateUpBias,
    DownBias,
}

impl MlpPart {
    /// Whether it is a bias (a vector) rather than a matrix.
    pub(crate) fn is_bias(self) -> bool {
        matches!(self, MlpPart::GateBias | MlpPart::UpBias | MlpPart::GateUpBias | MlpPart::DownBias)
    }
}

/// One tensor of a block. Shapes are Mamba-1's; Mamba-2's (H heads, G groups, conv_dim = E·D +
/// 2·G·N) are given where they differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Part {
    /// The RMSNorm before the block (`norm.weight`, `input_layernorm.weight`...) (D)
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
    /// Jamba's RMSNorm gains on Δ's input (R), B (N) and C (N)
    DtNorm,
    BNorm,
    CNorm,
    /// Attention: `q_proj` (Hq·hd, D), `k_proj`, `v_proj` (Hkv·hd, D), `o_proj` (D, Hq·hd)
    Q,
    K,
    V,
    O,
    /// Their biases when the config has them
    QBias,
    KBias,
    VBias,
    OBias,
    /// The per-head norms' gains on q and on k (hd), where the model has them
    QNorm,
    KNorm,
    /// A dense MLP's (or a mixture's shared expert's) matrix
    Mlp(MlpPart),
    /// A mixture's router (experts, D)
    Router,
    /// Its per-expert score correction (experts): added for the choice only (Nemotron-H)
    RouterBias,
    /// One routed expert's matrix (a checkpoint that stores each expert apart)
    Expert(u16, MlpPart),
    /// Every routed expert's matrix, stacked (experts, rows, cols)
    Experts(MlpPart),
    /// Zamba2's shared block: its RMSNorm over hidden ‖ embeddings (2·D), the one before its
    /// MLP (D)
    SharedNorm,
    SharedFfNorm,
    /// Zamba2: a LoRA adapter's matrix — `which` 0..3 = q, k, v, the MLP's gate ‖ up; `stage` 0
    /// = down to the rank (r, in), 1 = back up (out, r)
    Adapter {
        which: u8,
        stage: u8,
    },
    /// Zamba2: the per-layer projection of the shared block's output (D, D)
    Linear,
    /// Gated DeltaNet: `in_proj_z`, the output gate's projection (H_v·d_v, D)
    Gate,
    /// Gated DeltaNet: `in_proj_b`, β's projection (H_v, D)
    Beta,
    /// Gated DeltaNet: `in_proj_a`, the decay's input projection (H_v, D)
    DtIn,
}

impl Part {
    /// Whether it is a weight matrix (stored in the file's dtype on the CPU, in the weight
    /// format on the GPU) rather than a small f32 vector.
    pub(crate) fn is_matrix(self) -> bool {
        matches!(
            self,
            Part::InProj
                | Part::XProj
                | Part::DtProj
                | Part::OutProj
                | Part::Q
                | Part::K
                | Part::V
                | Part::O
                | Part::Router
                | Part::Adapter { .. }
                | Part::Linear
                | Part::Gate
                | Part::Beta
                | Part::DtIn
        ) || matches!(self, Part::Mlp(m) | Part::Expert(_, m) | Part::Experts(m) if !m.is_bias())
    }
}
