//! [`Layout`]: where every tensor of a checkpoint lives (file, byte range, dtype) and what it is
//! to the model ([`Role`]), checked against the config from the headers alone — before a single
//! weight byte is read. A missing tensor, a wrong shape or dtype, or a shard that disagrees with
//! the index is a typed error here, so a loader never allocates for a model it cannot load.
//!
//! Both tensor layouts are accepted:
//! - Hugging Face: `backbone.embeddings.weight`, `backbone.layers.N.{norm,mixer.*}`,
//!   `backbone.norm_f.weight`, optional `lm_head.weight`;
//! - original state-spaces: the same but `backbone.embedding.weight`;
//! - Mamba-2 (HF `Mamba2ForCausalLM`): the same names outside the mixer; in it `in_proj`,
//!   `conv1d`, `dt_bias`, `A_log`, `D`, `norm` (gated RMSNorm) and `out_proj`.
//!
//! Shapes use the glossary of [`crate::model`]: D = d_model, E·D = d_inner, N = d_state,
//! K = d_conv, R = dt_rank, V = vocab.

use std::collections::{BTreeMap, HashMap};

use safetensors::Dtype;

use crate::error::{Error, Result};
use crate::model::config::Config;
use crate::model::header::{FileHeader, Stored, TensorEntry};
use crate::model::part::Part;

/// What a tensor is to the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Role {
    /// Token embeddings (V, D); also the LM head when tied.
    Embedding,
    /// One tensor of block `layer`.
    Layer(usize, Part),
    /// Final RMSNorm gain (D).
    NormF,
    /// Untied LM head (V, D).
    LmHead,
}

impl Role {
    /// Whether this is a weight matrix (stored as the file has it on the CPU, in the weight
    /// format on the GPU) rather than a small vector (always f32).
    pub fn is_matrix(self) -> bool {
        matches!(self, Role::Embedding | Role::LmHead)
            || matches!(self, Role::Layer(_, part) if part.is_matrix())
    }
}

/// A tensor the model uses, as found in the checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    /// What it is.
    pub role: Role,
    /// Full name in the checkpoint.
    pub(crate) name: String,
    /// Stored element type (F32, F16 or BF16).
    pub dtype: Dtype,
    /// First dimension (1 for a vector).
    pub rows: usize,
    /// Product of the other dimensions (the vector's length for a vector).
    pub cols: usize,
    /// Whether 1 is added to each value as it is loaded (a zero-centred norm's gain).
    pub(crate) plus_one: bool,
    /// A GGUF tensor decoded to f32 as it streams (`dtype` is then F32).
    pub(crate) stored: Option<Stored>,
}

impl Planned {
    /// Bytes of one row as stored.
    pub(crate) fn row_bytes(&self) -> usize {
        self.cols * self.dtype.bitsize() / 8
    }

    /// Bytes of the whole tensor as stored.
    pub(crate) fn bytes(&self) -> u64 {
        (self.rows * self.row_bytes()) as u64
    }

    /// Bytes of one row in the file (ggml blocks for a GGUF tensor decoded as it streams).
    pub(crate) fn file_row_bytes(&self) -> usize {
        match self.stored {
            Some(s) => s.ty.bytes(self.cols as u64).expect("rows of whole blocks: checked") as usize,
            None => self.row_bytes(),
        }
    }
}

/// Every file's header, and for each tensor in it the role it plays (or none).
#[derive(Clone, Debug)]
pub struct Layout {
    /// The safetensors files, in the order their data is read.
    pub files: Vec<FileHeader>,
    /// `roles[f][t]`: the role of `files[f].tensors[t]`, `None` when the model does not use it.
    pub roles: Vec<Vec<Option<Planned>>>,
}

impl Layout {
    /// Checks `files` against `config` (and against the index's `weight_map` for a sharded
    /// checkpoint): every tensor the model needs exists once, with its shape and a float dtype.
    pub(crate) fn new(
        config: &Config,
        files: Vec<FileHeader>,
        weight_map: Option<&BTreeMap<String, String>>,
    ) -> Result<Self> {
        let mut by_name: HashMap<&str, (usize, usize)> = HashMap::new();
        for (f, file) in files.iter().enumerate() {
            for (t, tensor) in file.tensors.iter().enumerate() {
                if by_name.insert(&tensor.name, (f, t)).is_some() {
                    return Err(Error::Safetensors {
                        file: file.name.clone(),
                        reason: format!("tensor {} appears in more than one file", tensor.name),
                    });
                }
            }
        }
        let file_names = || files.iter().map(|f| f.name.as_str()).collect::<Vec<_>>().join(", ");
        if let Some(map) = weight_map {
            for (tensor, shard) in map {
                match by_name.get(tensor.as_str()) {
                    Some(&(f, _)) if files[f].name == *shard => {}
                    Some(&(f, _)) => {
                        return Err(Error::Safetensors {
                            file: shard.clone(),
                            reason: format!(
                                "the index puts {tensor} in {shard} but it is in {}",
                                files[f].name
                            ),
                        });
                    }
                    None => return Err(Error::MissingTensor { tensor: tensor.clone(), file: shard.clone() }),
                }
            }
        }
        let mut roles: Vec<Vec<Option<Planned>>> =
            files.iter().map(|f| vec![None; f.tensors.len()]).collect();
        let has = |name: &str| by_name.contains_key(name);
        for (role, name, shape, plus_one) in
            wanted(config, has("backbone.embedding.weight"), has("lm_head.weight"))?
        {
            let &(f, t) = by_name
                .get(name.as_str())
                .ok_or_else(|| Error::MissingTensor { tensor: name.clone(), file: file_names() })?;
            let entry = &files[f].tensors[t];
            if !fits(files[f].gguf, entry, &shape, role.is_matrix()) {
                return Err(Error::ShapeMismatch { tensor: name, expected: shape, got: entry.shape.clone() });
            }
            if !matches!(entry.dtype, Dtype::F32 | Dtype::F16 | Dtype::BF16) {
                return Err(Error::UnsupportedDtype { tensor: name, dtype: entry.dtype.to_string() });
            }
            let (rows, cols) = rows_cols(&shape);
            let stored = entry.stored;
            roles[f][t] = Some(Planned { role, name, dtype: entry.dtype, rows, cols, plus_one, stored });
        }
        Ok(Self { files, roles })
    }

    /// Every tensor the model uses.
    pub fn planned(&self) -> impl Iterator<Item = &Planned> {
        self.roles.iter().flatten().flatten()
    }

    /// The tensor playing `role`, if any.
    pub(crate) fn get(&self, role: Role) -> Option<&Planned> {
        self.planned().find(|p| p.role == role)
    }

    /// Bytes of every file's data section (what streams through a sink).
    pub fn data_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size - f.data_start).sum()
    }
}

/// Whether `entry` has the `shape` the model needs. A GGUF tensor's may differ where llama.cpp's
/// converter squeezed or added unit dimensions (conv kernels, Mamba-2's A and D) or regrouped a
/// vector (Mamba-2's gated norm as (G, E·D/G)); a matrix's rows stay whole.
fn fits(gguf: bool, entry: &TensorEntry, shape: &[usize], matrix: bool) -> bool {
    if entry.shape == shape {
        return true;
    }
    let squeezed = |s: &[usize]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
    let count = |s: &[usize]| s.iter().product::<usize>();
    gguf && match matrix {
        true => squeezed(&entry.shape) == squeezed(shape),
        false => count(&entry.shape) == count(shape),
    }
}

/// A tensor of `shape` as (rows, cols): a matrix has cols its last dimension (stacked experts
/// (E, R, C) are E·R rows); a vector is one row.
fn rows_cols(shape: &[usize]) -> (usize, usize) {
    let cols = if shape.len() > 1 { shape[shape.len() - 1] } else { shape.iter().product() };
    (shape.iter().product::<usize>() / cols.max(1), cols)
}

/// Every tensor a checkpoint of `c` has (an LM head unless `tie_word_embeddings`), as (role,
/// rows, cols) — for sizes without a checkpoint (`webmamba sizes`).
pub fn tensor_sizes(c: &Config) -> Result<Vec<(Role, usize, usize)>> {
    Ok(wanted(c, false, !c.tie_embeddings)?
        .into_iter()
        .map(|(role, _, shape, _)| {
            let (rows, cols) = rows_cols(&shape);
            (role, rows, cols)
        })
        .collect())
}

/// A tensor the config implies: its role, name, shape, and whether 1 is added to its values
/// as they load.
type Wanted = (Role, String, Vec<usize>, bool);

/// Every tensor the config implies, as (role, name, shape, whether 1 is added to it), in the
/// order the old loader read them: embedding, blocks (each as its kind lists its tensors), final
/// norm, LM head.
fn wanted(c: &Config, original_layout: bool, has_lm_head: bool) -> Result<Vec<Wanted>> {
    let (d, v) = (c.d_model, c.vocab_size);
    let embedding = match c.names.embedding {
        "backbone.embeddings.weight" if original_layout => "backbone.embedding.weight",
        name => name,
    };
    let mut out = vec![(Role::Embedding, embedding.to_string(), vec![v, d], false)];
    for (i, block) in c.blocks.iter().enumerate() {
        for t in block.tensors(d).into_iter().filter(|t| t.present) {
            let plus_one = if t.part == Part::Norm { c.zero_centred_norms } else { t.plus_one };
            out.push((Role::Layer(i, t.part), t.leaf, t.shape, plus_one));
        }
    }
    out.push((Role::NormF, c.names.norm_f.to_string(), vec![d], c.zero_centred_norms));
    if has_lm_head {
        out.push((Role::LmHead, "lm_head.weight".into(), vec![v, d], false));
    } else if !c.tie_embeddings {
        return Err(Error::MissingTensor {
            tensor: "lm_head.weight".into(),
            file: "the checkpoint (config says tie_word_embeddings = false)".into(),
        });
    }
    Ok(out)
}
