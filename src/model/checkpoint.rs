//! [`Checkpoint`]: the files of a Hugging Face model folder, held in memory — `config.json`,
//! `model.safetensors` (or `model.safetensors.index.json` and its shards) and, optionally,
//! `tokenizer.json`. In a browser the app fetches these as `ArrayBuffer`s and passes the bytes;
//! natively [`Checkpoint::from_dir`] reads a folder.

use crate::error::Result;
use crate::model::config::Config;
use crate::model::tensors::TensorStore;
use crate::model::weights::ModelWeights;

/// A parsed checkpoint: its config, its tensors and, if present, its tokenizer JSON.
pub struct Checkpoint {
    /// The hyper-parameters from `config.json`.
    pub config: Config,
    /// All tensors, by name.
    pub tensors: TensorStore,
    /// `tokenizer.json`, when the checkpoint has one.
    pub tokenizer_json: Option<Vec<u8>>,
}

impl Checkpoint {
    /// From in-memory files: `config.json` bytes, the safetensors files as (name, bytes), the
    /// index JSON when the weights are sharded, and optionally `tokenizer.json`.
    pub fn from_bytes(
        config_json: &[u8],
        safetensors: Vec<(String, Vec<u8>)>,
        index_json: Option<&[u8]>,
        tokenizer_json: Option<Vec<u8>>,
    ) -> Result<Self> {
        let config = Config::from_json(config_json)?;
        let tensors = match index_json {
            Some(index) => TensorStore::from_index(index, safetensors)?,
            None => TensorStore::from_files(safetensors)?,
        };
        Ok(Self { config, tensors, tokenizer_json })
    }

    /// Reads a model folder: `config.json`, then `model.safetensors.index.json` with its shards
    /// if it exists, else `model.safetensors`, and `tokenizer.json` if it exists.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn from_dir(dir: impl AsRef<std::path::Path>) -> Result<Self> {
        let dir = dir.as_ref();
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path)
                .map_err(|e| crate::Error::Io { path: path.display().to_string(), reason: e.to_string() })
        };
        let config = read("config.json")?;
        let tokenizer = dir.join("tokenizer.json").exists().then(|| read("tokenizer.json")).transpose()?;
        if dir.join("model.safetensors.index.json").exists() {
            let index = read("model.safetensors.index.json")?;
            let mut shards: Vec<String> = crate::model::tensors::parse_index(&index)?.into_values().collect();
            shards.sort();
            shards.dedup();
            let files = shards
                .into_iter()
                .map(|name| read(&name).map(|bytes| (name, bytes)))
                .collect::<Result<Vec<_>>>()?;
            Self::from_bytes(&config, files, Some(&index), tokenizer)
        } else {
            let weights = read("model.safetensors")?;
            Self::from_bytes(&config, vec![("model.safetensors".into(), weights)], None, tokenizer)
        }
    }

    /// Reads and checks every weight the config implies.
    pub fn weights(&self) -> Result<ModelWeights> {
        ModelWeights::load(&self.config, &self.tensors)
    }
}
