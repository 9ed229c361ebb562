//! Which file of a folder a browser load reads as GGUF ([`Choice`]: the `file` and `quant`
//! load options, a URL ending in `.gguf`), decided from the options and the URL alone — before
//! any request ([`crate::wasm::gguf`] then opens it).

use wasm_bindgen::JsValue;

use crate::error::{Error, Result};
use crate::load::gguf::open::{is_gguf_name, plain_name};
use crate::wasm::options::field;

/// The name the integrity option gives the GGUF bytes of `Model.load`.
pub(crate) const BYTES_NAME: &str = "model.gguf";

/// Which file of a folder a load reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) enum Choice {
    /// A Hugging Face folder (`config.json`, safetensors) — or, where the folder's file names
    /// are known and it has no `config.json`, its only GGUF file.
    #[default]
    Folder,
    /// This GGUF file (`file`, or a `.gguf` URL).
    File(String),
    /// The GGUF file of this quantization type (`quant`).
    Quant(String),
}

impl Choice {
    /// The load options' `file` and `quant` (at most one of them).
    pub fn parse(options: &JsValue) -> Result<Self> {
        let string = |name: &str| -> Result<Option<String>> {
            field(options, name, "load options")?
                .map(|v| {
                    v.as_string().filter(|s| !s.is_empty()).ok_or_else(|| {
                        Error::InvalidInput(format!("options.{name} must be a non-empty string"))
                    })
                })
                .transpose()
        };
        match (string("file")?, string("quant")?) {
            (Some(_), Some(_)) => Err(Error::InvalidInput(
                "options.file and options.quant both choose the file to load: give one".into(),
            )),
            (Some(file), None) => Ok(Choice::File(plain_name(&file, "options.file")?)),
            (None, Some(quant)) => Ok(Choice::Quant(quant)),
            (None, None) => Ok(Choice::Folder),
        }
    }
}

/// The folder URL and the file name of a URL whose path ends in `.gguf` (its query and
/// fragment, if any, are not part of a folder URL: such a URL is a folder's).
pub(crate) fn split_url(url: &str) -> Option<(String, String)> {
    if url.contains(['?', '#']) {
        return None;
    }
    let (folder, name) = match url.rsplit_once('/') {
        Some((folder, name)) => (format!("{folder}/"), name),
        None => ("./".to_string(), url),
    };
    let name = js_sys::decode_uri_component(name).ok().and_then(|n| n.as_string()).unwrap_or(name.into());
    is_gguf_name(&name).then_some((folder, name))
}

/// `Model.fromUrl(url, options)`'s folder and choice: a `.gguf` URL names the file (and then
/// `file` or `quant` is `InvalidInput`).
pub(crate) fn locate(url: &str, choice: Choice) -> Result<(String, Choice)> {
    let Some((folder, name)) = split_url(url) else { return Ok((url.to_string(), choice)) };
    if choice != Choice::Folder {
        return Err(Error::InvalidInput(format!(
            "{url} names the file to load already: options.file and options.quant choose among a folder's files"
        )));
    }
    Ok((folder, Choice::File(plain_name(&name, "the URL's file name")?)))
}
