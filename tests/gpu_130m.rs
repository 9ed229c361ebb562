//! The GPU forward pass at the size of a real model: seeded random models of mamba-130m's shape
//! (d_model 768, 24 layers, d_state 16, vocab 50280; ~130M parameters, 154 MB f32 embedding —
//! more than lavapipe's 128 MiB binding limit, so it is split) and of mamba2-130m's (the same
//! width and depth; 24 heads × head_dim 64, N 128, 1 group). A 120-token prompt (three scan
//! chunks) and 8 decode steps against the CPU reference; `WEBMAMBA_BIG=1` makes it 300 tokens
//! and 32 steps (lavapipe on 2 cores: ~4 minutes a model). Native only: on a software adapter in
//! a browser this is minutes.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::{assert_close, gpu, log};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use safetensors::Dtype;
use webmamba::cpu::ops::argmax;
use webmamba::{Checkpoint, Config, CpuModel, GpuModel, GpuModelOptions, Logits, State, WeightFormat};

fn mamba_130m_shape() -> Config {
    Config::from_json(
        br#"{"model_type":"mamba","vocab_size":50280,"hidden_size":768,"num_hidden_layers":24,
            "state_size":16,"expand":2,"conv_kernel":4,"time_step_rank":"auto"}"#,
    )
    .unwrap()
}

fn mamba2_130m_shape() -> Config {
    Config::from_json(
        br#"{"model_type":"mamba2","vocab_size":50280,"hidden_size":768,"num_hidden_layers":24,
            "state_size":128,"expand":2,"conv_kernel":4,"num_heads":24,"head_dim":64,"n_groups":1,
            "tie_word_embeddings":true}"#,
    )
    .unwrap()
}

#[test]
fn gpu_matches_cpu_on_a_130m_shaped_model() {
    matches_cpu("130m", mamba_130m_shape());
}

#[test]
fn gpu_matches_cpu_on_a_130m_shaped_mamba2_model() {
    matches_cpu("mamba2-130m", mamba2_130m_shape());
}

fn matches_cpu(name: &str, config: Config) {
    let Some(ctx) = pollster::block_on(gpu(&format!("{name}: the GPU matches the CPU"))) else { return };
    let t0 = std::time::Instant::now();
    let checkpoint = Checkpoint::random(&config, 130, Dtype::F32).unwrap();
    let weights = checkpoint.weights().unwrap();
    log(&format!(
        "[{name}] {:.1}M parameters, random weights in {:.1?}",
        weights.parameters() as f64 / 1e6,
        t0.elapsed()
    ));
    // f32 storage: the 154 MB embedding is split on adapters that bind at most 128 MiB.
    let options = GpuModelOptions { weights: WeightFormat::F32, ..Default::default() };
    let mut gpu = pollster::block_on(GpuModel::load(&ctx, &checkpoint, options)).unwrap();
    drop(checkpoint);
    let cpu = CpuModel::new(weights);

    let big = std::env::var("WEBMAMBA_BIG").is_ok_and(|v| v == "1");
    let (prompt_len, steps) = if big { (300, 32) } else { (120, 8) };
    let mut rng = SmallRng::seed_from_u64(300);
    let prompt: Vec<u32> = (0..prompt_len).map(|_| rng.random_range(0..50280)).collect();
    let t0 = std::time::Instant::now();
    let got = pollster::block_on(gpu.forward(&prompt, Logits::All)).unwrap();
    let gpu_time = t0.elapsed();
    let t0 = std::time::Instant::now();
    let mut state = State::zeros(&config);
    let want = cpu.forward(&prompt, &mut state, Logits::All).unwrap();
    log(&format!("[{name}] prefill {prompt_len}: GPU {gpu_time:.1?}, CPU reference {:.1?}", t0.elapsed()));
    assert_close(&format!("{name}: {prompt_len}-token prefill logits"), &got, &want, 1e-4, 0.0);

    let mut next = argmax(&got[got.len() - 50280..]).unwrap() as u32;
    let (mut gpu_time, mut worst) = (std::time::Duration::ZERO, 0.0f32);
    for step in 0..steps {
        let t0 = std::time::Instant::now();
        let got = pollster::block_on(gpu.forward(&[next], Logits::Last)).unwrap();
        gpu_time += t0.elapsed();
        let want = cpu.forward(&[next], &mut state, Logits::Last).unwrap();
        assert_close(&format!("{name}: decode step {step}"), &got, &want, 1e-4, 0.0);
        worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(worst, f32::max);
        next = argmax(&got).unwrap() as u32;
    }
    log(&format!("[{name}] {steps} decode steps: GPU {:.1?}/token, max |diff| {worst:e}", gpu_time / steps));
}
