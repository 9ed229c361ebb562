//! The model as data: hyper-parameters ([`Config`]: the shared parts and one block kind per
//! layer, see [`crate::blocks`]), checkpoint files ([`Checkpoint`]), safetensors headers
//! ([`FileHeader`]), what each tensor is to the model ([`Layout`]), the weights in memory
//! ([`ModelWeights`], matrices as stored: [`Matrix`]) and the state ([`StateLayout`], [`State`]).
//!
//! # Glossary (code name ↔ paper symbol, Gu & Dao 2023, Algorithm 2)
//! | code | symbol | meaning |
//! |---|---|---|
//! | `d_model` | D | width of the residual stream |
//! | `d_inner` | E·D | width inside a block (E = `expand`, usually 2) |
//! | `d_state` | N | SSM state size per channel |
//! | `d_conv` | K | causal depthwise conv1d width |
//! | `dt_rank` | R | rank of the Δ projection |
//! | `vocab_size` | V | vocabulary (rows of the embedding) |
//! | `T` | L | number of tokens in a call |
//! | `xs` | x | the conv input: first half of `in_proj` |
//! | `z` | z | the gate: second half of `in_proj` |
//! | `u` | x (after conv) | `silu(conv1d(xs))`, the SSM input |
//! | `delta` | Δ | `softplus(dt_proj(x_proj(u)[..R]))`, per channel step size |
//! | `b`, `c` | B, C | input and output projections of the SSM, per token (N each) |
//! | `a` | A | `−exp(A_log)`, (E·D, N), diagonal state matrix per channel |
//! | `d` | D (skip) | per-channel skip weight (not the width D) |
//! | `ssm` | h | SSM state (E·D, N): h_t = exp(Δ_t A) ⊙ h_{t−1} + Δ_t B_t x_t |
//! | `conv` | — | the last K−1 conv inputs, the conv1d's carried window |
//! | `mixer_rms_eps` | — | Falcon-Mamba only: ε of the weightless RMSNorms applied to δ (the R inputs of `dt_proj`), B and C of every token right after `x_proj` |
//!
//! Mamba-2 (Dao & Gu 2024, "Transformers are SSMs": SSD) changes the mixer, not the block:
//! | code | symbol | meaning |
//! |---|---|---|
//! | `n_heads` | H | heads; each has one A, D, Δ bias, and one Δ per token |
//! | `head_dim` | P | channels per head: H·P = E·D |
//! | `n_groups` | G | groups of heads sharing one B and one C per token (N each); also the gated norm's groups |
//! | `conv_dim()` | — | E·D + 2·G·N: the conv runs over x ‖ B ‖ C (and its window is that wide; [`crate::blocks::Mamba2::conv_dim`]) |
//! | `in_proj_dim()` | — | E·D + conv_dim + H: `in_proj` gives z ‖ x ‖ B ‖ C ‖ δ |
//! | `a` | A | `−exp(A_log)`, (H): a scalar per head (Mamba-1: a matrix per channel) |
//! | `delta` | Δ | `clamp(softplus(δ + dt_bias), time_step_limit)`, (T, H) |
//! | `ssm` | h | (H, P, N): h_t = exp(Δ_t A) h_{t−1} + Δ_t x_t ⊗ B_t, y_t = h_t C_t + D x_t |
//! | `gated_norm` | — | `mixer.norm`: y·silu(z), then RMSNorm per group of E·D/G channels, times the gain |
//! | `chunk_size` | Q | HF's SSD chunk; the math does not depend on it (our kernels choose their own) |
//!
//! The checkpoint cache (`src/cache/`, ARCHITECTURE.md):
//! | code | symbol | meaning |
//! |---|---|---|
//! | `block_size` | B | tokens per block: block checkpoints sit at multiples of B, a page holds B positions |
//! | checkpoint (`Entry`) | — | a state kept at position p: a block's (p = b·B) or a prompt-end's (any p, with its logits) |
//! | chain key (`keys::chain`) | — | blake3 over the previous key and one block's tokens: names a prefix, its block checkpoint and its page |
//! | page (`cache::pages`) | — | a hybrid's keys and values of every attention layer for one block, made once, shared by reference |
//! | tail | — | a hybrid checkpoint's rows B·⌊p/B⌋..p (its partial last block), copied into its slot |
//! | slot | — | engine storage for one checkpoint's state (and tail); pages live in page slots |

mod checkpoint;
mod config;
mod config_fields;
mod config_formats;
mod config_json;
mod config_out;
pub(crate) mod context;
mod header;
mod hybrid;
mod layout;
mod logits;
pub(crate) mod matrix;
mod part;
pub mod published;
mod random;
pub(crate) mod state;
pub(crate) mod state_layout;
mod weights;

pub use checkpoint::Checkpoint;
pub use config::{Arch, Config, Names, Scales};
#[cfg(any(target_arch = "wasm32", test))]
pub(crate) use header::check_file_name;
pub use header::{FileHeader, Stored, TensorEntry, parse_index, shard_names};
pub use layout::{Layout, Planned, Role, tensor_sizes};
pub use logits::Logits;
pub use matrix::{Matrix, MatrixData};
pub(crate) use part::{MlpPart, Part};
#[cfg(not(target_arch = "wasm32"))]
pub use random::{Values, write_random_checkpoint, write_random_checkpoint_json};
pub use state::{LayerState, State};
pub(crate) use state_layout::{Extent, StateLayout};
pub use weights::{LayerWeights, ModelWeights};
