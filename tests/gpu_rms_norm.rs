//! The proof kernel end to end: RMSNorm on the GPU (lavapipe natively, SwiftShader in
//! headless Chromium) against an f64 CPU computation written here from the formula.

mod common;

use common::{assert_close, gpu};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use webmamba::Error;
use webmamba::kernels::RmsNorm;

/// `y = x / sqrt(mean(x²) + eps) * w`, row by row, in f64.
fn rms_norm_f64(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    x.chunks(w.len())
        .flat_map(|row| {
            let ms = row.iter().map(|&v| f64::from(v) * f64::from(v)).sum::<f64>() / row.len() as f64;
            let scale = 1.0 / (ms + f64::from(eps)).sqrt();
            row.iter().zip(w).map(move |(&v, &g)| (f64::from(v) * scale * f64::from(g)) as f32)
        })
        .collect()
}

fn random(rng: &mut SmallRng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-scale..scale)).collect()
}

dual_test! {
    async fn rms_norm_matches_cpu() {
        let Some(ctx) = gpu("rms_norm_matches_cpu").await else { return };
        let kernel = RmsNorm::new(&ctx).await.expect("compile rms_norm");
        let mut rng = SmallRng::seed_from_u64(7);
        // Widths below, at and above the workgroup size, a 130M-model width, and odd ones.
        for (rows, cols) in [(1, 1), (3, 7), (5, 64), (2, 65), (17, 768), (4, 1000)] {
            let x = random(&mut rng, rows * cols, 3.0);
            let w = random(&mut rng, cols, 2.0);
            let eps = 1e-5;
            let got = kernel.run(&ctx, &x, &w, eps).await.expect("run rms_norm");
            let want = rms_norm_f64(&x, &w, eps);
            assert_close(&format!("rms_norm {rows}x{cols}"), &got, &want, 1e-5, 1e-5);
        }
    }

    async fn rms_norm_rejects_bad_shapes_and_survives() {
        let Some(ctx) = gpu("rms_norm_rejects_bad_shapes_and_survives").await else { return };
        let kernel = RmsNorm::new(&ctx).await.expect("compile rms_norm");
        let err = kernel.run(&ctx, &[1.0; 10], &[1.0; 4], 1e-5).await.unwrap_err();
        assert!(matches!(err, Error::ShapeMismatch { .. }), "got {err}");
        let err = kernel.run(&ctx, &[1.0; 4], &[], 1e-5).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "got {err}");
        let err = kernel.run(&ctx, &[], &[1.0; 4], 1e-5).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "got {err}");
        // The context is still usable after the failed calls.
        let got = kernel.run(&ctx, &[3.0, 4.0], &[1.0, 1.0], 0.0).await.expect("run after error");
        assert_close("rms_norm after error", &got, &rms_norm_f64(&[3.0, 4.0], &[1.0, 1.0], 0.0), 1e-6, 1e-6);
        assert!(ctx.take_uncaptured_error().is_none(), "no stray GPU error");
    }
}
