//! Falcon-H1 on the GPU beyond its two HF fixtures (`tests/hybrids.rs`): seeded random models of
//! each Mamba-2 variant — the gated norm after the gate (with in_proj and out_proj biases under
//! the segment multipliers), before it (two groups), or absent — against the CPU reference at
//! every position, across scan chunks, forward chunks and decode steps; and an input multiplier
//! on a projection with a bias, which the GPU refuses (it folds into projections without one).

mod common;

use common::{assert_close, gpu, log};
use webmamba::{Checkpoint, CpuModel, GpuModel, GpuModelOptions, Logits, State, WeightFormat};

/// A small Falcon-H1 config.json: every multiplier ≠ 1, with `extra` fields (the variant) added.
fn config(extra: &str) -> String {
    format!(
        r#"{{"model_type":"falcon_h1","vocab_size":64,"hidden_size":32,"num_hidden_layers":2,
            "num_attention_heads":4,"num_key_value_heads":2,"head_dim":8,"intermediate_size":48,
            "mamba_d_ssm":64,"mamba_n_heads":8,"mamba_d_head":8,"mamba_d_state":8,"mamba_d_conv":4,
            "embedding_multiplier":1.3,"lm_head_multiplier":0.8,"key_multiplier":0.7,
            "attention_out_multiplier":1.2,"ssm_out_multiplier":0.9,"mlp_multipliers":[1.1,0.85],
            "ssm_multipliers":[1.2,0.9,1.3,0.75,1.1],{extra}}}"#
    )
}

/// The variants: (name, the fields that make it).
const VARIANTS: [(&str, &str); 3] = [
    (
        "gate then norm, biases",
        r#""mamba_rms_norm":true,"mamba_norm_before_gate":false,"mamba_proj_bias":true,
           "projectors_bias":true,"attention_bias":true,"mamba_n_groups":1"#,
    ),
    (
        "norm then gate, 2 groups",
        r#""mamba_rms_norm":true,"mamba_norm_before_gate":true,"mamba_n_groups":2,
           "ssm_in_multiplier":0.8,"attention_in_multiplier":1.4"#,
    ),
    ("gate only", r#""mamba_rms_norm":false,"ssm_in_multiplier":1.2,"attention_in_multiplier":0.6"#),
];

dual_test! {
    async fn falcon_h1_variants_on_the_gpu_match_the_cpu() {
        let Some(ctx) = gpu("falcon_h1_variants_on_the_gpu_match_the_cpu").await else { return };
        // 100 tokens: two scan chunks of 64, and forward chunks of at most 48.
        let ids: Vec<u32> = (0..100u32).map(|i| (i * 37 + 11) % 64).collect();
        for (name, extra) in VARIANTS {
            let c = Checkpoint::random_from_json(&config(extra), 7, safetensors::Dtype::F32).unwrap();
            let cpu = CpuModel::new(c.weights().unwrap());
            let mut state = State::zeros(cpu.config());
            let want = cpu.forward(&ids, &mut state, Logits::All).unwrap();
            let options = GpuModelOptions { weights: WeightFormat::F32, max_tokens: 48, ..Default::default() };
            let mut m = GpuModel::load(&ctx, &c, options).await.unwrap_or_else(|e| panic!("{name}: {e}"));
            // The prompt less its last 4 tokens as one call, then those 4 as decode steps.
            let mut got = m.forward(&ids[..96], Logits::All).await.unwrap();
            for &id in &ids[96..] {
                got.extend(m.forward(&[id], Logits::All).await.unwrap());
            }
            assert_close(&format!("{name}: GPU vs CPU logits, 100 positions"), &got, &want, 1e-5, 1e-5);
            let state_gpu = m.read_state().await.unwrap();
            assert_close(&format!("{name}: GPU vs CPU state"), &state_gpu.to_flat(), &state.to_flat(), 1e-5, 1e-5);
            log(&format!("[falcon-h1] {name}: the GPU matches the CPU reference"));
        }
    }

    async fn an_input_multiplier_on_a_projection_with_a_bias_is_refused() {
        let Some(ctx) = gpu("an_input_multiplier_on_a_projection_with_a_bias_is_refused").await else { return };
        let cases = [
            (r#""mamba_proj_bias":true,"ssm_in_multiplier":0.9"#, ["ssm_in_multiplier", "mamba_proj_bias"]),
            (r#""attention_bias":true,"attention_in_multiplier":1.3"#, ["attention_in_multiplier", "attention_bias"]),
        ];
        for (extra, names) in cases {
            let c = Checkpoint::random_from_json(&config(extra), 3, safetensors::Dtype::F32).unwrap();
            let e = GpuModel::load(&ctx, &c, GpuModelOptions::default()).await.err().expect("refused");
            assert_eq!(e.code(), "UnsupportedModel", "{extra}: {e}");
            assert!(names.iter().all(|n| e.to_string().contains(n)), "{extra}: {e} should name {names:?}");
            // The CPU reference runs it.
            let cpu = CpuModel::new(c.weights().unwrap());
            let logits = cpu.forward(&[1, 2, 3], &mut State::zeros(cpu.config()), Logits::Last).unwrap();
            assert!(logits.iter().all(|v| v.is_finite()));
        }
    }
}
