//! Model folders on disk as untrusted input (native only: the browser reads URLs and picked
//! files): a sharded folder streams to the same weights as memory; only regular files inside
//! the folder (or a Hugging Face cache's blobs) are read; oversized small files are refused at
//! their caps; shard names cannot leave the folder.
#![cfg(not(target_arch = "wasm32"))]

use safetensors::tensor::Dtype;
use webmamba::model::Values;
use webmamba::{Checkpoint, Config, CpuModel, Error, GpuModel, GpuModelOptions, Logits, State, WeightFormat};

mod common;

fn config(json: &str) -> Result<Config, Error> {
    Config::from_json(json.as_bytes())
}

fn small_config() -> Config {
    config(
        r#"{"model_type":"mamba","vocab_size":500,"hidden_size":64,"num_hidden_layers":3,
            "state_size":8,"expand":2,"conv_kernel":4,"time_step_rank":4}"#,
    )
    .unwrap()
}

fn temp_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("webmamba-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn a_sharded_folder_streams_to_the_same_weights_as_memory() {
    let (c, dir) = (small_config(), temp_dir("sharded"));
    webmamba::model::write_random_checkpoint(&dir, &c, 7, Dtype::BF16, 3, Values::Random).unwrap();
    assert!(
        dir.join("model-00003-of-00003.safetensors").is_file()
            && dir.join("model.safetensors.index.json").is_file()
    );
    let from_disk = Checkpoint::from_dir(&dir).unwrap();
    assert_eq!(from_disk.layout.files.len(), 3);
    let in_memory = Checkpoint::random(&c, 7, Dtype::BF16).unwrap();
    let (disk, memory) = (from_disk.weights().unwrap(), in_memory.weights().unwrap());
    assert_eq!(disk.embedding, memory.embedding);
    assert_eq!(disk.layers[2].mixer, memory.layers[2].mixer);
    assert_eq!(disk.layers[1].norm, memory.layers[1].norm);
    assert_eq!(disk.embedding.dtype_name(), "bf16", "kept as stored");
    let ids: Vec<u32> = (0..40).map(|i| (i * 37) % 500).collect();
    let cpu = CpuModel::new(disk);
    let want = cpu.forward(&ids, &mut State::zeros(&c), Logits::All).unwrap();
    if let Some(ctx) =
        pollster::block_on(common::gpu("a_sharded_folder_streams_to_the_same_weights_as_memory"))
    {
        let options = GpuModelOptions { weights: WeightFormat::F16, ..Default::default() };
        let mut gpu = pollster::block_on(GpuModel::load(&ctx, &from_disk, options)).unwrap();
        let got = pollster::block_on(gpu.forward(&ids, Logits::All)).unwrap();
        common::assert_close("sharded folder: GPU (f16) vs CPU", &got, &want, 1e-4, 0.0);
        assert_eq!(gpu.fingerprint(), cpu.weights().fingerprint, "one fingerprint for one checkpoint");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A hostile folder's links and special files: a link out of the folder (to a valid copy of
/// the shard, so only the policy can refuse it), to `/dev/zero`, a FIFO (opening one blocks
/// until a writer comes), a folder where a file should be. Links inside the folder and the
/// Hugging Face cache's `snapshots/<rev>/x -> ../../blobs/<hash>` keep working.
#[test]
fn only_regular_files_inside_the_folder_are_read() {
    use std::os::unix::fs::symlink;
    let (c, root) = (small_config(), temp_dir("links"));
    let dir = root.join("model");
    webmamba::model::write_random_checkpoint(&dir, &c, 7, Dtype::BF16, 2, Values::Random).unwrap();
    let want = Checkpoint::from_dir(&dir).unwrap().weights().unwrap();
    let shard = dir.join("model-00002-of-00002.safetensors");
    let outside = root.join("elsewhere.safetensors");
    std::fs::rename(&shard, &outside).unwrap();
    let refused = |what: &str, needle: &str| {
        let e = Checkpoint::from_dir(&dir).err().unwrap_or_else(|| panic!("{what}: accepted"));
        assert!(matches!(&e, Error::Io { reason, .. } if reason.contains(needle)), "{what}: {e}");
    };

    symlink(&outside, &shard).unwrap();
    refused("a link out of the folder", "outside the model folder");
    std::fs::remove_file(&shard).unwrap();
    symlink("/dev/zero", &shard).unwrap();
    refused("a link to /dev/zero", "outside the model folder");
    std::fs::remove_file(&shard).unwrap();
    let fifo = std::process::Command::new("mkfifo").arg(&shard).status().unwrap();
    assert!(fifo.success());
    refused("a FIFO", "not a regular file");
    std::fs::remove_file(&shard).unwrap();
    std::fs::create_dir(&shard).unwrap();
    refused("a folder", "not a regular file");
    std::fs::remove_dir(&shard).unwrap();
    let _ = std::fs::remove_file(dir.join("tokenizer.json"));
    symlink("/etc/hostname", dir.join("tokenizer.json")).unwrap();
    std::fs::rename(&outside, &shard).unwrap();
    refused("tokenizer.json linked out of the folder", "outside the model folder");
    std::fs::remove_file(dir.join("tokenizer.json")).unwrap();

    // A link inside the folder is followed.
    std::fs::create_dir(dir.join("store")).unwrap();
    std::fs::rename(&shard, dir.join("store/shard")).unwrap();
    symlink("store/shard", &shard).unwrap();
    assert_eq!(Checkpoint::from_dir(&dir).unwrap().weights().unwrap().embedding, want.embedding);

    // The Hugging Face cache: every file of snapshots/<rev>/ links into ../../blobs/.
    let repo = root.join("models--webmamba--test");
    let (blobs, snapshot) = (repo.join("blobs"), repo.join("snapshots/0123abc"));
    std::fs::create_dir_all(&blobs).unwrap();
    std::fs::create_dir_all(&snapshot).unwrap();
    for (i, entry) in std::fs::read_dir(&dir).unwrap().enumerate() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let blob = blobs.join(format!("blob{i}"));
            std::fs::copy(&path, &blob).unwrap();
            symlink(format!("../../blobs/blob{i}"), snapshot.join(path.file_name().unwrap())).unwrap();
        }
    }
    let cached = Checkpoint::from_dir(&snapshot).unwrap().weights().unwrap();
    assert_eq!(cached.embedding, want.embedding);
    assert_eq!(cached.layers[2].mixer, want.layers[2].mixer);
    std::fs::remove_dir_all(&root).unwrap();
}

/// A hostile folder's oversized small files are refused at their caps before any byte is
/// read (sparse files: nothing is written), as the browser refuses them (web_source.rs).
#[test]
fn small_files_over_their_caps_are_refused() {
    use webmamba::load::{MAX_JSON_BYTES, MAX_TOKENIZER_BYTES};
    let (c, dir) = (small_config(), temp_dir("caps"));
    webmamba::model::write_random_checkpoint(&dir, &c, 7, Dtype::BF16, 2, Values::Random).unwrap();
    let grow = |name: &str, len: u64| std::fs::File::create(dir.join(name)).unwrap().set_len(len).unwrap();
    let refused = |name: &str, cap: u64| {
        let e = Checkpoint::from_dir(&dir).err().unwrap_or_else(|| panic!("{name}: accepted"));
        let at_most = format!("at most {cap} ");
        assert!(
            matches!(&e, Error::Io { path, reason } if path.ends_with(name) && reason.contains(&at_most)),
            "{name}: {e}"
        );
    };
    let index = std::fs::read(dir.join("model.safetensors.index.json")).unwrap();
    grow("model.safetensors.index.json", MAX_JSON_BYTES + 1);
    refused("model.safetensors.index.json", MAX_JSON_BYTES);
    std::fs::write(dir.join("model.safetensors.index.json"), index).unwrap();
    grow("tokenizer.json", MAX_TOKENIZER_BYTES + 1);
    refused("tokenizer.json", MAX_TOKENIZER_BYTES);
    grow("config.json", MAX_JSON_BYTES + 1);
    refused("config.json", MAX_JSON_BYTES);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shard_names_must_stay_inside_the_folder() {
    let (c, dir) = (small_config(), temp_dir("escape"));
    webmamba::model::write_random_checkpoint(&dir, &c, 7, Dtype::BF16, 2, Values::Random).unwrap();
    let index = dir.join("model.safetensors.index.json");
    let good = std::fs::read_to_string(&index).unwrap();
    for bad in ["../outside.safetensors", "/etc/passwd", "/dev/zero", "sub/dir.safetensors", "..", ""] {
        let json = good.replace("model-00002-of-00002.safetensors", bad);
        std::fs::write(&index, json).unwrap();
        let e = Checkpoint::from_dir(&dir).err().expect(bad);
        assert!(
            matches!(&e, Error::Safetensors { reason, .. } if reason.contains("file name")),
            "{bad:?}: {e}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The published hybrid shapes of `webmamba random --shape` (`webmamba::model::published`):
/// their config.json parses to the published sizes, and a random checkpoint of the real shape
/// (written as holes: 1 to 4 GB that no test reads) has every tensor the model needs, with the
/// config.json text written unchanged (Qwen3.5's whole multimodal file; the checkpoint holds its
/// text model only). Loading one would take 2 to 8 GB, so only headers are read.
#[test]
fn published_hybrid_shapes_have_their_sizes_and_a_consistent_layout() {
    use webmamba::blocks::BlockKind;
    use webmamba::model::published::{
        FALCON_H1_0_5B, GRANITE_4_0_H_1B, LFM2_1_2B, QWEN3_5_0_8B, QWEN3_5_2B, ZAMBA2_1_2B,
    };
    // (name, config.json, d_model, layers, blocks, attention mixers, recurrent mixers (Mamba-2,
    // short convolution, Gated DeltaNet), vocab, (total weights, tensors) where published).
    let shapes = [
        ("granite-h-1b", GRANITE_4_0_H_1B, 1536, 40, 80, 4, 36, 100352, Some((1_461_538_368u64, None))),
        ("falcon-h1-0.5b", FALCON_H1_0_5B, 1024, 36, 72, 36, 36, 32784, None),
        // Zamba2-1.2B: HF builds 406 parameters, 1,215,064,704 weights, from this config.json.
        ("zamba2-1.2b", ZAMBA2_1_2B, 2048, 38, 38, 6, 38, 32000, Some((1_215_064_704, Some(406)))),
        // LFM2-1.2B: the Hub's model.safetensors, 148 tensors of 1,170,340,608 weights.
        ("lfm2-1.2b", LFM2_1_2B, 2048, 16, 32, 6, 10, 65536, Some((1_170_340_608, Some(148)))),
        // Qwen3.5: the text model HF's Qwen3_5ForCausalLM loads from the Hub's checkpoint.
        ("qwen3.5-0.8b", QWEN3_5_0_8B, 1024, 24, 48, 6, 18, 248320, Some((752_393_024, Some(320)))),
        ("qwen3.5-2b", QWEN3_5_2B, 2048, 24, 48, 6, 18, 248320, Some((1_881_825_088, Some(320)))),
    ];
    // LFM2's and Qwen3.5's are the Hub's files byte for byte: their lengths (LFM2's as its
    // mirror's model_files.json lists it).
    for (json, bytes) in [(LFM2_1_2B, 1000), (QWEN3_5_0_8B, 2907), (QWEN3_5_2B, 2908)] {
        assert_eq!(json.len(), bytes);
    }
    for (name, json, d, layers, blocks, attention, mamba, vocab, published) in shapes {
        let c = config(json).unwrap_or_else(|e| panic!("{name}: {e}"));
        // Each layer has one mixer (attention, a recurrent one, or both side by side), then its
        // MLP; `attn_at`: the layers whose mixer is attention alone.
        let (mut attn, mut ssd, mut mixers, mut attn_at) = (0, 0, 0, Vec::new());
        for b in &c.blocks {
            if matches!(b.kind, BlockKind::Attention(_)) {
                attn_at.push(mixers);
            }
            mixers += matches!(
                b.kind,
                BlockKind::Attention(_)
                    | BlockKind::Mamba2(_)
                    | BlockKind::Parallel(_)
                    | BlockKind::Zamba2(_)
                    | BlockKind::ShortConv(_)
                    | BlockKind::DeltaNet(_)
            ) as usize;
            match &b.kind {
                BlockKind::Attention(_) => attn += 1,
                BlockKind::Mamba2(_) | BlockKind::ShortConv(_) | BlockKind::DeltaNet(_) => ssd += 1,
                BlockKind::Parallel(p) => {
                    assert_eq!((p.attention.n_heads, p.attention.n_kv_heads), (8, 2), "{name}");
                    assert_eq!(
                        (p.mamba.n_heads, p.mamba.head_dim, p.mamba.d_inner),
                        (24, 64, 1536),
                        "{name}"
                    );
                    (attn, ssd) = (attn + 1, ssd + 1);
                }
                // The shared attention (+ MLP), then the layer's own Mamba-2 mixer.
                BlockKind::Zamba2(z) => {
                    assert_eq!(
                        (z.mamba.n_heads, z.mamba.head_dim, z.mamba.d_inner),
                        (64, 64, 4096),
                        "{name}"
                    );
                    (attn, ssd) = (attn + 1, ssd + 1);
                }
                _ => {}
            }
        }
        assert_eq!((c.d_model, mixers, c.blocks.len(), c.vocab_size), (d, layers, blocks, vocab), "{name}");
        assert_eq!((attn, ssd), (attention, mamba), "{name}: attention and recurrent mixers");
        // Where the new shapes put their attention: LFM2's `full_attn_idxs`, Qwen3.5's
        // `layer_types` (every 4th layer).
        let want_at: Option<Vec<usize>> = match name {
            "lfm2-1.2b" => Some(vec![2, 5, 8, 10, 12, 14]),
            "qwen3.5-0.8b" | "qwen3.5-2b" => Some((3..24).step_by(4).collect()),
            _ => None,
        };
        if let Some(want_at) = want_at {
            assert_eq!(attn_at, want_at, "{name}: the attention layers");
        }
        // Their end-of-text token, context and tied embeddings (Qwen3.5's from `text_config`).
        let want_ends = match name {
            "lfm2-1.2b" => Some((Some(7), Some(128_000), true)),
            "qwen3.5-0.8b" | "qwen3.5-2b" => Some((Some(248_044), Some(262_144), true)),
            _ => None,
        };
        if let Some(want_ends) = want_ends {
            assert_eq!((c.eos_token_id, c.max_positions, c.tie_embeddings), want_ends, "{name}");
        }
        assert!(
            matches!(Checkpoint::random(&c, 1, Dtype::BF16), Err(Error::InvalidInput(_))),
            "{name}: a hybrid's config.json is not derived from its Config"
        );

        let dir = temp_dir(name);
        let bytes =
            webmamba::model::write_random_checkpoint_json(&dir, json, 1, Dtype::BF16, 1, Values::Zeros)
                .unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.join("config.json")).unwrap(),
            json,
            "{name}: config.json as published"
        );
        let checkpoint = Checkpoint::from_dir(&dir).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(checkpoint.config, c, "{name}: parses back to the same Config");
        let tensors = checkpoint.layout.files.iter().flat_map(|f| &f.tensors);
        let weights: u64 = tensors.clone().map(|t| t.shape.iter().product::<usize>() as u64).sum();
        assert_eq!(bytes, 2 * weights, "{name}: bf16 bytes");
        assert!(
            checkpoint.layout.roles.iter().flatten().all(Option::is_some),
            "{name}: every tensor is used"
        );
        if let Some((total, count)) = published {
            assert_eq!(weights, total, "{name}: the published weight count");
            if let Some(count) = count {
                assert_eq!(tensors.clone().count(), count, "{name}: the published tensor count");
            }
        }
        common::log(&format!("[shape] {name}: {} tensors, {weights} weights", tensors.count()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// Falcon-Mamba-7B's published config.json (`webmamba random --shape falcon-mamba-7b`, `webmamba
/// sizes`): 64 layers of 4096 with 8192 inner channels (its `expand` of 16 is not the width:
/// `intermediate_size` is, as in HF), an untied LM head, and tensors adding up to the model
/// card's 7.27B weights; in q4 (GGUF's Q4_1 per 64, 4.5 bits) its matrices take 4.13 GB.
#[test]
fn falcon_mamba_7b_shape_has_its_published_size() {
    use webmamba::model::published::FALCON_MAMBA_7B;
    let c = config(FALCON_MAMBA_7B).unwrap();
    assert_eq!((c.d_model, c.blocks.len(), c.vocab_size, c.tie_embeddings), (4096, 64, 65024, false));
    let sizes = webmamba::model::tensor_sizes(&c).unwrap();
    let weights: u64 = sizes.iter().map(|&(_, r, c)| (r * c) as u64).sum();
    assert_eq!(weights, 7_272_665_088);
    let q4 = WeightFormat::Q4.model_bytes(&c).unwrap();
    // Matrices at 4.5 bits, the small tensors (A_log, D, the conv, biases, norms) in f32.
    let small: u64 =
        sizes.iter().filter(|(role, ..)| !role.is_matrix()).map(|&(_, r, c)| (r * c) as u64).sum();
    assert_eq!(q4, (weights - small) * 9 / 16 + 4 * small);
    assert!((4.1e9..4.2e9).contains(&(q4 as f64)), "{q4}");
}
