//! The embedded default model (www/models/shakespeare-mamba-3m), compiled into the CLI so
//! `webmamba generate --prompt …` works anywhere without `--model`.

use webmamba::{Checkpoint, Result};

macro_rules! file {
    ($name:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/www/models/shakespeare-mamba-3m/", $name))
    };
}

/// Its name, for messages.
pub const NAME: &str = "shakespeare-mamba-3m (embedded)";

/// The embedded checkpoint, parsed.
pub fn checkpoint() -> Result<Checkpoint> {
    Checkpoint::from_bytes(
        file!("config.json"),
        vec![("model.safetensors".into(), file!("model.safetensors").to_vec())],
        None,
        Some(file!("tokenizer.json").to_vec()),
    )
}
