//! What a [`Config`] is written as: the Hugging Face `config.json` that parses back to it
//! ([`Config::to_hf_json`]) and the text its model's fingerprint hashes ([`Config::identity`]).

use crate::blocks::{BlockKind, Mamba1};
use crate::model::config::{Arch, Config};

impl Config {
    /// The first Mamba block's kind, if any.
    fn first_mamba(&self) -> Option<&BlockKind> {
        self.blocks.iter().map(|b| &b.kind).find(|k| k.is_mamba())
    }

    /// The fields HF's Mamba-family configs share, from the first block (every block of
    /// today's models is the same), as a Mamba-1 block has them.
    fn base(&self) -> Mamba1 {
        let none = Mamba1 {
            d_inner: 0,
            d_state: 0,
            d_conv: 0,
            dt_rank: 0,
            use_bias: false,
            use_conv_bias: false,
            dbc_norm_eps: None,
            dbc_gains: false,
        };
        match self.first_mamba() {
            Some(BlockKind::Mamba1(b)) => b.clone(),
            Some(BlockKind::Mamba2(b)) => Mamba1 {
                d_inner: b.d_inner,
                d_state: b.d_state,
                d_conv: b.d_conv,
                dt_rank: b.unused.0,
                use_bias: b.use_bias,
                use_conv_bias: b.use_conv_bias,
                dbc_norm_eps: None,
                dbc_gains: false,
            },
            _ => none,
        }
    }

    /// This config as a Hugging Face `config.json` (`MambaForCausalLM`,
    /// `FalconMambaForCausalLM` or `Mamba2ForCausalLM`) that parses back to it.
    pub fn to_hf_json(&self) -> String {
        let b = self.base();
        // `intermediate_size` carries the width (HF and `from_json` take it over expand), and
        // HF 5.24's strict `MambaConfig` wants an integer `expand`: 2, not 2.0 (which it
        // rejects: our random checkpoints did not load in HF before this). So expand is the
        // quotient when it is whole, else the nearest whole number at least 1.
        let expand = (b.d_inner as f64 / self.d_model.max(1) as f64).round().max(1.0) as u64;
        // The f32 epsilon as the decimal it was written as (1e-5, not 9.999999747378752e-6).
        let decimal = |x: f32| x.to_string().parse::<f64>().unwrap_or(f64::from(x));
        let mut json = serde_json::json!({
            "architectures": [self.arch.hf_class()],
            "model_type": self.arch.name(),
            "vocab_size": self.vocab_size,
            "hidden_size": self.d_model,
            "num_hidden_layers": self.n_layer(),
            "intermediate_size": b.d_inner,
            "expand": expand,
            "state_size": b.d_state,
            "conv_kernel": b.d_conv,
            "time_step_rank": b.dt_rank,
            "use_bias": b.use_bias,
            "use_conv_bias": b.use_conv_bias,
            "layer_norm_epsilon": decimal(self.norm_eps),
            "tie_word_embeddings": self.tie_embeddings,
            "eos_token_id": self.eos_token_id,
        });
        match self.first_mamba() {
            Some(BlockKind::Mamba1(m)) => {
                if let Some(eps) = m.dbc_norm_eps {
                    json["mixer_rms_eps"] = decimal(eps).into();
                }
            }
            Some(BlockKind::Mamba2(m)) => {
                // HF's Mamba2 width is expand × hidden_size (no intermediate_size field).
                json["num_heads"] = m.n_heads.into();
                json["head_dim"] = m.head_dim.into();
                json["n_groups"] = m.n_groups.into();
                json["chunk_size"] = m.chunk_size.into();
                let (lo, hi) = m.time_step_limit;
                if lo != 0.0 || hi.is_finite() {
                    json["time_step_limit"] = serde_json::json!([decimal(lo), decimal(hi)]);
                }
            }
            _ => {}
        }
        json.to_string()
    }

    /// The text of this config that a model's fingerprint hashes (so exported states name
    /// their model). For Mamba-1 it is exactly what `{:?}` printed before `arch` and
    /// `mixer_rms_eps` existed, so states exported by earlier builds still import; other
    /// architectures append both (and Mamba-2 its head layout and Δ clamp).
    pub fn identity(&self) -> String {
        let b = self.base();
        let base = format!(
            "Config {{ d_model: {:?}, n_layer: {:?}, d_inner: {:?}, d_state: {:?}, d_conv: {:?}, \
             dt_rank: {:?}, vocab_size: {:?}, use_bias: {:?}, use_conv_bias: {:?}, norm_eps: {:?}, \
             tie_embeddings: {:?}, eos_token_id: {:?}",
            self.d_model,
            self.n_layer(),
            b.d_inner,
            b.d_state,
            b.d_conv,
            b.dt_rank,
            self.vocab_size,
            b.use_bias,
            b.use_conv_bias,
            self.norm_eps,
            self.tie_embeddings,
            self.eos_token_id,
        );
        let arch = self.arch.name();
        if !self.arch.is_pure_mamba() {
            return format!("{self:?}");
        }
        let Some(first) = self.first_mamba() else { return format!("{self:?}") };
        match (first, self.arch) {
            (BlockKind::Mamba1(m), Arch::FalconMamba) => {
                let eps = m.dbc_norm_eps.unwrap_or_default();
                format!("{base}, arch: {arch:?}, mixer_rms_eps: {eps:?} }}")
            }
            (BlockKind::Mamba1(_), _) => format!("{base} }}"),
            (BlockKind::Mamba2(m), _) => format!(
                "{base}, arch: {arch:?}, mixer_rms_eps: {:?}, n_heads: {:?}, head_dim: {:?}, n_groups: {:?}, \
                 time_step_limit: {:?} }}",
                m.unused.1, m.n_heads, m.head_dim, m.n_groups, m.time_step_limit,
            ),
            _ => format!("{self:?}"),
        }
    }
}
