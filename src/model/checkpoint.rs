//! [`Checkpoint`]: a Hugging Face model folder opened for loading — `config.json`,
//! `tokenizer.json` and the chat files ([`ChatConfig`]) when present, and the headers of `model.safetensors` (or of the shards
//! `model.safetensors.index.json` names), checked against the config ([`Layout`]). The weights
//! themselves are read later, streamed into the backend that runs them:
//! [`Checkpoint::weights`] for the CPU, [`crate::GpuModel::load`] for the GPU.

use crate::chat::ChatConfig;
use crate::error::Result;
use crate::load::files::Files;
use crate::load::host::HostSink;
use crate::load::progress::Reporter;
use crate::load::stream::{Sink, TensorStream};
use crate::model::config::Config;
use crate::model::header::parse_index;
use crate::model::layout::Layout;
use crate::model::weights::ModelWeights;

/// A checkpoint whose headers have been read and checked.
pub struct Checkpoint {
    /// The hyper-parameters from `config.json`.
    pub config: Config,
    /// Every file's tensors and what the model uses them for.
    pub layout: Layout,
    /// `tokenizer.json`, when the checkpoint has one.
    pub tokenizer_json: Option<Vec<u8>>,
    /// The chat template, special tokens and end-of-turn ids (`tokenizer_config.json`,
    /// `chat_template.jinja`, `generation_config.json`, config.json's `eos_token_id`).
    pub chat: ChatConfig,
    files: Files,
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
        let names: Vec<String> = safetensors.iter().map(|(n, _)| n.clone()).collect();
        let files = Files::Memory(safetensors);
        let weight_map = index_json.map(parse_index).transpose()?;
        let headers = names.iter().map(|n| files.header(n)).collect::<Result<Vec<_>>>()?;
        let layout = Layout::new(&config, headers, weight_map.as_ref())?;
        let chat = ChatConfig::from_files(None, None, None, Some(config_json))?;
        Ok(Self { config, layout, tokenizer_json, chat, files })
    }

    /// From a config built in code (a kind no config.json names: the tests' toy kind,
    /// `blocks/toy/`) and in-memory safetensors files.
    #[cfg(all(test, not(target_arch = "wasm32")))]
    pub(crate) fn from_config(config: Config, safetensors: Vec<(String, Vec<u8>)>) -> Result<Self> {
        let names: Vec<String> = safetensors.iter().map(|(n, _)| n.clone()).collect();
        let files = Files::Memory(safetensors);
        let headers = names.iter().map(|n| files.header(n)).collect::<Result<Vec<_>>>()?;
        let layout = Layout::new(&config, headers, None)?;
        let chat = ChatConfig::from_files(None, None, None, None)?;
        Ok(Self { config, layout, tokenizer_json: None, chat, files })
    }

    /// From a GGUF file in memory (`name` for errors): the config from its metadata, its
    /// tensors under the names HF gives them.
    pub fn from_gguf_bytes(name: &str, bytes: Vec<u8>) -> Result<Self> {
        Self::from_gguf(Files::Memory(vec![(name.to_string(), bytes)]), name)
    }

    /// Opens a GGUF file.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn from_gguf_file(path: impl AsRef<std::path::Path>) -> Result<Self> {
        let path = path.as_ref();
        let bad = |reason: &str| crate::error::Error::Io {
            path: path.display().to_string(),
            reason: reason.into(),
        };
        let name = path.file_name().and_then(|n| n.to_str()).ok_or_else(|| bad("not a file name"))?;
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(".".as_ref());
        Self::from_gguf(Files::Dir(dir.to_path_buf()), name)
    }

    fn from_gguf(files: Files, name: &str) -> Result<Self> {
        let opened = crate::load::gguf::open::open(&files, name)?;
        let config = Config::from_json(&opened.config_json)?;
        let layout = Layout::new(&config, opened.files, None)?;
        // The tokenizer, chat template and special tokens from `tokenizer.*` metadata, as the
        // HF files a folder would have.
        let tok = crate::load::gguf::tokenizer::from_metadata(&opened.metadata)?;
        let chat = ChatConfig::from_files(
            Some(&tok.tokenizer_config_json),
            None,
            tok.generation_config_json.as_deref(),
            Some(&opened.config_json),
        )?;
        Ok(Self { config, layout, tokenizer_json: tok.tokenizer_json, chat, files })
    }

    /// Opens a model folder (or a `.gguf` file: [`Checkpoint::from_gguf_file`]): `config.json`, then `model.safetensors` if it exists, else
    /// `model.safetensors.index.json` with its shards (the browser's loader asks in the same
    /// order), and `tokenizer.json` if it exists. Only headers are read here.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn from_dir(dir: impl AsRef<std::path::Path>) -> Result<Self> {
        use crate::error::Error;
        use crate::model::header::shard_names;
        let dir = dir.as_ref();
        if dir.extension().is_some_and(|e| e.eq_ignore_ascii_case("gguf")) && !dir.is_dir() {
            return Self::from_gguf_file(dir);
        }
        let files = Files::Dir(dir.to_path_buf());
        let config_json = files.read_small("config.json")?.ok_or_else(|| Error::Io {
            path: dir.join("config.json").display().to_string(),
            reason: "not found".into(),
        })?;
        let config = Config::from_json(&config_json)?;
        let tokenizer_json = files.read_small("tokenizer.json")?;
        let single = dir.join("model.safetensors").is_file();
        let index = if single { None } else { files.read_small("model.safetensors.index.json")? };
        let (names, weight_map) = match index {
            Some(index) => {
                let map = parse_index(&index)?;
                (shard_names(&map), Some(map))
            }
            None => (vec!["model.safetensors".to_string()], None),
        };
        let headers = names.iter().map(|n| files.header(n)).collect::<Result<Vec<_>>>()?;
        let layout = Layout::new(&config, headers, weight_map.as_ref())?;
        // As the browser's loader: chat_template.jinja only where tokenizer_config.json has no
        // template (`wants_template_file`).
        let tokenizer_config = files.read_small("tokenizer_config.json")?;
        let chat_template = match crate::chat::wants_template_file(tokenizer_config.as_deref()) {
            true => files.read_small("chat_template.jinja")?,
            false => None,
        };
        let chat = ChatConfig::from_files(
            tokenizer_config.as_deref(),
            chat_template.as_deref(),
            files.read_small("generation_config.json")?.as_deref(),
            Some(&config_json),
        )?;
        Ok(Self { config, layout, tokenizer_json, chat, files })
    }

    /// Reads every weight into memory for the CPU backend (matrices kept as stored).
    pub fn weights(&self) -> Result<ModelWeights> {
        self.weights_reporting(&mut Reporter::silent())
    }

    /// Like [`Checkpoint::weights`], reporting progress.
    pub fn weights_reporting(&self, reporter: &mut Reporter) -> Result<ModelWeights> {
        let mut sink = HostSink::new(&self.layout)?;
        let fingerprint = self.stream(&mut sink, reporter)?;
        sink.finish(&self.config, &self.layout, fingerprint)
    }

    /// Streams every file's data into `sink`; returns the model's fingerprint.
    pub(crate) fn stream(&self, sink: &mut dyn Sink, reporter: &mut Reporter) -> Result<[u8; 32]> {
        let mut stream = TensorStream::new(&self.layout, reporter);
        self.files.stream(&self.layout, &mut stream, sink)?;
        Ok(stream.fingerprint(&self.config))
    }
}
