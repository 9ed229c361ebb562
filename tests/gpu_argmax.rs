//! The greedy pick on the GPU (`shaders/argmax.wgsl`, lavapipe natively, SwiftShader in headless
//! Chromium) against the definition: the index of the largest value, the first on ties (as
//! torch.argmax); NaN or ±Inf anywhere is refused (the model overflowed).

mod common;

use common::gpu;
use rand::{Rng, SeedableRng, rngs::SmallRng};
use webmamba::kernels::Argmax;
use webmamba::kernels::argmax::{NON_FINITE_PICK, SLICE};

/// The first index of the largest value.
fn first_max(values: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best as u32
}

dual_test! {
    async fn argmax_picks_the_first_largest() {
        let Some(ctx) = gpu("argmax_picks_the_first_largest").await else { return };
        let kernel = Argmax::new(&ctx).await.expect("compile argmax");
        let mut rng = SmallRng::seed_from_u64(11);
        // Below, at and above the workgroup size (256) and a slice (argmax::SLICE = 2048, a
        // workgroup of the first pass each), a 130M vocabulary, a 256K one.
        for v in [1usize, 7, 255, 256, 257, 1000, 2047, 2048, 2049, 6145, 50_280, 256_000] {
            let mut logits: Vec<f32> = (0..v).map(|_| rng.random_range(-20.0..20.0)).collect();
            assert_eq!(kernel.run(&ctx, &logits).await.unwrap(), first_max(&logits), "V={v} random");
            // Ties for the maximum, in different invocations' slices and in one slice: the first.
            if v > 2 {
                let top = 30.0;
                for _ in 0..3 {
                    let i = rng.random_range(0..v);
                    logits[i] = top;
                }
                assert_eq!(kernel.run(&ctx, &logits).await.unwrap(), first_max(&logits), "V={v} ties");
            }
            // The most negative finite entries and a maximum at the very end.
            for x in logits.iter_mut().step_by(3) {
                *x = f32::MIN;
            }
            logits[v - 1] = 40.0;
            assert_eq!(kernel.run(&ctx, &logits).await.unwrap(), first_max(&logits), "V={v} f32::MIN");
        }
        // Ties across slices, the later slice's index the smaller within its slice; a maximum
        // alone in the last, partial slice.
        let mut across = vec![0.0f32; 3 * SLICE + 10];
        across[2 * SLICE + 1] = 1.0;
        across[SLICE + 7] = 1.0;
        across[3 * SLICE + 3] = 1.0;
        assert_eq!(kernel.run(&ctx, &across).await.unwrap(), (SLICE + 7) as u32, "ties across slices");
        across[3 * SLICE + 9] = 1.5;
        assert_eq!(kernel.run(&ctx, &across).await.unwrap(), (3 * SLICE + 9) as u32, "last slice");
        // All equal: index 0; the largest finite value wins.
        assert_eq!(kernel.run(&ctx, &[2.5; 1000]).await.unwrap(), 0);
        let mut max = vec![1.0f32; 600];
        max[417] = f32::MAX;
        assert_eq!(kernel.run(&ctx, &max).await.unwrap(), 417);
    }

    async fn argmax_refuses_non_finite() {
        let Some(ctx) = gpu("argmax_refuses_non_finite").await else { return };
        let kernel = Argmax::new(&ctx).await.expect("compile argmax");
        for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
            for (v, at) in [(1usize, 0usize), (300, 0), (300, 299), (50_280, 12_345), (50_280, 50_279)] {
                let mut logits = vec![0.5f32; v];
                logits[at] = bad;
                assert_eq!(kernel.run(&ctx, &logits).await.unwrap(), NON_FINITE_PICK, "V={v} {bad} at {at}");
            }
            // Beside the maximum: still refused.
            let mut logits = vec![0.0f32; 700];
            logits[3] = 9.0;
            logits[600] = bad;
            assert_eq!(kernel.run(&ctx, &logits).await.unwrap(), NON_FINITE_PICK, "{bad} beside 9.0");
        }
        assert_eq!(kernel.run(&ctx, &[f32::NEG_INFINITY; 300]).await.unwrap(), NON_FINITE_PICK);
        assert!(ctx.take_uncaptured_error().is_none(), "no stray GPU error");
    }
}
