//! Falcon-Mamba-7B and the Mamba-2 hybrids' published shapes (see the module above).

/// TII Falcon-Mamba-7B (`tiiuae/falcon-mamba-7b`, `falcon_mamba`): 64 Mamba-1 layers of 4096
/// (intermediate 8192, state 16, Δ rank 256), vocabulary 65024, an untied LM head: tensors of
/// 7,272,665,088 weights (the model card's "7.27B"). Its config.json as published, copied from
/// github.com/danielgonzagat/penin-monorepo, `SYSTEM/opt/llm_base/falcon-mamba-7b/config.json`
/// (commit 9c1f8da3), a copy of <https://huggingface.co/tiiuae/falcon-mamba-7b/blob/main/config.json>
/// (`_name_or_path` and `transformers_version` left out). Its `expand` (16) is not the width:
/// `intermediate_size` is, as in HF.
pub const FALCON_MAMBA_7B: &str = r#"{
  "architectures": ["FalconMambaForCausalLM"],
  "bos_token_id": 0,
  "conv_kernel": 4,
  "eos_token_id": 11,
  "expand": 16,
  "hidden_act": "silu",
  "hidden_size": 4096,
  "initializer_range": 0.1,
  "intermediate_size": 8192,
  "layer_norm_epsilon": 1e-05,
  "model_type": "falcon_mamba",
  "num_hidden_layers": 64,
  "pad_token_id": 11,
  "rescale_prenorm_residual": false,
  "residual_in_fp32": true,
  "state_size": 16,
  "tie_word_embeddings": false,
  "time_step_floor": 0.0001,
  "time_step_init_scheme": "random",
  "time_step_max": 0.1,
  "time_step_min": 0.001,
  "time_step_rank": 256,
  "time_step_scale": 1.0,
  "torch_dtype": "bfloat16",
  "use_bias": false,
  "use_cache": true,
  "use_conv_bias": true,
  "vocab_size": 65024
}"#;

/// IBM Granite-4.0-H-1B (`ibm-granite/granite-4.0-h-1b`, `granitemoehybrid`): 40 layers of
/// 1536, 4 of them attention (12 query / 4 KV heads; layers 5, 15, 25, 35), 36 Mamba-2 (48
/// heads of 64, state 128, 1 group), no experts: one 4096-wide shared MLP per layer; vocabulary
/// 100352, tied embeddings; 1,461,538,368 weights.
///
/// Source: github.com/gkarfakis19/Rapid-LLM, `configs/model-config/granite_4_0_h_1b_inf.yaml`
/// (commit 9662d9c8), "dims verified 2026-08-23 against the published HuggingFace config.json"
/// (<https://huggingface.co/ibm-granite/granite-4.0-h-1b/blob/main/config.json>), with its
/// `published_total_params: 1461538368` (the HF safetensors total), which this shape's tensors
/// add up to. Not given there, so left to HF's defaults: `embedding_multiplier`,
/// `residual_multiplier`, `attention_multiplier`, `logits_scaling`, `rms_norm_eps`,
/// `position_embedding_type` (absent: no RoPE, as the Hub's Granite-4.0-H attention),
/// `max_position_embeddings`, the token ids.
pub const GRANITE_4_0_H_1B: &str = r#"{
  "architectures": ["GraniteMoeHybridForCausalLM"],
  "model_type": "granitemoehybrid",
  "hidden_size": 1536,
  "num_hidden_layers": 40,
  "num_attention_heads": 12,
  "num_key_value_heads": 4,
  "intermediate_size": 4096,
  "shared_intermediate_size": 4096,
  "num_local_experts": 0,
  "num_experts_per_tok": 0,
  "mamba_d_state": 128,
  "mamba_n_groups": 1,
  "mamba_n_heads": 48,
  "mamba_d_head": 64,
  "mamba_expand": 2,
  "mamba_d_conv": 4,
  "mamba_chunk_size": 256,
  "layer_types": [
    "mamba", "mamba", "mamba", "mamba", "mamba", "attention", "mamba", "mamba", "mamba", "mamba",
    "mamba", "mamba", "mamba", "mamba", "mamba", "attention", "mamba", "mamba", "mamba", "mamba",
    "mamba", "mamba", "mamba", "mamba", "mamba", "attention", "mamba", "mamba", "mamba", "mamba",
    "mamba", "mamba", "mamba", "mamba", "mamba", "attention", "mamba", "mamba", "mamba", "mamba"
  ],
  "tie_word_embeddings": true,
  "vocab_size": 100352
}"#;

/// TII Falcon-H1-0.5B (`tiiuae/Falcon-H1-0.5B-Instruct`, `falcon_h1`): 36 layers of 1024, each
/// attention (8 query / 2 KV heads of 64, RoPE θ 1e11) beside Mamba-2 (24 heads of 64 = 1536,
/// state 128, 1 group), then a 2048-wide gated MLP; every µP multiplier; vocabulary 32784,
/// untied LM head.
///
/// Source: github.com/NVIDIA-NeMo/Megatron-Bridge,
/// `tests/unit_tests/models/falcon_h1/test_falcon_h1_bridge.py` (commit acc8ca4b),
/// `FALCON_H1_500M_CONFIG`, copied field for field (Python's `None`/`True`/`False` as JSON).
/// It leaves out `mamba_d_ssm`, which the same test checks is `mamba_n_heads × mamba_d_head`
/// (24 × 64 = 1536), as HF's table of Falcon-H1 sizes has it for the 0.5B (huggingface/
/// transformers, `docs/source/en/model_doc/falcon_h1.md`: depth 36, dim 1024, 8 / 2 heads, 24
/// Mamba heads, d_head 64 / 64, d_state 128); without it HF's default (1024) would apply, so it
/// is written here. Not given: `eos_token_id` and the other token ids.
pub const FALCON_H1_0_5B: &str = r#"{
  "architectures": ["FalconH1ForCausalLM"],
  "attention_bias": false,
  "attention_dropout": 0.0,
  "attention_in_multiplier": 1.0,
  "attention_out_multiplier": 0.9375,
  "attn_layer_indices": null,
  "embedding_multiplier": 5.656854249492381,
  "head_dim": 64,
  "hidden_act": "silu",
  "hidden_size": 1024,
  "initializer_range": 0.02,
  "intermediate_size": 2048,
  "key_multiplier": 0.39062499999999994,
  "lm_head_multiplier": 0.0390625,
  "mamba_chunk_size": 128,
  "mamba_conv_bias": true,
  "mamba_d_conv": 4,
  "mamba_d_head": 64,
  "mamba_d_ssm": 1536,
  "mamba_d_state": 128,
  "mamba_expand": 2,
  "mamba_n_groups": 1,
  "mamba_n_heads": 24,
  "mamba_norm_before_gate": false,
  "mamba_proj_bias": false,
  "mamba_rms_norm": false,
  "mamba_use_mlp": true,
  "max_position_embeddings": 16384,
  "mlp_bias": false,
  "mlp_multipliers": [0.8838834764831844, 0.5859375],
  "model_type": "falcon_h1",
  "num_attention_heads": 8,
  "num_hidden_layers": 36,
  "num_key_value_heads": 2,
  "projectors_bias": false,
  "rms_norm_eps": 1e-5,
  "rope_scaling": null,
  "rope_theta": 100000000000.0,
  "ssm_in_multiplier": 1.25,
  "ssm_multipliers": [0.3535533905932738, 0.25, 0.3535533905932738, 0.5, 0.3535533905932738],
  "ssm_out_multiplier": 0.23570226039551587,
  "tie_word_embeddings": false,
  "torch_dtype": "bfloat16",
  "vocab_size": 32784
}"#;

/// Zyphra Zamba2-1.2B (`Zyphra/Zamba2-1.2B`, `zamba2`): 38 Mamba-2 layers of 2048 (64 heads of
/// 64, state 128, 1 group, chunk 256), 6 of them (5, 11, …, 35) first applying the one shared
/// transformer block (input hidden ‖ embeddings = 4096 wide; 32 heads of 128, no GQA, RoPE
/// θ 10000; an 8192-wide GELU-gated MLP) with rank-128 LoRA adapters on q/k/v and on the MLP's
/// gate/up per use; vocabulary 32000, tied embeddings; 1,215,064,704 weights in 406 tensors.
///
/// Source: HF `Zyphra/Zamba2-1.2B` config.json at revision
/// 6b05bf29d1bb4ca71a36d12f7da4d3120dcde7fe (sha256 025b74b13fef…), as a public trace of HF's
/// modeling code run on that file reports it (github: a Korean-language "review packet —
/// Zyphra/Zamba2-1.2B", transformers 5.14.1 on the meta device): its symbol table (L 38,
/// d_model 2048, n_h = n_kv 32, d_head 128, d_ff 8192, V 32000, ctx 4096, d_state 128, 1 group,
/// 64 SSM heads of 64, chunk 256, d_conv 4, 1 memory block, LoRA rank 128, d_attn 4096, the
/// layer schedule), its traced ops (q/k/v adapters present, so `use_shared_attention_adapter`
/// is true; RoPE applied, so `use_mem_rope`; the MLP's activation is `gelu`), and its counts:
/// "1.22B total", "all 406 params covered" — HF 5.24 builds exactly 406 parameters,
/// 1,215,064,704 weights, from this JSON (370 and 1.196B without the attention adapters). Not
/// given there, so left to HF's defaults: `rms_norm_eps`, the time-step limits, the token ids.
pub const ZAMBA2_1_2B: &str = r#"{
  "architectures": ["Zamba2ForCausalLM"],
  "model_type": "zamba2",
  "hidden_size": 2048,
  "num_hidden_layers": 38,
  "layers_block_type": [
    "mamba", "mamba", "mamba", "mamba", "mamba", "hybrid", "mamba", "mamba", "mamba", "mamba",
    "mamba", "hybrid", "mamba", "mamba", "mamba", "mamba", "mamba", "hybrid", "mamba", "mamba",
    "mamba", "mamba", "mamba", "hybrid", "mamba", "mamba", "mamba", "mamba", "mamba", "hybrid",
    "mamba", "mamba", "mamba", "mamba", "mamba", "hybrid", "mamba", "mamba"
  ],
  "num_attention_heads": 32,
  "num_key_value_heads": 32,
  "intermediate_size": 8192,
  "hidden_act": "gelu",
  "num_mem_blocks": 1,
  "use_shared_attention_adapter": true,
  "adapter_rank": 128,
  "use_mem_rope": true,
  "rope_theta": 10000.0,
  "max_position_embeddings": 4096,
  "mamba_d_state": 128,
  "mamba_d_conv": 4,
  "mamba_expand": 2,
  "mamba_ngroups": 1,
  "mamba_headdim": 64,
  "n_mamba_heads": 64,
  "chunk_size": 256,
  "tie_word_embeddings": true,
  "vocab_size": 32000
}"#;
