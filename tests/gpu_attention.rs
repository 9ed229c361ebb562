//! The attention kernels on the GPU (lavapipe natively, SwiftShader in headless Chromium):
//! rope, kv_append, attention_prefill and attention_decode (+ attention_combine), each against
//! an f64 CPU computation written here from the formula.

mod common;

use common::{assert_close, gpu, log};
use rand::{Rng, SeedableRng, rngs::SmallRng};
use webmamba::Error;
use webmamba::kernels::attention_decode::splits;
use webmamba::kernels::kv_append::KvAppendParams;
use webmamba::kernels::rope::{RopeParams, rope_table};
use webmamba::kernels::{AttentionDecode, AttentionPrefill, AttentionShape, KvAppend, Rope};

fn random(rng: &mut SmallRng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-scale..scale)).collect()
}

/// Softmax attention in f64: o[t, h] = Σ_{j ≤ past + t} softmax_j(scale · q[t, h]·K[j, g]) V[j, g]
/// with g = h / (Hq / Hkv), K and V read from the layer's cache layout in `kv`.
fn attention_f64(q: &[f32], kv: &[f32], s: &AttentionShape, past: usize) -> Vec<f32> {
    let (hq, hkv, hd) = (s.heads as usize, s.kv_heads as usize, s.head_dim as usize);
    let width = hkv * hd;
    let k_at = |j: usize, g: usize| s.kv_offset as usize + j * width + g * hd;
    let v_at = |j: usize, g: usize| k_at(j, g) + s.capacity as usize * width;
    let mut o = vec![0.0f32; q.len()];
    for t in 0..q.len() / (hq * hd) {
        for h in 0..hq {
            let g = h / (hq / hkv);
            let qv = &q[(t * hq + h) * hd..][..hd];
            let scores: Vec<f64> = (0..=past + t)
                .map(|j| {
                    let dot: f64 = (0..hd).map(|d| f64::from(qv[d]) * f64::from(kv[k_at(j, g) + d])).sum();
                    f64::from(s.scale) * dot
                })
                .collect();
            let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let weights: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
            let sum: f64 = weights.iter().sum();
            for d in 0..hd {
                let acc: f64 =
                    weights.iter().enumerate().map(|(j, w)| w * f64::from(kv[v_at(j, g) + d])).sum();
                o[(t * hq + h) * hd + d] = (acc / sum) as f32;
            }
        }
    }
    o
}

/// A layer's cache with 41 floats of another layer before it and 3 spare positions: positions
/// 0..past + T random, the unused ones 50.0 (a kernel reading them would be far off).
fn cache(rng: &mut SmallRng, shape: &mut AttentionShape, filled: usize) -> Vec<f32> {
    shape.kv_offset = 41;
    shape.capacity = filled as u32 + 3;
    let width = shape.width();
    let mut kv = vec![50.0f32; shape.kv_end() + 5];
    for region in 0..2 {
        let start = 41 + region * shape.capacity as usize * width;
        kv[start..start + filled * width].copy_from_slice(&random(rng, filled * width, 1.0));
    }
    kv
}

fn shape(heads: u32, kv_heads: u32, head_dim: u32, scale: f32) -> AttentionShape {
    AttentionShape { heads, kv_heads, head_dim, kv_offset: 0, capacity: 0, scale }
}

/// Runs `run` on random q and caches for each case (past, T, Hq, Hkv, hd, scale) and compares
/// with [`attention_f64`].
async fn compare(
    kernel: &str,
    seed: u64,
    cases: &[(u32, u32, u32, u32, u32, f32)],
    run: impl AsyncFn(&[f32], &[f32], AttentionShape, u32) -> webmamba::Result<Vec<f32>>,
) {
    let mut rng = SmallRng::seed_from_u64(seed);
    for &(past, t, hq, hkv, hd, scale) in cases {
        let mut s = shape(hq, hkv, hd, scale);
        let kv = cache(&mut rng, &mut s, (past + t) as usize);
        let q = random(&mut rng, (t * hq * hd) as usize, 1.0);
        let got = run(&q, &kv, s, past).await.unwrap_or_else(|e| panic!("run {kernel}: {e}"));
        let want = attention_f64(&q, &kv, &s, past as usize);
        let mut what = format!("{kernel} past {past} T {t} Hq {hq} Hkv {hkv} hd {hd}");
        if kernel == "decode" {
            what += &format!(" ({} splits)", splits(past + t, hq, t, hd).splits);
        }
        assert_close(&what, &got, &want, 1e-6, 1e-5);
    }
}

dual_test! {
    async fn rope_table_is_hf_default_rope() {
        // Against the exact f64 angles: HF's f32 inv_freq and f32 product are off by a few ulps
        // of the angle (up to ~3e-4 rad at position 5000), so the tolerance grows with it.
        let mut worst = 0.0f64;
        for (theta, rot, positions) in [(10_000.0, 64u32, 5001u32), (1e6, 32, 5001), (10_000.0, 6, 40)] {
            let table = rope_table(theta, rot, positions);
            let half = rot as usize / 2;
            assert_eq!(table.len(), positions as usize * rot as usize);
            for pos in 0..positions as usize {
                for i in 0..half {
                    let angle = pos as f64 * theta.powf(-2.0 * i as f64 / f64::from(rot));
                    let tol = angle * 5e-7 + 2e-7;
                    let (c, s) = (table[pos * 2 * half + i], table[pos * 2 * half + half + i]);
                    let err = (f64::from(c) - angle.cos()).abs().max((f64::from(s) - angle.sin()).abs());
                    assert!(err <= tol, "theta {theta} rot {rot} pos {pos} i {i}: off by {err:e} > {tol:e}");
                    worst = worst.max(err);
                }
            }
        }
        log(&format!("[rope_table] max |diff| vs exact f64 angles {worst:e}"));
    }

    async fn rope_matches_cpu() {
        let Some(ctx) = gpu("rope_matches_cpu").await else { return };
        let kernel = Rope::new(&ctx).await.expect("compile rope");
        let mut rng = SmallRng::seed_from_u64(11);
        // (T, past, heads, hd, rot, theta, extra columns around the heads): full and partial
        // rotary, positions up to 5000, a head region inside a wider fused row.
        for (t, past, heads, hd, rot, theta, col, extra) in [
            (7u32, 0u32, 3u32, 64u32, 64u32, 10_000.0, 0u32, 0u32),
            (10, 4990, 2, 128, 128, 1e6, 0, 0),
            (17, 300, 4, 128, 32, 10_000.0, 5, 9),
            (3, 4997, 5, 24, 12, 1e6, 24, 1),
            (130, 1, 1, 8, 8, 10_000.0, 0, 0),
        ] {
            let positions = past + t;
            let table = rope_table(theta, rot, positions);
            let stride = col + heads * hd + extra;
            let x = random(&mut rng, (t * stride) as usize, 2.0);
            let params = RopeParams { stride, col, heads, head_dim: hd, rot, positions, _pad: [0; 2] };
            let got = kernel.run(&ctx, &x, &table, params, past).await.expect("run rope");
            // Expected: the rotation in f64, from the cos and sin of f64 angles rounded as the
            // table's (checked above), every column outside the rotated dims unchanged.
            let mut want = x.clone();
            let half = (rot / 2) as usize;
            for tt in 0..t as usize {
                let pos = past as usize + tt;
                for h in 0..heads as usize {
                    let at = tt * stride as usize + col as usize + h * hd as usize;
                    for i in 0..half {
                        let c = f64::from(table[pos * rot as usize + i]);
                        let s = f64::from(table[pos * rot as usize + half + i]);
                        let (x1, x2) = (f64::from(x[at + i]), f64::from(x[at + half + i]));
                        want[at + i] = (x1 * c - x2 * s) as f32;
                        want[at + half + i] = (x2 * c + x1 * s) as f32;
                    }
                }
            }
            assert_close(&format!("rope T {t} past {past} hd {hd} rot {rot} θ {theta}"), &got, &want, 1e-6, 1e-6);
        }
    }

    async fn kv_append_copies_rows_into_the_cache() {
        let Some(ctx) = gpu("kv_append_copies_rows_into_the_cache").await else { return };
        let kernel = KvAppend::new(&ctx).await.expect("compile kv_append");
        let mut rng = SmallRng::seed_from_u64(12);
        // (T, past, Hq, Hkv, hd, capacity): from position 0, in the middle, up to the last slot.
        for (t, past, hq, hkv, hd, capacity) in
            [(1u32, 0u32, 2u32, 2u32, 8u32, 4u32), (9, 5, 8, 2, 24, 20), (70, 30, 4, 1, 64, 100)]
        {
            let width = hkv * hd;
            let stride = hq * hd + 2 * width + 3; // q ‖ k ‖ v ‖ 3 more columns
            let qkv = random(&mut rng, (t * stride) as usize, 1.0);
            let kv_offset = 37;
            let kv = random(&mut rng, (kv_offset + 2 * capacity * width + 11) as usize, 9.0);
            let params = KvAppendParams {
                width,
                k_stride: stride,
                k_col: hq * hd,
                v_stride: stride,
                v_col: hq * hd + width,
                kv_offset,
                capacity,
                _pad: 0,
            };
            let got = kernel.run(&ctx, &qkv, &kv, params, past).await.expect("run kv_append");
            let mut want = kv.clone();
            let (w, s) = (width as usize, stride as usize);
            for tt in 0..t as usize {
                let pos = past as usize + tt;
                let k_dst = kv_offset as usize + pos * w;
                let v_dst = k_dst + capacity as usize * w;
                want[k_dst..k_dst + w].copy_from_slice(&qkv[tt * s + (hq * hd) as usize..][..w]);
                want[v_dst..v_dst + w].copy_from_slice(&qkv[tt * s + (hq * hd) as usize + w..][..w]);
            }
            assert_close(&format!("kv_append T {t} past {past} width {width}"), &got, &want, 0.0, 0.0);
        }
    }

    async fn attention_prefill_matches_cpu() {
        let Some(ctx) = gpu("attention_prefill_matches_cpu").await else { return };
        let kernel = AttentionPrefill::new(&ctx).await.expect("compile attention_prefill");
        // past 0 and > 0, T off the tile sizes, GQA 1/2/4, hd 64, 128, 256 and small odd ones,
        // a ~700-key context, scales other than 1/√hd.
        let cases = [
            (0, 1, 2, 2, 64, 0.125),
            (0, 37, 4, 4, 64, 0.125),
            (11, 29, 8, 4, 128, 0.088_388_35),
            (650, 50, 8, 2, 64, 0.125),
            (5, 13, 4, 1, 24, 0.3),
            (3, 9, 2, 1, 8, 1.0),
            (20, 5, 4, 2, 256, 0.0625),
            (0, 70, 3, 3, 100, 0.1),
        ];
        compare("prefill", 13, &cases, async |q, kv, s, past| kernel.run(&ctx, q, kv, s, past).await).await;
    }

    async fn attention_decode_matches_cpu() {
        let Some(ctx) = gpu("attention_decode_matches_cpu").await else { return };
        let kernel = AttentionDecode::new(&ctx).await.expect("compile attention_decode");
        // Contexts (past + T) of 1, 63, 64, 65 (one split and its edges), 1000 and 4100 keys
        // (16 and 33 splits), T = 1 and a few rows.
        let cases = [
            (0, 1, 4, 2, 64, 0.125),
            (62, 1, 4, 2, 64, 0.125),
            (63, 1, 4, 2, 64, 0.125),
            (64, 1, 4, 2, 64, 0.125),
            (999, 1, 8, 2, 128, 0.088_388_35),
            (4099, 1, 4, 1, 64, 0.125),
            (997, 3, 4, 4, 24, 0.5),
            (298, 2, 2, 1, 256, 0.0625),
        ];
        compare("decode", 14, &cases, async |q, kv, s, past| kernel.run(&ctx, q, kv, s, past).await).await;
    }

    async fn attention_honours_the_scale_and_refuses_bad_shapes() {
        let Some(ctx) = gpu("attention_honours_the_scale_and_refuses_bad_shapes").await else { return };
        let prefill = AttentionPrefill::new(&ctx).await.expect("compile attention_prefill");
        let decode = AttentionDecode::new(&ctx).await.expect("compile attention_decode");
        let mut rng = SmallRng::seed_from_u64(15);
        let mut s = shape(4, 2, 64, 0.125);
        let kv = cache(&mut rng, &mut s, 40);
        let q = random(&mut rng, 4 * 64, 1.0);
        let base = prefill.run(&ctx, &q, &kv, s, 39).await.expect("prefill");
        let sharper = AttentionShape { scale: 0.5, ..s };
        let got = prefill.run(&ctx, &q, &kv, sharper, 39).await.expect("prefill, scale 0.5");
        assert_close("prefill scale 0.5", &got, &attention_f64(&q, &kv, &sharper, 39), 1e-6, 1e-5);
        let got_decode = decode.run(&ctx, &q, &kv, sharper, 39).await.expect("decode, scale 0.5");
        assert_close("decode scale 0.5", &got_decode, &got, 1e-6, 1e-5);
        let moved = base.iter().zip(&got).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(moved > 1e-2, "the scale changed the output by only {moved}");

        let too_wide = AttentionShape { head_dim: 257, ..s };
        let err = prefill.run(&ctx, &random(&mut rng, 4 * 257, 1.0), &kv, too_wide, 0).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "got {err}");
        let err = decode.run(&ctx, &q, &kv, s, s.capacity).await.unwrap_err();
        assert!(matches!(err, Error::InvalidInput(_)), "past + T beyond capacity: got {err}");
        let err = prefill.run(&ctx, &q, &kv[..100], s, 0).await.unwrap_err();
        assert!(matches!(err, Error::ShapeMismatch { .. }), "short kv: got {err}");
        let err = prefill.run(&ctx, &q[..100], &kv, s, 0).await.unwrap_err();
        assert!(matches!(err, Error::ShapeMismatch { .. }), "ragged q: got {err}");
        assert!(ctx.take_uncaptured_error().is_none(), "no stray GPU error");
    }

    async fn decode_splits_keep_the_gpu_busy() {
        // T = 1 over 4096 keys: 32 heads → 16 splits of 256; 8 heads → 32 splits of 128.
        let s = splits(4096, 32, 1, 128);
        assert_eq!((s.split_keys, s.splits, s.scratch_floats), (256, 16, 16 * 32 * 130));
        let s = splits(4096, 8, 1, 128);
        assert_eq!((s.split_keys, s.splits), (128, 32));
        for (context, heads, t) in [(1, 1, 1), (63, 4, 1), (65, 4, 1), (100_000, 1, 1), (512, 32, 512)] {
            let s = splits(context, heads, t, 64);
            assert!((64..=256).contains(&s.split_keys) && s.split_keys.is_multiple_of(64), "{s:?}");
            assert_eq!(s.splits, context.div_ceil(s.split_keys), "{s:?}");
        }
    }
}
