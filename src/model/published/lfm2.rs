//! LFM2's published shape (see the module above).

/// Liquid AI LFM2-1.2B (`LiquidAI/LFM2-1.2B`, `lfm2`): 16 layers of 2048, 6 of them attention
/// (layers 2, 5, 8, 10, 12, 14: 32 query / 8 KV heads of 64, per-head q/k norms, RoPE θ 1e6),
/// 10 gated short convolutions (3 taps), each then a SwiGLU MLP 8192 wide (`block_ff_dim` 12288
/// auto-adjusted: ⌊2·12288/3⌋ rounded up to a multiple of 256); vocabulary 65536, tied
/// embeddings (neither `tie_embedding` nor `tie_word_embeddings` given: HF's default, true);
/// 148 tensors of 1,170,340,608 weights.
///
/// Source: its config.json as published, byte for byte (1000 bytes, git blob b6d5f20e), from
/// github.com/fetchwiki/LiquidAI-LFM2-1.2B, `config.json` (commit 60dc8602), a mirror of
/// <https://huggingface.co/LiquidAI/LFM2-1.2B> whose `model_files.json` lists the Hub's files
/// (config.json: 1000 bytes) and reads its `model.safetensors` header: 148 BF16 tensors,
/// `total_parameters` 1170340608 — the model card's "Parameters 1,170,340,608", "16 (10 conv +
/// 6 attn)" (the mirror's README.md) — which this shape's tensors add up to, in as many tensors
/// (so the LM head is tied). The same bytes as github.com/lorinefeng/LiquidRAG,
/// `models/LiquidAI_LFM2-1.2B/config.json` (commit 8f29a6b7), downloaded from the Hub at
/// revision 8c26bd13 (its HF cache's `refs/main`). Both copies end in a newline, kept here.
pub const LFM2_1_2B: &str = r#"{
  "architectures": [
    "Lfm2ForCausalLM"
  ],
  "block_auto_adjust_ff_dim": true,
  "block_dim": 2048,
  "block_ff_dim": 12288,
  "block_ffn_dim_multiplier": 1.0,
  "block_mlp_init_scale": 1.0,
  "block_multiple_of": 256,
  "block_norm_eps": 1e-05,
  "block_out_init_scale": 1.0,
  "block_use_swiglu": true,
  "block_use_xavier_init": true,
  "bos_token_id": 1,
  "conv_L_cache": 3,
  "conv_bias": false,
  "conv_dim": 2048,
  "conv_dim_out": 2048,
  "conv_use_xavier_init": true,
  "eos_token_id": 7,
  "full_attn_idxs": [
    2,
    5,
    8,
    10,
    12,
    14
  ],
  "hidden_size": 2048,
  "initializer_range": 0.02,
  "max_position_embeddings": 128000,
  "model_type": "lfm2",
  "norm_eps": 1e-05,
  "num_attention_heads": 32,
  "num_heads": 32,
  "num_hidden_layers": 16,
  "num_key_value_heads": 8,
  "pad_token_id": 0,
  "rope_theta": 1000000.0,
  "torch_dtype": "bfloat16",
  "transformers_version": "4.54.0.dev0",
  "use_cache": true,
  "use_pos_enc": true,
  "vocab_size": 65536
}
"#;
