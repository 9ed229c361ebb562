//! The golden fixtures in `tests/fixtures/` (made by `tools/fixtures/make_fixtures.py` with HF
//! transformers), embedded with `include_bytes!` so the same tests run in the browser.

use safetensors::SafeTensors;
use webmamba::{Checkpoint, GpuContext, GpuModel, GpuModelOptions, WeightFormat};

/// One fixture model folder and HF's outputs for it.
pub struct Fixture {
    pub name: &'static str,
    pub config: &'static [u8],
    /// Safetensors files as (file name, bytes).
    pub weights: Vec<(&'static str, &'static [u8])>,
    /// `model.safetensors.index.json` for sharded checkpoints.
    pub index: Option<&'static [u8]>,
    pub tokenizer: &'static [u8],
    reference: &'static [u8],
}

/// HF's outputs for a fixture (see the script's docstring).
pub struct Reference {
    /// Random token ids. (L)
    pub ids: Vec<u32>,
    /// Logits at every position. (L, V)
    pub logits: Vec<f32>,
    /// `tokenizer.encode("Once upon a time")`. (P)
    pub prompt_ids: Vec<u32>,
    /// HF's greedy continuation of `prompt_ids`. (G)
    pub greedy_ids: Vec<u32>,
    /// Hybrid fixtures: the last position's logits of each of HF's greedy steps, each a whole
    /// re-run of the sequence without a cache. (G, V)
    pub step_logits: Option<Vec<f32>>,
}

macro_rules! file {
    ($dir:literal, $file:literal) => {
        include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/", $dir, "/", $file))
    };
}

macro_rules! single {
    ($name:literal) => {
        Fixture {
            name: $name,
            config: file!($name, "config.json"),
            weights: vec![("model.safetensors", file!($name, "model.safetensors"))],
            index: None,
            tokenizer: file!($name, "tokenizer.json"),
            reference: file!($name, "reference.safetensors"),
        }
    };
}

/// Names of every fixture folder (a native test checks this against `tests/fixtures/`).
pub const NAMES: &[&str] = &[
    "tiny-f32",
    "bias-untied-bf16",
    "wide-f16",
    "medium-bf16",
    "original-sharded",
    "intermediate-f32",
    "falcon-f32",
    "falcon-bias-bf16",
    "mamba2-f32",
    "mamba2-bias-bf16",
    "mamba2-groups-f16",
];

/// Names of the hybrid fixtures (SSM + attention, MLP, mixtures of experts; Qwen3.5's).
pub const HYBRID_NAMES: &[&str] = &[
    "granite-h-rope-moe-f32",
    "granite-h-nope-legacy-bf16",
    "bamba-partial-rope-f16",
    "nemotron-h-moe-bf16",
    "nemotron-h-dense-f32",
    "jamba-moe-bf16",
    "falcon-h1-mup-bf16",
    "falcon-h1-gatednorm-f16",
    "zamba2-shared-f16",
    "lfm2-f32",
    "lfm2-bf16",
    "qwen35-text-f32",
    "qwen35-vl-bf16",
    "qwen35-gattn-f32",
];

/// Every hybrid fixture.
pub fn hybrids() -> Vec<Fixture> {
    vec![
        single!("granite-h-rope-moe-f32"),
        single!("granite-h-nope-legacy-bf16"),
        single!("bamba-partial-rope-f16"),
        single!("nemotron-h-moe-bf16"),
        single!("nemotron-h-dense-f32"),
        single!("jamba-moe-bf16"),
        single!("falcon-h1-mup-bf16"),
        single!("falcon-h1-gatednorm-f16"),
        single!("zamba2-shared-f16"),
        single!("lfm2-f32"),
        single!("lfm2-bf16"),
        single!("qwen35-text-f32"),
        single!("qwen35-vl-bf16"),
        single!("qwen35-gattn-f32"),
    ]
}

/// The fixtures a repeated variant runs on here: every one natively, only `browser` (by name) in
/// a browser. For variants the native run covers on every fixture (the second matmul kernel set,
/// rounded formats and caches, split matrices, resumed sessions): the browser runs the same Rust
/// and WGSL, its own adapter is checked on this sample, and `npm test` stays within CI's time.
pub fn natively_all(fixtures: Vec<Fixture>, browser: &[&str]) -> Vec<Fixture> {
    if cfg!(target_arch = "wasm32") {
        let kept: Vec<Fixture> = fixtures.into_iter().filter(|f| browser.contains(&f.name)).collect();
        assert_eq!(
            kept.len(),
            browser.len(),
            "a browser sample names a fixture that does not exist: {browser:?}"
        );
        kept
    } else {
        fixtures
    }
}

/// The browser's sample of the Mamba fixtures: Mamba-1 (bf16), Falcon-Mamba, Mamba-2 (groups).
pub const BROWSER_MAMBA: &[&str] = &["medium-bf16", "falcon-bias-bf16", "mamba2-groups-f16"];

/// The browser's sample of the hybrids: between them Mamba-1 and Mamba-2 mixers, attention with
/// RoPE, experts, MLPs, Falcon-H1's parallel block and Zamba2's shared one.
pub const BROWSER_HYBRIDS: &[&str] =
    &["granite-h-rope-moe-f32", "jamba-moe-bf16", "falcon-h1-mup-bf16", "zamba2-shared-f16"];

/// Every fixture.
pub fn all() -> Vec<Fixture> {
    vec![
        single!("tiny-f32"),
        single!("bias-untied-bf16"),
        single!("wide-f16"),
        single!("medium-bf16"),
        Fixture {
            name: "original-sharded",
            config: file!("original-sharded", "config.json"),
            weights: vec![
                (
                    "model-00001-of-00002.safetensors",
                    file!("original-sharded", "model-00001-of-00002.safetensors"),
                ),
                (
                    "model-00002-of-00002.safetensors",
                    file!("original-sharded", "model-00002-of-00002.safetensors"),
                ),
            ],
            index: Some(file!("original-sharded", "model.safetensors.index.json")),
            tokenizer: file!("original-sharded", "tokenizer.json"),
            reference: file!("original-sharded", "reference.safetensors"),
        },
        single!("intermediate-f32"),
        single!("falcon-f32"),
        single!("falcon-bias-bf16"),
        single!("mamba2-f32"),
        single!("mamba2-bias-bf16"),
        single!("mamba2-groups-f16"),
    ]
}

/// The shared tokenizer's encode/decode cases (JSON).
pub const TOKENIZER_CASES: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tokenizer_cases.json"));

impl Fixture {
    /// The weight files as owned (name, bytes), as a loader receives them.
    pub fn weight_files(&self) -> Vec<(String, Vec<u8>)> {
        self.weights.iter().map(|(n, b)| (n.to_string(), b.to_vec())).collect()
    }

    /// Parses the checkpoint exactly as an application would from fetched bytes.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint::from_bytes(self.config, self.weight_files(), self.index, Some(self.tokenizer.to_vec()))
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    /// The smallest GPU weight format that holds the fixture's weights exactly: f32 for f32
    /// files, else f16 (bf16 → f16 is exact in f16's normal range).
    pub fn exact_format(&self) -> WeightFormat {
        let has_f32 = self.checkpoint().layout.planned().any(|p| p.dtype == safetensors::Dtype::F32);
        if has_f32 { WeightFormat::F32 } else { WeightFormat::F16 }
    }

    /// The fixture on the GPU with `options` (a failed load panics, naming the fixture).
    pub async fn load_gpu(&self, ctx: &GpuContext, options: GpuModelOptions) -> GpuModel {
        GpuModel::load(ctx, &self.checkpoint(), options)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
    }

    /// HF's outputs.
    pub fn reference(&self) -> Reference {
        let st = SafeTensors::deserialize(self.reference).expect("reference.safetensors");
        let i32s = |name: &str| -> Vec<u32> {
            let t = st.tensor(name).expect(name);
            t.data().chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap()) as u32).collect()
        };
        let logits = st.tensor("logits").expect("logits");
        Reference {
            ids: i32s("ids"),
            logits: bytemuck::pod_collect_to_vec(logits.data()),
            prompt_ids: i32s("prompt_ids"),
            greedy_ids: i32s("greedy_ids"),
            step_logits: st.tensor("step_logits").ok().map(|t| bytemuck::pod_collect_to_vec(t.data())),
        }
    }
}
