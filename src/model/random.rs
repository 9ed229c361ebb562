//! [`ModelWeights::random`]: a seeded random model of any shape, for tests and benchmarks at
//! real sizes (e.g. the 130M shape) without shipping weights.
//!
//! Scales follow Mamba's initialisation so activations stay in the range of a trained model:
//! PyTorch's default `Linear` init (uniform ±1/√fan_in), `out_proj` divided by √n_layer (the
//! prenorm-residual rescale), Δ's bias so that softplus(bias) ∈ [0.001, 0.1], `A_log = log(n)`
//! per state index with a little noise, `D ≈ 1`, norm gains ≈ 1, embeddings ~ ±0.02·√3. Every
//! channel differs, so indexing bugs show.

use rand::{Rng, SeedableRng, rngs::SmallRng};

use crate::model::config::Config;
use crate::model::weights::{LayerWeights, ModelWeights};

fn uniform(rng: &mut SmallRng, n: usize, bound: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-bound..=bound)).collect()
}

fn around(rng: &mut SmallRng, n: usize, center: f32, spread: f32) -> Vec<f32> {
    (0..n).map(|_| center + rng.random_range(-spread..=spread)).collect()
}

impl ModelWeights {
    /// Random weights of the shape `config` describes, the same for the same `seed`.
    pub fn random(config: &Config, seed: u64) -> Self {
        let c = config;
        let mut rng = SmallRng::seed_from_u64(seed);
        let (d, di, n, k, r) = (c.d_model, c.d_inner, c.d_state, c.d_conv, c.dt_rank);
        let fan = |x: usize| 1.0 / (x as f32).sqrt();
        let layers = (0..c.n_layer)
            .map(|_| {
                let dt: Vec<f32> =
                    (0..di).map(|_| (rng.random_range(0.001f32.ln()..0.1f32.ln())).exp()).collect();
                LayerWeights {
                    norm: around(&mut rng, d, 1.0, 0.1),
                    in_proj: uniform(&mut rng, 2 * di * d, fan(d)),
                    in_proj_bias: c.use_bias.then(|| uniform(&mut rng, 2 * di, fan(d))),
                    conv: uniform(&mut rng, di * k, fan(k)),
                    conv_bias: c.use_conv_bias.then(|| uniform(&mut rng, di, fan(k))),
                    x_proj: uniform(&mut rng, (r + 2 * n) * di, fan(di)),
                    dt_proj: uniform(&mut rng, di * r, fan(r)),
                    // inverse softplus: softplus(bias) = dt
                    dt_proj_bias: dt.iter().map(|&v| v + (-(-v).exp_m1()).ln()).collect(),
                    a_log: (0..di * n)
                        .map(|i| ((i % n + 1) as f32).ln() + rng.random_range(-0.1..0.1))
                        .collect(),
                    d: around(&mut rng, di, 1.0, 0.1),
                    out_proj: uniform(&mut rng, d * di, fan(di) / (c.n_layer as f32).sqrt()),
                    out_proj_bias: c.use_bias.then(|| uniform(&mut rng, d, fan(di))),
                }
            })
            .collect();
        let embedding = uniform(&mut rng, c.vocab_size * d, 0.02 * 3f32.sqrt());
        let norm_f = around(&mut rng, d, 1.0, 0.1);
        let lm_head = (!c.tie_embeddings).then(|| uniform(&mut rng, c.vocab_size * d, fan(d)));
        let mut h = blake3::Hasher::new();
        h.update(format!("random {seed} {c:?}").as_bytes());
        let fingerprint = *h.finalize().as_bytes();
        Self { config: c.clone(), embedding, layers, norm_f, lm_head, fingerprint }
    }
}
