//! The shapes of the published Mamba-1 models (state-spaces/mamba-*-hf), Mamba-2 models
//! (state-spaces/mamba2-*), Falcon-Mamba-7B and hybrids (Granite-4.0-H-1B, Falcon-H1-0.5B,
//! Zamba2-1.2B, LFM2-1.2B, Qwen3.5-0.8B and -2B: their config.json in
//! [`webmamba::model::published`], each with its source), for random models of real size:
//! `webmamba bench --shape`, `webmamba random --shape`.

use clap::ValueEnum;
use webmamba::Config;
use webmamba::model::published;

/// A published model size.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Shape {
    /// mamba-130m: d_model 768, 24 layers.
    #[value(name = "130m")]
    Mamba130m,
    /// mamba-370m: d_model 1024, 48 layers.
    #[value(name = "370m")]
    Mamba370m,
    /// mamba-790m: d_model 1536, 48 layers.
    #[value(name = "790m")]
    Mamba790m,
    /// mamba-1.4b: d_model 2048, 48 layers.
    #[value(name = "1.4b")]
    Mamba1_4b,
    /// mamba-2.8b: d_model 2560, 64 layers.
    #[value(name = "2.8b")]
    Mamba2_8b,
    /// mamba2-130m: d_model 768, 24 layers (24 heads).
    #[value(name = "mamba2-130m")]
    Ssd130m,
    /// mamba2-370m: d_model 1024, 48 layers (32 heads).
    #[value(name = "mamba2-370m")]
    Ssd370m,
    /// mamba2-780m: d_model 1536, 48 layers (48 heads).
    #[value(name = "mamba2-780m")]
    Ssd780m,
    /// mamba2-1.3b: d_model 2048, 48 layers (64 heads).
    #[value(name = "mamba2-1.3b")]
    Ssd1_3b,
    /// mamba2-2.7b: d_model 2560, 64 layers (80 heads).
    #[value(name = "mamba2-2.7b")]
    Ssd2_7b,
    /// tiiuae/falcon-mamba-7b: d_model 4096, 64 Falcon-Mamba layers, an untied LM head
    /// ([`published::FALCON_MAMBA_7B`], which cites its source).
    #[value(name = "falcon-mamba-7b")]
    FalconMamba7b,
    /// ibm-granite/granite-4.0-h-1b: d_model 1536, 40 layers (36 Mamba-2, 4 attention), a
    /// shared MLP per layer ([`published::GRANITE_4_0_H_1B`], which cites its source).
    #[value(name = "granite-h-1b")]
    GraniteH1b,
    /// tiiuae/Falcon-H1-0.5B: d_model 1024, 36 layers of attention ∥ Mamba-2, then an MLP
    /// ([`published::FALCON_H1_0_5B`], which cites its source).
    #[value(name = "falcon-h1-0.5b")]
    FalconH1_0_5b,
    /// Zyphra/Zamba2-1.2B: d_model 2048, 38 Mamba-2 layers, 6 of them using the shared
    /// attention + MLP block with LoRA adapters ([`published::ZAMBA2_1_2B`], which cites its
    /// source).
    #[value(name = "zamba2-1.2b")]
    Zamba2_1_2b,
    /// LiquidAI/LFM2-1.2B: d_model 2048, 16 layers (10 short convolutions, 6 attention), each
    /// then an MLP ([`published::LFM2_1_2B`], which cites its source).
    #[value(name = "lfm2-1.2b")]
    Lfm2_1_2b,
    /// Qwen/Qwen3.5-0.8B (its text model): d_model 1024, 24 layers (18 Gated DeltaNet, 6 gated
    /// attention), each then an MLP ([`published::QWEN3_5_0_8B`], which cites its source).
    #[value(name = "qwen3.5-0.8b")]
    Qwen3_5_0_8b,
    /// Qwen/Qwen3.5-2B (its text model): d_model 2048, 24 layers (18 Gated DeltaNet, 6 gated
    /// attention), each then an MLP ([`published::QWEN3_5_2B`], which cites its source).
    #[value(name = "qwen3.5-2b")]
    Qwen3_5_2b,
}

impl Shape {
    /// The config.json of a random model of this shape: a hybrid's published one; a Mamba
    /// model's [`Config::to_hf_json`] of its sizes. Mamba-1: d_state 16, expand 2, conv 4,
    /// vocabulary 50280, tied embeddings. Mamba-2: d_state 128, head_dim 64, 1 group, expand 2,
    /// conv 4, vocabulary 50288 (50277 padded to a multiple of 16), tied embeddings.
    pub fn config_json(self) -> String {
        let (d, layers, mamba2) = match self {
            Shape::Mamba130m => (768, 24, false),
            Shape::Mamba370m => (1024, 48, false),
            Shape::Mamba790m => (1536, 48, false),
            Shape::Mamba1_4b => (2048, 48, false),
            Shape::Mamba2_8b => (2560, 64, false),
            Shape::Ssd130m => (768, 24, true),
            Shape::Ssd370m => (1024, 48, true),
            Shape::Ssd780m => (1536, 48, true),
            Shape::Ssd1_3b => (2048, 48, true),
            Shape::Ssd2_7b => (2560, 64, true),
            Shape::FalconMamba7b => return published::FALCON_MAMBA_7B.to_string(),
            Shape::GraniteH1b => return published::GRANITE_4_0_H_1B.to_string(),
            Shape::FalconH1_0_5b => return published::FALCON_H1_0_5B.to_string(),
            Shape::Zamba2_1_2b => return published::ZAMBA2_1_2B.to_string(),
            Shape::Lfm2_1_2b => return published::LFM2_1_2B.to_string(),
            Shape::Qwen3_5_0_8b => return published::QWEN3_5_0_8B.to_string(),
            Shape::Qwen3_5_2b => return published::QWEN3_5_2B.to_string(),
        };
        let json = if mamba2 {
            format!(
                r#"{{"model_type":"mamba2","vocab_size":50288,"hidden_size":{d},"num_hidden_layers":{layers},
                    "state_size":128,"expand":2,"conv_kernel":4,"num_heads":{},"head_dim":64,"n_groups":1,
                    "tie_word_embeddings":true,"eos_token_id":0}}"#,
                2 * d / 64
            )
        } else {
            format!(
                r#"{{"model_type":"mamba","vocab_size":50280,"hidden_size":{d},"num_hidden_layers":{layers},
                    "state_size":16,"expand":2,"conv_kernel":4,"eos_token_id":0}}"#
            )
        };
        // A fixed, valid config: parsing cannot fail.
        let config =
            Config::from_json(json.as_bytes()).unwrap_or_else(|e| unreachable!("built-in config: {e}"));
        config.to_hf_json()
    }
}
