//! The `config.json` of published hybrid models, for seeded random checkpoints of their real
//! shape (`webmamba random --shape`, `webmamba bench --shape`): the fields that decide the
//! shape, spelled as on the Hub (the legacy layer names "mamba"/"attention"), so that
//! [`crate::Config::from_json`] reads them as it reads the published file. No published file
//! could be read from here (no network); each constant names where its values come from. A
//! field no source gave is left out, so HF's default applies — those fields (multipliers,
//! ε, token ids) change the arithmetic, never a tensor's name or shape. Where a public copy of
//! the Hub's file itself was found (LFM2-1.2B, Qwen3.5-0.8B and -2B), the constant is that file
//! byte for byte, every field kept.

mod hybrids;
mod lfm2;
mod qwen3_5;

pub use hybrids::{FALCON_H1_0_5B, FALCON_MAMBA_7B, GRANITE_4_0_H_1B, ZAMBA2_1_2B};
pub use lfm2::LFM2_1_2B;
pub use qwen3_5::{QWEN3_5_0_8B, QWEN3_5_2B};
