//! The fused decode step (a Mamba-1 layer in 4 dispatches instead of 7: `decode_in_proj`,
//! x_proj, `decode_scan`, out_proj; a Mamba-2 layer in 3 instead of 6: `decode_in_proj`,
//! `ssd_output`, `decode_out_proj`) against the unfused kernels on every fixture, natively
//! (lavapipe) and in headless Chromium (SwiftShader): the same model loaded twice, with
//! `GpuModelOptions::fused` on and off. Prefills never fuse (their logits are bit for bit
//! equal); each decode step's logits agree within 1e-5 (+ 1e-6 relative), greedy tokens and
//! the states after the steps too, and the fused model records exactly 3 dispatches fewer per
//! Mamba-1 layer and 3 (or 2) per Mamba-2 layer, and 1 fewer for the head (norm_f + the LM head
//! as one `decode_in_proj`) — so the fused kernels are what ran. With the
//! software adapters' matmul set (`Direct`) the fused kernels sum in the unfused ones' order and
//! the logits are bit for bit equal (asserted: lavapipe and SwiftShader both give 0); with
//! `Tiled` decode_scan sums Δ's dot product in another order than gemv_coalesced (largest
//! difference seen on lavapipe: 3.8e-6, medium-bf16 with int8 weights).

mod common;

use common::fixtures::{self, Fixture};
use common::{assert_close, assert_same_states_and_greedy, gpu, log};
use webmamba::blocks::{BlockKind, GatedNorm, Mamba2};
use webmamba::{GpuModel, GpuModelOptions, Logits, Matmul, WeightFormat};

const STEPS: usize = 6;

fn argmax(logits: &[f32]) -> u32 {
    webmamba::cpu::ops::argmax(logits).unwrap() as u32
}

/// Dispatches a fused Mamba-2 mixer saves: into decode_in_proj its rms_norm where the block makes
/// its own (`own_norm`: not Falcon-H1's parallel block, whose norm the attention reads too),
/// in_proj, Falcon-H1's segment multipliers and the conv; into decode_out_proj the gated norm
/// of at most 8 groups and out_proj (1), with Falcon-H1's gate after the norm (2).
fn mamba2_saving(m: &Mamba2, own_norm: bool) -> u64 {
    let input = u64::from(own_norm) + 1 + u64::from(m.in_scales != [1.0; 5]);
    let out = match m.gated_norm {
        _ if m.n_groups > 8 => 0,
        GatedNorm::GateOnly => 0,
        GatedNorm::GateThenNorm => 1,
        GatedNorm::NormThenGate => 2,
    };
    input + out
}

/// A decode step's logits and the dispatches it recorded.
async fn step(m: &mut GpuModel, token: u32) -> (Vec<f32>, u64) {
    let before = webmamba::gpu::dispatches_recorded();
    let logits = m.forward(&[token], Logits::Last).await.unwrap();
    (logits, webmamba::gpu::dispatches_recorded() - before)
}

/// Every Mamba fixture and every hybrid natively; in a browser, a sample with Mamba-1 (plain,
/// Falcon-Mamba's norms, Jamba's gained norms), Mamba-2 (groups) and Zamba2.
fn fixtures() -> Vec<Fixture> {
    let mut all = fixtures::all();
    all.extend(fixtures::hybrids());
    fixtures::natively_all(
        all,
        &["medium-bf16", "falcon-bias-bf16", "mamba2-groups-f16", "jamba-moe-bf16", "zamba2-shared-f16"],
    )
}

dual_test! {
    async fn fused_decode_equals_unfused_on_every_fixture() {
        let Some(ctx) = gpu("fused_decode_equals_unfused_on_every_fixture").await else { return };
        let matmuls: &[Matmul] = if cfg!(target_arch = "wasm32") { &[Matmul::Direct] } else { &[Matmul::Direct, Matmul::Tiled] };
        for &matmul in matmuls {
            let mut worst = (0.0f32, String::new());
            for f in fixtures() {
                let mut formats = vec![f.exact_format()];
                if !cfg!(target_arch = "wasm32") {
                    formats.push(WeightFormat::Int8);
                }
                for weights in formats {
                    let what = format!("{} ({matmul:?}, {} weights)", f.name, weights.name());
                    let options = GpuModelOptions { matmul, weights, ..Default::default() };
                    let mut fused = f.load_gpu(&ctx, options).await;
                    let mut unfused = f.load_gpu(&ctx, GpuModelOptions { fused: false, ..options }).await;
                    // A Mamba-1 layer saves 3 dispatches, a Mamba-2 mixer what mamba2_saving
                    // says (Zamba2's and Falcon-H1's parallel blocks' too). The head saves 1
                    // (norm_f folded into the LM head's decode_in_proj), on every model.
                    let saved: u64 = 1 + fused
                        .config()
                        .blocks
                        .iter()
                        .map(|b| match &b.kind {
                            BlockKind::Mamba1(_) => 3,
                            BlockKind::Mamba2(m) => mamba2_saving(m, true),
                            BlockKind::Zamba2(z) => mamba2_saving(&z.mamba, true),
                            BlockKind::Parallel(p) => mamba2_saving(&p.mamba, false),
                            _ => 0,
                        })
                        .sum::<u64>();
                    let prompt = f.reference().prompt_ids;
                    let a = fused.forward(&prompt, Logits::Last).await.unwrap();
                    let b = unfused.forward(&prompt, Logits::Last).await.unwrap();
                    assert_eq!(a, b, "{what}: a prefill runs the same kernels either way");
                    let mut next = argmax(&b);
                    for i in 0..STEPS {
                        let (a, fused_dispatches) = step(&mut fused, next).await;
                        let (b, unfused_dispatches) = step(&mut unfused, next).await;
                        assert_eq!(
                            unfused_dispatches - fused_dispatches,
                            saved,
                            "{what}: dispatches of a decode step, fused {fused_dispatches} vs unfused {unfused_dispatches}"
                        );
                        let diff = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
                        if diff > worst.0 {
                            worst = (diff, format!("{what}, step {i}"));
                        }
                        if matmul == Matmul::Direct {
                            // The software adapters' set sums in the unfused kernels' order.
                            assert!(a == b, "{what}: decode step {i}: fused logits differ from unfused by {diff:e}");
                        }
                        // Tiled: Δ's dot product is summed in another order than
                        // gemv_coalesced's. Within 1e-5 plus 1e-6 of the logit (the fixtures'
                        // logits reach ~18, where an f32 step is 2e-6).
                        assert_close(&format!("{what}: decode step {i} logits, fused vs unfused"), &a, &b, 1e-5, 1e-6);
                        assert_eq!(argmax(&a), argmax(&b), "{what}: step {i}'s greedy token");
                        next = argmax(&b);
                    }
                    assert_same_states_and_greedy(&what, (&mut fused, &mut unfused), next, STEPS).await;
                }
            }
            log(&format!("fused vs unfused decode ({matmul:?}): largest |Δlogit| {:e} ({})", worst.0, worst.1));
        }

        assert!(ctx.take_uncaptured_error().is_none());
    }
}
