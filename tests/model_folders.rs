//! Model folders on disk as untrusted input (native only: the browser reads URLs and picked
//! files): a sharded folder streams to the same weights as memory; only regular files inside
//! the folder (or a Hugging Face cache's blobs) are read; oversized small files are refused at
//! their caps; shard names cannot leave the folder.
#![cfg(not(target_arch = "wasm32"))]

use safetensors::tensor::Dtype;
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
    webmamba::model::write_random_checkpoint(&dir, &c, 7, Dtype::BF16, 3, false).unwrap();
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
    webmamba::model::write_random_checkpoint(&dir, &c, 7, Dtype::BF16, 2, false).unwrap();
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
    webmamba::model::write_random_checkpoint(&dir, &c, 7, Dtype::BF16, 2, false).unwrap();
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
    webmamba::model::write_random_checkpoint(&dir, &c, 7, Dtype::BF16, 2, false).unwrap();
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
