//! The shapes of the published Mamba-1 models (state-spaces/mamba-*-hf), for random models of
//! real size: `webmamba bench --shape`, `webmamba random --shape`.

use clap::ValueEnum;
use webmamba::Config;

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
}

impl Shape {
    /// The config: d_state 16, expand 2, conv 4, vocabulary 50280, tied embeddings.
    pub fn config(self) -> Config {
        let (d, layers) = match self {
            Shape::Mamba130m => (768, 24),
            Shape::Mamba370m => (1024, 48),
            Shape::Mamba790m => (1536, 48),
            Shape::Mamba1_4b => (2048, 48),
            Shape::Mamba2_8b => (2560, 64),
        };
        let json = format!(
            r#"{{"model_type":"mamba","vocab_size":50280,"hidden_size":{d},"num_hidden_layers":{layers},
                "state_size":16,"expand":2,"conv_kernel":4,"eos_token_id":0}}"#
        );
        // A fixed, valid config: parsing cannot fail.
        Config::from_json(json.as_bytes()).unwrap_or_else(|e| unreachable!("built-in config: {e}"))
    }
}
