//! GGUF files made by llama.cpp (`tools/fixtures/gguf_fixtures.py`: HF models converted by
//! llama.cpp's own converter and `llama-quantize`) against HF transformers running the weights
//! the file holds (dequantized by gguf-py, the converter's transforms undone, checked exact on
//! the F32 files), on the CPU and the GPU; and ggml's block types decoded as gguf-py decodes
//! them (`tools/fixtures/gguf_blocks.py`).

mod common;

use common::{assert_close, log};
use safetensors::SafeTensors;
use webmamba::cpu::ops::argmax;
use webmamba::load::gguf::{GgmlType, dequant::dequantize};
use webmamba::{
    Checkpoint, CpuModel, GpuContext, GpuModel, GpuModelOptions, Logits, Matmul, State, WeightFormat,
};

macro_rules! gguf {
    ($name:literal) => {
        (
            $name,
            include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gguf/", $name, ".gguf"))
                .as_slice(),
            include_bytes!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/gguf/",
                $name,
                ".reference.safetensors"
            ))
            .as_slice(),
        )
    };
}

/// (name, file, HF's reference) of every GGUF fixture webmamba reads.
fn fixtures() -> Vec<(&'static str, &'static [u8], &'static [u8])> {
    vec![
        gguf!("mamba-tiny-F32"),
        gguf!("falcon-mamba-tiny-F32"),
        gguf!("mamba2-tiny-F32"),
        gguf!("mamba-d256-Q8_0"),
        gguf!("mamba-d256-Q4_0"),
        gguf!("mamba-d256-Q4_K_M"),
        gguf!("mamba-d256-Q6_K"),
        gguf!("mamba2-d256-Q8_0"),
        gguf!("mamba2-d256-Q4_K_M"),
        gguf!("lfm2-tiny-F32"),
        gguf!("lfm2-d256-Q8_0"),
        gguf!("lfm2-d256-Q4_K_M"),
        gguf!("falcon-h1-tiny-F32"),
        gguf!("falcon-h1-d256-Q8_0"),
        gguf!("falcon-h1-d256-Q4_K_M"),
        gguf!("nemotron-h-tiny-F32"),
        gguf!("nemotron-h-d256-Q8_0"),
        gguf!("nemotron-h-d256-Q4_K_M"),
        gguf!("nemotron-h-d256-Q5_K_M"),
        gguf!("nemotron-h-d256-Q4_1"),
        gguf!("nemotron-h-moe-tiny-F32"),
        gguf!("granite-h-tiny-F32"),
        gguf!("granite-h-d256-Q8_0"),
        gguf!("granite-h-d256-Q4_0"),
        gguf!("granite-h-d256-Q4_K_M"),
        gguf!("granite-h-d256-Q6_K"),
        gguf!("bamba-tiny-F32"),
        gguf!("jamba-tiny-F32"),
        gguf!("jamba-d256-Q8_0"),
        gguf!("jamba-d256-Q4_K_M"),
    ]
}

struct Reference {
    ids: Vec<u32>,
    logits: Vec<f32>,
    prompt_ids: Vec<u32>,
    greedy_ids: Vec<u32>,
}

fn reference(bytes: &[u8]) -> Reference {
    let st = SafeTensors::deserialize(bytes).expect("reference");
    let ids = |name: &str| -> Vec<u32> {
        bytemuck::pod_collect_to_vec::<u8, i32>(st.tensor(name).expect(name).data())
            .into_iter()
            .map(|i| i as u32)
            .collect()
    };
    Reference {
        ids: ids("ids"),
        logits: bytemuck::pod_collect_to_vec(st.tensor("logits").expect("logits").data()),
        prompt_ids: ids("prompt_ids"),
        greedy_ids: ids("greedy_ids"),
    }
}

/// Logits at every position and the greedy continuation, on the CPU (`None`) or the GPU.
async fn run(
    ctx: Option<&GpuContext>,
    matmul: Matmul,
    name: &str,
    ck: &Checkpoint,
    r: &Reference,
) -> (Vec<f32>, Vec<u32>) {
    match ctx {
        None => {
            let m = CpuModel::new(ck.weights().unwrap());
            let logits = m.forward(&r.ids, &mut State::zeros(m.config()), Logits::All).unwrap();
            let mut state = State::zeros(m.config());
            let mut last = m.forward(&r.prompt_ids, &mut state, Logits::Last).unwrap();
            let mut greedy = Vec::new();
            for _ in 0..r.greedy_ids.len() {
                greedy.push(argmax(&last).unwrap() as u32);
                last = m.forward(&greedy[greedy.len() - 1..], &mut state, Logits::Last).unwrap();
            }
            (logits, greedy)
        }
        Some(ctx) => {
            let options = GpuModelOptions { weights: WeightFormat::F32, matmul, ..Default::default() };
            let mut m = GpuModel::load(ctx, ck, options).await.unwrap();
            // A quantized file's matrices are computed on in its own blocks.
            let quant = name.rsplit('-').next().unwrap().trim_end_matches("_M");
            if quant != "F32" {
                assert!(m.numerics().contains(quant), "{name}: {} keeps {quant} blocks", m.numerics());
            }
            log(&format!("[gguf] {name}: {} · {} weight bytes on the GPU", m.numerics(), m.memory().weights));
            let logits = m.forward(&r.ids, Logits::All).await.unwrap();
            m.reset_state();
            let mut last = m.forward(&r.prompt_ids, Logits::Last).await.unwrap();
            let mut greedy = Vec::new();
            for _ in 0..r.greedy_ids.len() {
                greedy.push(argmax(&last).unwrap() as u32);
                last = m.forward(&greedy[greedy.len() - 1..], Logits::Last).await.unwrap();
            }
            (logits, greedy)
        }
    }
}

async fn llama_cpp_files_match_hf(ctx: Option<&GpuContext>) {
    for (name, file, expected) in fixtures() {
        let ck = Checkpoint::from_gguf_bytes(&format!("{name}.gguf"), file.to_vec())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let r = reference(expected);
        // The GPU's kernels for software adapters (Auto there), and natively the real GPUs' too.
        let kernels: &[Matmul] = match ctx {
            Some(_) if cfg!(not(target_arch = "wasm32")) => &[Matmul::Auto, Matmul::Tiled],
            _ => &[Matmul::Auto],
        };
        for &matmul in kernels {
            let (logits, greedy) = run(ctx, matmul, name, &ck, &r).await;
            let engine = if ctx.is_some() { format!("GPU ({matmul:?})") } else { "CPU".into() };
            let what = format!("{name}: {engine} vs HF logits ({} positions)", r.ids.len());
            assert_close(&what, &logits, &r.logits, 1e-4, 0.0);
            assert_eq!(greedy, r.greedy_ids, "{name}: {engine} greedy continuation vs HF's");
            log(&format!("[gguf] {name}: {engine} logits and {} greedy tokens match HF", greedy.len()));
        }
    }
}

dual_backend_test!(llama_cpp_files_match_hf);

dual_test! {
    async fn every_block_type_decodes_as_gguf_py_does() {
    let file = include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/ggml_blocks.safetensors"));
    let st = SafeTensors::deserialize(file).unwrap();
    let types = [
        (0, "F32"),
        (1, "F16"),
        (30, "BF16"),
        (2, "Q4_0"),
        (3, "Q4_1"),
        (6, "Q5_0"),
        (7, "Q5_1"),
        (8, "Q8_0"),
        (12, "Q4_K"),
        (13, "Q5_K"),
        (14, "Q6_K"),
    ];
    for (id, name) in types {
        let ty = GgmlType::from_id(id).unwrap();
        assert_eq!(ty.name(), name);
        let bytes = st.tensor(&format!("{name}.bytes")).unwrap().data().to_vec();
        let want: Vec<f32> =
            bytemuck::pod_collect_to_vec(st.tensor(&format!("{name}.values")).unwrap().data());
        let mut got = Vec::new();
        dequantize(ty, &bytes, &mut got);
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(g.to_bits() == w.to_bits(), "{name} element {i}: {g} vs gguf-py's {w}");
        }
    }
}
}
