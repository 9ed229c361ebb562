//! The toy kind runs in a model of two toy blocks: on the CPU as a plain-loop reference
//! computed here says (`h ← h + W · rms_norm(h) · g` per block, then norm_f and the tied
//! embedding), and on the GPU as on the CPU.

use crate::blocks::toy::Toy;
use crate::blocks::{Block, BlockKind};
use crate::cpu::CpuModel;
use crate::gpu::GpuContext;
use crate::gpu_model::{GpuModel, GpuModelOptions, WeightFormat};
use crate::model::{Checkpoint, Config, Logits, State};

/// Deterministic values in ±`scale` (a small LCG: the test's own, not the crate's generator).
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// RMSNorm of each row of `x` (width `d`) times `g`, as HF computes it.
fn rms_norm(x: &[f32], g: &[f32], eps: f32) -> Vec<f32> {
    x.chunks(g.len())
        .flat_map(|row| {
            let ms = row.iter().map(|v| v * v).sum::<f32>() / row.len() as f32;
            let r = 1.0 / (ms + eps).sqrt();
            row.iter().zip(g).map(move |(v, g)| v * r * g)
        })
        .collect()
}

/// y = W x per row (W: (rows, cols) row-major).
fn matvec(x: &[f32], w: &[f32], cols: usize) -> Vec<f32> {
    x.chunks(cols)
        .flat_map(|row| w.chunks(cols).map(move |w| w.iter().zip(row).map(|(a, b)| a * b).sum()))
        .collect()
}

#[test]
fn a_toy_kind_runs_on_cpu_and_gpu_with_nothing_else_knowing_it() {
    let shared = Config::from_json(include_bytes!("../../../tests/fixtures/tiny-f32/config.json")).unwrap();
    let (d, v, eps) = (shared.d_model, shared.vocab_size, shared.norm_eps);
    assert!(shared.tie_embeddings);
    let blocks =
        (0..2).map(|i| Block::new(BlockKind::Toy(Toy), format!("toy.{i}."), "norm.weight", "")).collect();
    let config = Config::stack(shared, blocks).unwrap();
    let embedding = values(v * d, 1, 0.5);
    let norm_f = values(d, 2, 0.1).iter().map(|x| 1.0 + x).collect::<Vec<_>>();
    let layers: Vec<(Vec<f32>, Vec<f32>)> = (0..2)
        .map(|i| (values(d, 10 + i, 0.1).iter().map(|x| 1.0 + x).collect(), values(d * d, 20 + i, 0.25)))
        .collect();
    let mut tensors: Vec<(String, Vec<usize>, &[f32])> = vec![
        (config.names.embedding.to_string(), vec![v, d], &embedding),
        (config.names.norm_f.to_string(), vec![d], &norm_f),
    ];
    for (i, (g, w)) in layers.iter().enumerate() {
        tensors.push((format!("toy.{i}.norm.weight"), vec![d], g));
        tensors.push((format!("toy.{i}.weight"), vec![d, d], w));
    }
    let bytes: Vec<Vec<u8>> = tensors.iter().map(|(_, _, x)| bytemuck::cast_slice(x).to_vec()).collect();
    let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = tensors
        .iter()
        .zip(&bytes)
        .map(|((name, shape, _), b)| {
            (
                name.clone(),
                safetensors::tensor::TensorView::new(safetensors::Dtype::F32, shape.clone(), b).unwrap(),
            )
        })
        .collect();
    let file = safetensors::tensor::serialize(views, None).unwrap();
    let checkpoint =
        Checkpoint::from_config(config.clone(), vec![("model.safetensors".into(), file)]).unwrap();

    // The reference: the model's equations in plain loops.
    let ids = [3u32, 141, 7, 299, 0];
    let mut h: Vec<f32> = ids.iter().flat_map(|&id| embedding[id as usize * d..][..d].to_vec()).collect();
    for (g, w) in &layers {
        let y = matvec(&rms_norm(&h, g, eps), w, d);
        h.iter_mut().zip(y).for_each(|(h, y)| *h += y);
    }
    let want = matvec(&rms_norm(&h, &norm_f, eps), &embedding, d);

    let cpu = CpuModel::new(checkpoint.weights().unwrap());
    let got = cpu.forward(&ids, &mut State::zeros(&config), Logits::All).unwrap();
    let close = |a: &[f32], b: &[f32], tol: f32| {
        a.len() == b.len() && a.iter().zip(b).all(|(a, b)| (a - b).abs() <= tol * (1.0 + b.abs()))
    };
    assert!(close(&got, &want, 1e-5), "the CPU forward is not the toy model's");

    let ctx = match pollster::block_on(GpuContext::new()) {
        Ok(ctx) => ctx,
        Err(e) if std::env::var_os("CI").is_none() && std::env::var_os("WEBMAMBA_REQUIRE_GPU").is_none() => {
            eprintln!(
                "!!!!!!!! toy kind on the GPU: SKIPPED, NOT RUN: {e} (set WEBMAMBA_REQUIRE_GPU=1 to fail)"
            );
            return;
        }
        Err(e) => panic!("a GPU adapter is required here (CI / WEBMAMBA_REQUIRE_GPU): {e}"),
    };
    let mut gpu = pollster::block_on(GpuModel::load(
        &ctx,
        &checkpoint,
        GpuModelOptions { weights: WeightFormat::F32, ..Default::default() },
    ))
    .unwrap();
    let on_gpu = pollster::block_on(gpu.forward(&ids, Logits::All)).unwrap();
    let worst = on_gpu.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(close(&on_gpu, &want, 1e-4), "the GPU forward is not the toy model's (worst difference {worst})");
    // …and a decode step after the prompt, from the state it left.
    let next = pollster::block_on(gpu.forward(&[42], Logits::Last)).unwrap();
    let mut st = State::zeros(&config);
    let cpu_all = cpu.forward(&[ids.as_slice(), &[42]].concat(), &mut st, Logits::Last).unwrap();
    assert!(close(&next, &cpu_all, 1e-4), "the GPU's decode step is not the CPU's");
}
