//! Seeded random checkpoints of any shape, for tests and benchmarks at real sizes (the 130M or
//! 790M shape) without shipping weights: [`Checkpoint::random`] in memory, and natively
//! [`write_random_checkpoint`], a model folder in the Hugging Face layout (config.json, sharded
//! safetensors in f32/f16/bf16, a word-level tokenizer.json) written tensor by tensor, so a
//! 1.6 GB checkpoint needs one tensor's worth of memory.
//!
//! Scales follow Mamba's initialisation so activations stay in the range of a trained model:
//! PyTorch's default `Linear` init (uniform ±1/√fan_in), `out_proj` divided by √n_layer (the
//! prenorm-residual rescale), Δ's bias so that softplus(bias) ∈ [0.001, 0.1], `A_log = log(n)`
//! per state index with a little noise, `D ≈ 1`, norm gains ≈ 1, embeddings ~ ±0.02·√3. Every
//! channel differs, so indexing bugs show.

use rand::{Rng, SeedableRng, rngs::SmallRng};
use safetensors::Dtype;

use crate::error::{Error, Result};
use crate::gpu_model::WeightFormat;
use crate::model::checkpoint::Checkpoint;
use crate::model::config::Config;
use crate::model::part::{MlpPart, Part};

/// One tensor to generate: its name, shape and how to fill it.
struct Spec {
    name: String,
    shape: Vec<usize>,
    fill: Fill,
    /// A weight matrix (the GPU stores it in the weight format), not a small vector.
    matrix: bool,
}

/// What the weights of a written checkpoint are.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Values {
    /// Seeded random values at Mamba's initialisation scales.
    #[default]
    Random,
    /// Every weight 0, the data sections left as holes (sparse files: instant, no disk): for
    /// tests of models too large to load.
    Zeros,
    /// Like `Random`, but every weight matrix on the grid the GPU's smallest formats store
    /// exactly, so a model loaded with `weights: "q4"` computes what the CPU reference computes
    /// from the file: a matrix stored in q4 ([`WeightFormat::for_shape`]) holds, per group of 64,
    /// values k·2^e, k in −8..=7, both ends present (Q4_1's m is then −8·2^e and its d 2^e); one
    /// that falls back to int8 holds, per 32 along a row, k·2^e, |k| ≤ 127, with ±127·2^e present
    /// (int8's scale is then 127·2^e). 2^e is the largest power of two within the matrix's init
    /// bound / 7 (or / 127). Exact in bf16, f16 and f32.
    Q4Grid,
}

#[derive(Clone, Copy)]
enum Fill {
    /// Uniform in ±bound.
    Uniform(f32),
    /// Uniform in center ± spread.
    Around(f32, f32),
    /// Δ's bias: the inverse softplus of a log-uniform step in [0.001, 0.1].
    DtBias,
    /// A_log: log(n + 1) for state index n, ± 0.1.
    ALog(usize),
}

/// Every tensor of a Hugging Face `MambaForCausalLM` (or `Mamba2ForCausalLM`) of shape `c`, in
/// the order they are generated and written: each block's as its kind lists them, then the
/// embedding, the final norm and an untied LM head.
fn specs(c: &Config) -> Vec<Spec> {
    let (d, v) = (c.d_model, c.vocab_size);
    let fan = |x: usize| 1.0 / (x as f32).sqrt();
    let mut out = Vec::new();
    for block in &c.blocks {
        let tensors = block.tensors(d);
        // A bias is initialised from its weight's fan-in.
        let cols_of = |part: Part, dim: usize| {
            tensors.iter().find(|t| t.part == part).map_or(1, |t| t.shape.get(dim).copied().unwrap_or(1))
        };
        for t in tensors.iter().filter(|t| t.present) {
            let fill = match t.part {
                Part::Norm | Part::D | Part::GatedNorm => Fill::Around(1.0, 0.1),
                Part::InProj | Part::XProj | Part::DtProj => Fill::Uniform(fan(t.shape[1])),
                Part::InProjBias => Fill::Uniform(fan(cols_of(Part::InProj, 1))),
                Part::Conv => Fill::Uniform(fan(t.shape[2])),
                Part::ConvBias => Fill::Uniform(fan(cols_of(Part::Conv, 2))),
                // Δ's bias, in Mamba-1 (dt_proj.bias) and Mamba-2 (dt_bias, per head).
                Part::DtProjBias | Part::DtBias => Fill::DtBias,
                // A_log: log(n + 1) over the state index (Mamba-1), over the heads (Mamba-2,
                // HF's A = 1..H).
                Part::ALog => Fill::ALog(*t.shape.last().unwrap_or(&1)),
                Part::OutProj => Fill::Uniform(fan(t.shape[1]) / (c.n_layer() as f32).sqrt()),
                Part::OutProjBias => Fill::Uniform(fan(cols_of(Part::OutProj, 1))),
                Part::DtNorm | Part::BNorm | Part::CNorm => Fill::Around(1.0, 0.1),
                // The hybrids' matrices: uniform by their fan-in (the last dimension); the
                // output projections also by depth, as out_proj.
                Part::O
                | Part::Mlp(MlpPart::Down)
                | Part::Expert(_, MlpPart::Down)
                | Part::Experts(MlpPart::Down) => {
                    Fill::Uniform(fan(t.shape[t.shape.len() - 1]) / (c.n_layer() as f32).sqrt())
                }
                Part::Q
                | Part::K
                | Part::V
                | Part::Mlp(_)
                | Part::Router
                | Part::Expert(..)
                | Part::Experts(_)
                | Part::Adapter { .. }
                | Part::Linear
                | Part::Gate
                | Part::Beta
                | Part::DtIn => Fill::Uniform(fan(t.shape[t.shape.len() - 1])),
                Part::SharedNorm | Part::SharedFfNorm | Part::QNorm | Part::KNorm => Fill::Around(1.0, 0.1),
                Part::QBias | Part::KBias | Part::VBias | Part::OBias | Part::RouterBias => {
                    Fill::Uniform(0.02)
                }
            };
            let matrix = t.part.is_matrix();
            out.push(Spec { name: t.leaf.clone(), shape: t.shape.clone(), fill, matrix });
        }
    }
    let mut add = |name: &str, shape: Vec<usize>, fill, matrix| {
        out.push(Spec { name: name.into(), shape, fill, matrix })
    };
    add(c.names.embedding, vec![v, d], Fill::Uniform(0.02 * 3f32.sqrt()), true);
    add(c.names.norm_f, vec![d], Fill::Around(1.0, 0.1), false);
    if !c.tie_embeddings {
        add("lm_head.weight", vec![v, d], Fill::Uniform(fan(d)), true);
    }
    out
}

/// The values of `spec`, from `rng` (`grid`: a matrix on [`Values::Q4Grid`]'s grid).
fn generate(rng: &mut SmallRng, spec: &Spec, grid: bool) -> Vec<f32> {
    let len: usize = spec.shape.iter().product();
    let cols = spec.shape.last().copied().unwrap_or(1);
    if let (true, true, Fill::Uniform(bound)) = (grid, spec.matrix, spec.fill) {
        // Per group, k·step with k in low..=high and the ends present: q4 (Q4_1 per 64: its m
        // is then −8·step, its d step) or, where q4 falls back, int8 (per 32 along a row: its
        // scale is then 127·step), as the GPU stores this matrix when asked for q4.
        let (group, low, high) = match WeightFormat::Q4.for_shape(len / cols.max(1), cols) {
            WeightFormat::Q4 => (64, -8i32, 7i32),
            WeightFormat::Int8 => (32, -127, 127),
            _ => (0, 0, 0),
        };
        if group != 0 {
            let step = (bound / high as f32).log2().floor().exp2();
            let mut out: Vec<f32> = (0..len).map(|_| rng.random_range(low..=high) as f32 * step).collect();
            for g in out.chunks_mut(group) {
                let at = rng.random_range(0..g.len() - 1);
                (g[at], g[at + 1]) = (low as f32 * step, high as f32 * step);
            }
            return out;
        }
    }
    match spec.fill {
        Fill::Uniform(bound) => (0..len).map(|_| rng.random_range(-bound..=bound)).collect(),
        Fill::Around(center, spread) => {
            (0..len).map(|_| center + rng.random_range(-spread..=spread)).collect()
        }
        Fill::DtBias => (0..len)
            .map(|_| {
                let dt = rng.random_range(0.001f32.ln()..0.1f32.ln()).exp();
                dt + (-(-dt).exp_m1()).ln() // inverse softplus: softplus(bias) = dt
            })
            .collect(),
        Fill::ALog(n) => (0..len).map(|i| ((i % n + 1) as f32).ln() + rng.random_range(-0.1..0.1)).collect(),
    }
}

/// `values` as little-endian bytes of `dtype` (F32, F16 or BF16).
fn encode(values: &[f32], dtype: Dtype) -> Result<Vec<u8>> {
    Ok(match dtype {
        Dtype::F32 => bytemuck::cast_slice(values).to_vec(),
        Dtype::F16 => values.iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect(),
        Dtype::BF16 => values.iter().flat_map(|&v| half::bf16::from_f32(v).to_le_bytes()).collect(),
        other => {
            return Err(Error::InvalidInput(format!("random checkpoints are F32, F16 or BF16, not {other}")));
        }
    })
}

/// A safetensors header (8-byte length + JSON) for `specs` stored as `dtype`, data in order.
fn header(specs: &[&Spec], dtype: Dtype) -> Vec<u8> {
    let mut table = serde_json::Map::new();
    let mut at = 0usize;
    for s in specs {
        let bytes = s.shape.iter().product::<usize>() * (dtype.bitsize() / 8);
        table.insert(
            s.name.clone(),
            serde_json::json!({ "dtype": dtype.to_string(), "shape": s.shape, "data_offsets": [at, at + bytes] }),
        );
        at += bytes;
    }
    let mut json = serde_json::Value::Object(table).to_string().into_bytes();
    // Pad with spaces to 8 bytes, as the safetensors writer does.
    json.resize(json.len().div_ceil(8) * 8, b' ');
    let mut out = (json.len() as u64).to_le_bytes().to_vec();
    out.extend(json);
    out
}

/// The `config.json` text of `config` when [`Config::to_hf_json`] can write it (the pure Mamba
/// families); a hybrid's config.json is not derived from its `Config` — the caller passes the
/// text (`*_json` functions, e.g. with a [`crate::model::published`] config).
fn mamba_json(config: &Config) -> Result<String> {
    if config.arch.is_pure_mamba() {
        Ok(config.to_hf_json())
    } else {
        Err(Error::InvalidInput(format!(
            "a random {} checkpoint needs its config.json text (Checkpoint::random_from_json, \
             write_random_checkpoint_json)",
            config.arch.name()
        )))
    }
}

impl Checkpoint {
    /// A seeded random model of shape `config` in memory, stored as `dtype` (F32, F16 or BF16),
    /// in one `model.safetensors`, without a tokenizer. Pure Mamba configs only (their
    /// config.json is [`Config::to_hf_json`]); a hybrid: [`Checkpoint::random_from_json`].
    pub fn random(config: &Config, seed: u64, dtype: Dtype) -> Result<Checkpoint> {
        Checkpoint::random_from_json(&mamba_json(config)?, seed, dtype)
    }

    /// Like [`Checkpoint::random`], for the model `config_json` describes (any family), with
    /// that text as its config.json.
    pub fn random_from_json(config_json: &str, seed: u64, dtype: Dtype) -> Result<Checkpoint> {
        let specs = specs(&Config::from_json(config_json.as_bytes())?);
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut file = header(&specs.iter().collect::<Vec<_>>(), dtype);
        for spec in &specs {
            file.extend(encode(&generate(&mut rng, spec, false), dtype)?);
        }
        Checkpoint::from_bytes(config_json.as_bytes(), vec![("model.safetensors".into(), file)], None, None)
    }
}

/// A word-level `tokenizer.json` of `vocab` tokens (`t0`, `t1`, …; whitespace-separated), for
/// random checkpoints of any vocabulary.
#[cfg(not(target_arch = "wasm32"))]
pub(crate) fn word_level_tokenizer(vocab: usize) -> String {
    let words: serde_json::Map<String, serde_json::Value> =
        (0..vocab).map(|i| (format!("t{i}"), serde_json::Value::from(i))).collect();
    serde_json::json!({
        "version": "1.0",
        "added_tokens": [],
        "normalizer": null,
        "pre_tokenizer": { "type": "WhitespaceSplit" },
        "post_processor": null,
        "decoder": null,
        "model": { "type": "WordLevel", "vocab": words, "unk_token": "t0" }
    })
    .to_string()
}

/// Writes a seeded random model of shape `config` to folder `dir` in the Hugging Face layout:
/// `config.json`, `tokenizer.json` (word-level), and the weights as `dtype` in `shards` files
/// (`model-0000i-of-0000n.safetensors` with `model.safetensors.index.json` when more than one,
/// else `model.safetensors`), one tensor in memory at a time, with [`Values`]. Returns the
/// bytes of weights. Pure Mamba configs only (their
/// config.json is [`Config::to_hf_json`]); a hybrid: [`write_random_checkpoint_json`].
#[cfg(not(target_arch = "wasm32"))]
pub fn write_random_checkpoint(
    dir: &std::path::Path,
    config: &Config,
    seed: u64,
    dtype: Dtype,
    shards: usize,
    values: Values,
) -> Result<u64> {
    write_random_checkpoint_json(dir, &mamba_json(config)?, seed, dtype, shards, values)
}

/// Like [`write_random_checkpoint`], for the model `config_json` describes (any family),
/// written as its `config.json`.
#[cfg(not(target_arch = "wasm32"))]
pub fn write_random_checkpoint_json(
    dir: &std::path::Path,
    config_json: &str,
    seed: u64,
    dtype: Dtype,
    shards: usize,
    values: Values,
) -> Result<u64> {
    use std::io::Write;
    let zeros = values == Values::Zeros;
    let config = Config::from_json(config_json.as_bytes())?;
    let io = |path: &std::path::Path, e: std::io::Error| Error::Io {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    std::fs::create_dir_all(dir).map_err(|e| io(dir, e))?;
    let write =
        |name: &str, bytes: &[u8]| std::fs::write(dir.join(name), bytes).map_err(|e| io(&dir.join(name), e));
    write("config.json", config_json.as_bytes())?;
    write("tokenizer.json", word_level_tokenizer(config.vocab_size).as_bytes())?;
    let specs = specs(&config);
    let bytes_of = |s: &Spec| (s.shape.iter().product::<usize>() * (dtype.bitsize() / 8)) as u64;
    let total: u64 = specs.iter().map(bytes_of).sum();
    // Cut the tensor list into `shards` runs of about equal bytes.
    let shards = shards.clamp(1, specs.len());
    let mut groups: Vec<Vec<&Spec>> = vec![Vec::new(); shards];
    let mut at = 0u64;
    for s in &specs {
        let g = ((at * shards as u64) / total.max(1)) as usize;
        groups[g.min(shards - 1)].push(s);
        at += bytes_of(s);
    }
    groups.retain(|g| !g.is_empty());
    let n = groups.len();
    let name = |i: usize| {
        if n == 1 {
            "model.safetensors".to_string()
        } else {
            format!("model-{:05}-of-{n:05}.safetensors", i + 1)
        }
    };
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut weight_map = serde_json::Map::new();
    for (i, group) in groups.iter().enumerate() {
        let path = dir.join(name(i));
        let mut file = std::io::BufWriter::new(std::fs::File::create(&path).map_err(|e| io(&path, e))?);
        let head = header(group, dtype);
        file.write_all(&head).map_err(|e| io(&path, e))?;
        for spec in group {
            if !zeros {
                file.write_all(&encode(&generate(&mut rng, spec, values == Values::Q4Grid), dtype)?)
                    .map_err(|e| io(&path, e))?;
            }
            weight_map.insert(spec.name.clone(), name(i).into());
        }
        let mut file = file.into_inner().map_err(|e| io(&path, e.into_error()))?;
        if zeros {
            let data: u64 = group.iter().map(|s| bytes_of(s)).sum();
            file.set_len(head.len() as u64 + data).map_err(|e| io(&path, e))?;
        }
        file.flush().map_err(|e| io(&path, e))?;
    }
    if n > 1 {
        let index = serde_json::json!({ "metadata": { "total_size": total }, "weight_map": weight_map });
        write("model.safetensors.index.json", index.to_string().as_bytes())?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn q4_grid_is_what_q4_and_int8_store_exactly() {
        let mut rng = SmallRng::seed_from_u64(3);
        let q4 = Spec { name: "w".into(), shape: vec![4, 160], fill: Fill::Uniform(0.01), matrix: true };
        let values = generate(&mut rng, &q4, true);
        for g in values.chunks(64) {
            // Q4_1: m = the minimum, d = (max − m) / 15 — a power of two, m and d exact in f16 —
            // and every value q·d + m with q in 0..=15.
            let (lo, hi) =
                g.iter().fold((f32::INFINITY, f32::NEG_INFINITY), |(l, h), &v| (l.min(v), h.max(v)));
            let d = (hi - lo) / 15.0;
            assert!(d > 0.0 && d.log2().fract() == 0.0 && d * 7.0 <= 0.01 && d * 14.0 > 0.01, "d = {d}");
            assert_eq!((half::f16::from_f32(d).to_f32(), half::f16::from_f32(lo).to_f32()), (d, lo));
            for &v in g {
                let q = (v - lo) / d;
                assert!(q.fract() == 0.0 && (0.0..=15.0).contains(&q), "{v} = {q}·{d} + {lo}");
                assert_eq!(half::bf16::from_f32(v).to_f32(), v, "exact in bf16");
            }
        }
        // 3 rows of 160 columns (5 halves of a group a row, an odd number of rows): q4 falls
        // back to int8 (scale = the largest |w|, w = k/127·scale).
        let int8 = Spec { name: "w".into(), shape: vec![3, 160], fill: Fill::Uniform(0.01), matrix: true };
        let values = generate(&mut rng, &int8, true);
        for g in values.chunks(32) {
            let scale = g.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let step = scale / 127.0;
            assert!(step.log2().fract() == 0.0 && scale <= 0.01 && 2.0 * scale > 0.01, "scale {scale}");
            for &v in g {
                assert_eq!((v / step).fract(), 0.0, "{v} = k·{step}");
                assert_eq!(half::bf16::from_f32(v).to_f32(), v, "exact in bf16");
            }
        }
        // Vectors and matrices of other widths keep their random values.
        let vector = Spec { name: "b".into(), shape: vec![128], fill: Fill::Uniform(0.01), matrix: false };
        let odd = Spec { name: "w".into(), shape: vec![2, 20], fill: Fill::Uniform(0.01), matrix: true };
        for spec in [vector, odd] {
            let got = generate(&mut SmallRng::seed_from_u64(9), &spec, true);
            assert_eq!(got, generate(&mut SmallRng::seed_from_u64(9), &spec, false));
        }
    }
}
