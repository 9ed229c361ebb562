//! What the GGUF architecture mappings share (`arch`, `arch_hybrid`, `arch_moe`): the renamed
//! tensor, the file's shape as the mappings read it, the metadata every hybrid reads alike, and
//! the HF leaf names of the Mamba-2 mixer, MLP and attention tensors llama.cpp names alike.

/// What a GGUF tensor becomes: its HF name and the transform undone as it loads.
pub(crate) struct Renamed {
    pub name: String,
    /// Holds A = −exp(A_log).
    pub ln_neg: bool,
    /// Rows per head of a q/k matrix whose heads' rows llama.cpp interleaved for its RoPE
    /// (`LlamaModel.permute`); 0 for any other tensor.
    pub head_rows: u32,
}

/// Layers, widths and sizes a file may announce (the header's tensors bound the real sizes).
pub(crate) const MAX_DIM: u64 = 1 << 20;

/// The key of the `config.json` `arch_hybrid::config` writes that marks its tensors as llama.cpp's: the
/// MLP's gate and up separate where HF fuses them (Granite's `input_linear`), each mixture's
/// experts stacked per projection (see `arch_hybrid::llama_cpp_tensors`).
pub(crate) const LLAMA_CPP_TENSORS: &str = "webmamba_gguf_tensors";

/// What `arch_hybrid::config` reads about a file besides its metadata.
pub(crate) struct Shape<'a> {
    pub vocab: u64,
    pub layers: u64,
    pub d_model: u64,
    pub tied: bool,
    /// Every tensor's GGUF name.
    pub names: &'a [&'a str],
}

impl Shape<'_> {
    /// Whether some layer has tensor `blk.N.<leaf>`.
    pub(crate) fn any(&self, leaf: &str) -> bool {
        self.names
            .iter()
            .any(|n| n.strip_prefix("blk.").and_then(|r| r.split_once('.')).is_some_and(|(_, l)| l == leaf))
    }
}

/// What every hybrid's config reads alike from its metadata.
pub(crate) struct Common {
    /// Layers.
    pub n: usize,
    /// Each layer's key/value heads, 0 where it has no attention.
    pub kv: Vec<u64>,
    /// The most key/value heads of a layer.
    pub kv_heads: u64,
    /// The RMSNorms' ε.
    pub eps: f64,
    /// RoPE's θ.
    pub theta: f64,
    /// Query heads.
    pub heads: u64,
}

/// The HF leaf of a Mamba-2 mixer's tensor `blk.N.<leaf>`, and whether it holds −exp(A_log).
pub(crate) fn ssm2(leaf: &str) -> Option<(&'static str, bool)> {
    Some(match leaf {
        "ssm_in.weight" => ("in_proj.weight", false),
        "ssm_in.bias" => ("in_proj.bias", false),
        "ssm_conv1d.weight" => ("conv1d.weight", false),
        "ssm_conv1d.bias" => ("conv1d.bias", false),
        "ssm_out.weight" => ("out_proj.weight", false),
        "ssm_out.bias" => ("out_proj.bias", false),
        "ssm_dt.bias" => ("dt_bias", false),
        "ssm_d" => ("D", false),
        "ssm_a" => ("A_log", true),
        "ssm_norm.weight" => ("norm.weight", false),
        _ => return None,
    })
}

/// The HF leaf of a gated or plain MLP's tensor `blk.N.<leaf>`.
pub(crate) fn mlp(leaf: &str) -> Option<&'static str> {
    Some(match leaf {
        "ffn_gate.weight" => "gate_proj.weight",
        "ffn_up.weight" => "up_proj.weight",
        "ffn_down.weight" => "down_proj.weight",
        "ffn_gate.bias" => "gate_proj.bias",
        "ffn_up.bias" => "up_proj.bias",
        "ffn_down.bias" => "down_proj.bias",
        _ => return None,
    })
}

/// The HF leaf of an attention tensor `blk.N.<leaf>` (q/k/v and their biases).
pub(crate) fn attention(leaf: &str) -> Option<&'static str> {
    Some(match leaf {
        "attn_q.weight" => "q_proj.weight",
        "attn_k.weight" => "k_proj.weight",
        "attn_v.weight" => "v_proj.weight",
        "attn_q.bias" => "q_proj.bias",
        "attn_k.bias" => "k_proj.bias",
        "attn_v.bias" => "v_proj.bias",
        _ => return None,
    })
}
