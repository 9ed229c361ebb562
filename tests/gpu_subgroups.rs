//! The GEMV kernels' workgroup sums through subgroup operations (`webmamba::kernels::lanes`)
//! against their workgroup-memory tree, on every fixture and every hybrid natively: the same
//! model loaded with `GpuModelOptions::subgroups` on and off, with the real-GPU kernels
//! (`Matmul::Tiled`: the only set whose GEMVs sum across a workgroup). HF's greedy tokens from
//! both; the prompt's logits within 1e-5 (+ 1e-6 relative), each decode step's and the states
//! after them within 1e-5 + 1e-5 relative (the sums' rounding is carried in the recurrent state
//! from step to step: 1.3e-5 at a logit of 1.65 after seven steps of falcon-h1-gatednorm-f16 on
//! lavapipe); the batched greedy steps give the same tokens; int8 and q4 weights on a sample. Natively only, on an adapter with subgroups (lavapipe has them, in subgroups of
//! 8; CI fails without): wgpu never enables them in a browser, where both loads would run the
//! tree.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::fixtures;
use common::{assert_close, assert_same_states_and_greedy, gpu, log};
use webmamba::{GpuModelOptions, Logits, Matmul, WeightFormat};

const STEPS: usize = 6;

fn argmax(logits: &[f32]) -> u32 {
    webmamba::cpu::ops::argmax(logits).unwrap() as u32
}

fn largest_difference(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max)
}

#[test]
fn subgroup_sums_equal_the_tree_on_every_fixture() {
    pollster::block_on(async {
        let Some(ctx) = gpu("subgroup_sums_equal_the_tree_on_every_fixture").await else { return };
        assert!(
            ctx.summary().subgroups,
            "this test needs an adapter with subgroup operations (lavapipe has them): {}",
            ctx.summary()
        );
        let mut all = fixtures::all();
        all.extend(fixtures::hybrids());
        let mut worst = (0.0f32, String::new());
        for f in all {
            let mut formats = vec![f.exact_format()];
            if ["medium-bf16", "mamba2-groups-f16", "granite-h-nope-legacy-bf16"].contains(&f.name) {
                formats.extend([WeightFormat::Int8, WeightFormat::Q4]);
            }
            for weights in formats {
                let what = format!("{} ({} weights)", f.name, weights.name());
                let options = GpuModelOptions { matmul: Matmul::Tiled, weights, ..Default::default() };
                let mut with = f.load_gpu(&ctx, options).await;
                let mut without = f.load_gpu(&ctx, GpuModelOptions { subgroups: false, ..options }).await;
                assert!(
                    with.uses_subgroups() && !without.uses_subgroups(),
                    "{what}: which sums each load uses"
                );
                assert_ne!(with.numerics(), without.numerics(), "{what}: the numerics name the sums");
                let r = f.reference();
                let a = with.forward(&r.prompt_ids, Logits::Last).await.unwrap();
                let b = without.forward(&r.prompt_ids, Logits::Last).await.unwrap();
                assert_close(&format!("{what}: the prompt's logits"), &a, &b, 1e-5, 1e-6);
                let (mut next_a, mut next_b) = (argmax(&a), argmax(&b));
                let (mut greedy_a, mut greedy_b) = (vec![next_a], vec![next_b]);
                for i in 0..STEPS.max(r.greedy_ids.len()) {
                    let a = with.forward(&[next_a], Logits::Last).await.unwrap();
                    let b = without.forward(&[next_b], Logits::Last).await.unwrap();
                    let diff = largest_difference(&a, &b);
                    if diff > worst.0 {
                        worst = (diff, format!("{what}, step {i}"));
                    }
                    assert_close(&format!("{what}: decode step {i}'s logits"), &a, &b, 1e-5, 1e-5);
                    (next_a, next_b) = (argmax(&a), argmax(&b));
                    greedy_a.push(next_a);
                    greedy_b.push(next_b);
                }
                assert_eq!(greedy_a, greedy_b, "{what}: greedy tokens with and without subgroups");
                if weights == f.exact_format() {
                    let n = r.greedy_ids.len();
                    assert_eq!(&greedy_a[..n], &r.greedy_ids[..], "{what}: greedy tokens vs HF");
                }
                assert_same_states_and_greedy(&what, (&mut with, &mut without), next_a, STEPS).await;
            }
        }
        log(&format!("subgroup sums vs the tree: largest |Δlogit| {:e} ({})", worst.0, worst.1));
        assert!(ctx.take_uncaptured_error().is_none());
    });
}
