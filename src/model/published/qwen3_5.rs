//! Qwen3.5's published shapes (see the module above).

/// Qwen3.5-0.8B (`Qwen/Qwen3.5-0.8B`, `qwen3_5`: the Hub's multimodal config, kept whole;
/// webmamba reads its `text_config`): 24 layers of 1024, 18 Gated DeltaNet (16 QK / 16 V heads
/// of 128, conv 4) and 6 gated attention (layers 3, 7, …, 23: 8 query / 2 KV heads of 256, RoPE
/// θ 1e7 on 64 of 256 dims), each then a SwiGLU MLP 3584 wide; vocabulary 248320, tied
/// embeddings; the text model's 320 tensors hold 752,393,024 weights. The vision tower
/// (`vision_config`, `model.visual.*`) and the MTP head (`mtp.*`) of the Hub's checkpoint are
/// not part of it, nor of a random checkpoint of this shape.
///
/// Source: its config.json as published, byte for byte (2907 bytes, git blob 715f0448), from
/// github.com/KinChow/model-structure-viewer, `models/Qwen/Qwen3.5-0.8B/config.json` (commit
/// 55f970b2): the viewer's store of Hub config.json files, `models/<org>/<model>/config.json`
/// (its `models/README.md`, `docs/model_source_resolution.md`: fetched from huggingface.co,
/// only config.json, README.md and `configuration_*.py` kept). The Hub's model card gives
/// "Number of Parameters: 0.8B"; 752,393,024 is what public code reports HF's
/// `Qwen3_5ForCausalLM` loads from the Hub's checkpoint ("320 text tensors", "752,393,024
/// parameters"; quoted in the code index, which does not name those repositories) and a LiteRT
/// conversion's card (`GabrieleConte/Qwen3.5-0.8B-LiteRT`) rounds to "752M (language)"; this
/// shape's tensors add up to it.
pub const QWEN3_5_0_8B: &str = r#"{
    "architectures": [
        "Qwen3_5ForConditionalGeneration"
    ],
    "image_token_id": 248056,
    "model_type": "qwen3_5",
    "text_config": {
        "attention_bias": false,
        "attention_dropout": 0.0,
        "attn_output_gate": true,
        "dtype": "bfloat16",
        "eos_token_id": 248044,
        "full_attention_interval": 4,
        "head_dim": 256,
        "hidden_act": "silu",
        "hidden_size": 1024,
        "initializer_range": 0.02,
        "intermediate_size": 3584,
        "layer_types": [
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention",
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention",
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention",
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention",
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention",
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention"
        ],
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 16,
        "linear_value_head_dim": 128,
        "max_position_embeddings": 262144,
        "mlp_only_layers": [],
        "model_type": "qwen3_5_text",
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": false,
        "num_attention_heads": 8,
        "num_hidden_layers": 24,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "tie_word_embeddings": true,
        "use_cache": true,
        "vocab_size": 248320,
        "mamba_ssm_dtype": "float32",
        "rope_parameters": {
            "mrope_interleaved": true,
            "mrope_section": [
                11,
                11,
                10
            ],
            "rope_type": "default",
            "rope_theta": 10000000,
            "partial_rotary_factor": 0.25
        }
    },
    "tie_word_embeddings": true,
    "transformers_version": "4.57.0.dev0",
    "video_token_id": 248057,
    "vision_config": {
        "deepstack_visual_indexes": [],
        "depth": 12,
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 768,
        "in_channels": 3,
        "initializer_range": 0.02,
        "intermediate_size": 3072,
        "model_type": "qwen3_5",
        "num_heads": 12,
        "num_position_embeddings": 2304,
        "out_hidden_size": 1024,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2
    },
    "vision_end_token_id": 248054,
    "vision_start_token_id": 248053
}"#;

/// Qwen3.5-2B (`Qwen/Qwen3.5-2B`, `qwen3_5`, as [`QWEN3_5_0_8B`]): 24 layers of 2048, 18 Gated
/// DeltaNet (16 QK / 16 V heads of 128, conv 4) and 6 gated attention (layers 3, 7, …, 23: 8
/// query / 2 KV heads of 256, RoPE θ 1e7 on 64 of 256 dims), each then a SwiGLU MLP 6144 wide;
/// vocabulary 248320, tied embeddings; the text model's 320 tensors hold 1,881,825,088 weights
/// (the vision tower and MTP head left out, as for the 0.8B).
///
/// Source: its config.json as published, byte for byte (2908 bytes, git blob d30a15be), from
/// github.com/KinChow/model-structure-viewer, `models/Qwen/Qwen3.5-2B/config.json` (commit
/// 55f970b2), as [`QWEN3_5_0_8B`]; it differs from the 0.8B's in the text model's
/// `hidden_size` and `intermediate_size` and the vision tower's sizes only. The model card gives
/// "Number of Parameters: 2B"; public code reading the Hub checkpoint's safetensors header at
/// revision 15852e8c reports 2,274,069,824 parameters in all, the text model 1,881,825,088
/// (vision 331,416,576, MTP 60,828,160), the count HF's `Qwen3_5ForCausalLM` loads (quoted in
/// the code index, which does not name those repositories); this shape's tensors add up to it.
pub const QWEN3_5_2B: &str = r#"{
    "architectures": [
        "Qwen3_5ForConditionalGeneration"
    ],
    "image_token_id": 248056,
    "model_type": "qwen3_5",
    "text_config": {
        "attention_bias": false,
        "attention_dropout": 0.0,
        "attn_output_gate": true,
        "dtype": "bfloat16",
        "eos_token_id": 248044,
        "full_attention_interval": 4,
        "head_dim": 256,
        "hidden_act": "silu",
        "hidden_size": 2048,
        "initializer_range": 0.02,
        "intermediate_size": 6144,
        "layer_types": [
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention",
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention",
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention",
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention",
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention",
            "linear_attention",
            "linear_attention",
            "linear_attention",
            "full_attention"
        ],
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 16,
        "linear_value_head_dim": 128,
        "max_position_embeddings": 262144,
        "mlp_only_layers": [],
        "model_type": "qwen3_5_text",
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": false,
        "num_attention_heads": 8,
        "num_hidden_layers": 24,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-06,
        "tie_word_embeddings": true,
        "use_cache": true,
        "vocab_size": 248320,
        "mamba_ssm_dtype": "float32",
        "rope_parameters": {
            "mrope_interleaved": true,
            "mrope_section": [
                11,
                11,
                10
            ],
            "rope_type": "default",
            "rope_theta": 10000000,
            "partial_rotary_factor": 0.25
        }
    },
    "tie_word_embeddings": true,
    "transformers_version": "4.57.0.dev0",
    "video_token_id": 248057,
    "vision_config": {
        "deepstack_visual_indexes": [],
        "depth": 24,
        "hidden_act": "gelu_pytorch_tanh",
        "hidden_size": 1024,
        "in_channels": 3,
        "initializer_range": 0.02,
        "intermediate_size": 4096,
        "model_type": "qwen3_5",
        "num_heads": 16,
        "num_position_embeddings": 2304,
        "out_hidden_size": 2048,
        "patch_size": 16,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2
    },
    "vision_end_token_id": 248054,
    "vision_start_token_id": 248053
}"#;
