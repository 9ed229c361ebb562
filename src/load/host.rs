//! [`HostSink`]: a [`Sink`] that keeps a checkpoint's weights in memory for the CPU backend,
//! matrices in their stored dtype. Every buffer is reserved before the first byte is read, so a
//! model that cannot fit is an [`Error::OutOfMemory`] naming the bytes it needs — never an
//! allocation failure halfway (in wasm32 that is a trap that kills the page).

use std::collections::HashMap;

use half::{bf16, f16};
use safetensors::Dtype;

use crate::blocks::{BlockWeights, TakeTensor};
use crate::error::{Error, Result};
use crate::load::stream::Sink;
use crate::model::{Config, LayerWeights, Layout, Matrix, MatrixData, ModelWeights, Part, Planned, Role};

/// A tensor being filled.
enum Building {
    F32(Vec<f32>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
}

/// Bytes `planned` takes in memory here.
fn host_bytes(p: &Planned) -> u64 {
    if p.role.is_matrix() { p.bytes() } else { 4 * (p.rows * p.cols) as u64 }
}

/// Weights in memory, as they stream in.
pub(crate) struct HostSink {
    tensors: HashMap<Role, Building>,
}

impl HostSink {
    /// Reserves memory for every tensor `layout` plans.
    pub(crate) fn new(layout: &Layout) -> Result<Self> {
        let needed: u64 = layout.planned().map(host_bytes).sum();
        check_fits(needed)?;
        let oom = || Error::OutOfMemory {
            what: "the weights on the CPU backend".into(),
            needed,
            limit: "this machine could not allocate that much memory".into(),
        };
        let mut tensors = HashMap::new();
        for p in layout.planned() {
            let n = p.rows * p.cols;
            let building = match (p.role.is_matrix(), p.dtype) {
                (true, Dtype::F16) => Building::F16(reserve(n).ok_or_else(oom)?),
                (true, Dtype::BF16) => Building::BF16(reserve(n).ok_or_else(oom)?),
                _ => Building::F32(reserve(n).ok_or_else(oom)?),
            };
            tensors.insert(p.role, building);
        }
        Ok(Self { tensors })
    }

    /// The finished weights.
    pub(crate) fn finish(
        mut self,
        config: &Config,
        layout: &Layout,
        fingerprint: [u8; 32],
    ) -> Result<ModelWeights> {
        let t = &mut self.tensors;
        let embedding = take_matrix(t, layout, Role::Embedding)?;
        let lm_head =
            layout.get(Role::LmHead).is_some().then(|| take_matrix(t, layout, Role::LmHead)).transpose()?;
        let mut layers = Vec::with_capacity(config.n_layer());
        for (i, kind) in config.blocks.iter().enumerate() {
            let mut layer = LayerTensors { tensors: t, layout, layer: i };
            let norm = layer.vector(Part::Norm)?;
            layers.push(LayerWeights { norm, mixer: BlockWeights::take(&kind.kind, &mut layer)? });
        }
        let norm_f = take_vector(t, Role::NormF)?;
        Ok(ModelWeights { config: config.clone(), embedding, layers, norm_f, lm_head, fingerprint })
    }
}

/// The matrix playing `role`, in its stored dtype.
fn take_matrix(tensors: &mut HashMap<Role, Building>, layout: &Layout, role: Role) -> Result<Matrix> {
    let p = layout.get(role).ok_or_else(|| missing(role))?;
    let data = match tensors.remove(&role).ok_or_else(|| missing(role))? {
        Building::F32(v) => MatrixData::F32(v),
        Building::F16(v) => MatrixData::F16(v),
        Building::BF16(v) => MatrixData::BF16(v),
    };
    Ok(Matrix { rows: p.rows, cols: p.cols, data })
}

/// Block `layer`'s tensors, handed to its kind as it builds its weights.
struct LayerTensors<'a> {
    tensors: &'a mut HashMap<Role, Building>,
    layout: &'a Layout,
    layer: usize,
}

impl TakeTensor for LayerTensors<'_> {
    fn matrix(&mut self, part: Part) -> Result<Matrix> {
        take_matrix(self.tensors, self.layout, Role::Layer(self.layer, part))
    }

    fn vector(&mut self, part: Part) -> Result<Vec<f32>> {
        take_vector(self.tensors, Role::Layer(self.layer, part))
    }
}

/// The f32 vector playing `role`; an error when the checkpoint has none (optional biases).
fn take_vector(tensors: &mut HashMap<Role, Building>, role: Role) -> Result<Vec<f32>> {
    match tensors.remove(&role) {
        Some(Building::F32(v)) => Ok(v),
        _ => Err(missing(role)),
    }
}

impl Sink for HostSink {
    fn rows(&mut self, tensor: &Planned, _first_row: usize, bytes: &[u8]) -> Result<()> {
        let building = self.tensors.get_mut(&tensor.role).ok_or_else(|| missing(tensor.role))?;
        // Rows arrive in order, so appending puts them in place.
        match building {
            Building::F16(v) => v.extend(bytes.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]]))),
            Building::BF16(v) => v.extend(bytes.chunks_exact(2).map(|b| bf16::from_le_bytes([b[0], b[1]]))),
            Building::F32(v) => {
                let from = v.len();
                match tensor.dtype {
                    Dtype::F32 => {
                        v.extend(bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
                    }
                    Dtype::F16 => {
                        v.extend(bytes.chunks_exact(2).map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32()))
                    }
                    _ => v.extend(bytes.chunks_exact(2).map(|b| bf16::from_le_bytes([b[0], b[1]]).to_f32())),
                }
                if tensor.plus_one {
                    // A zero-centred norm's gain: 1 + w, in f32 as HF adds it.
                    v[from..].iter_mut().for_each(|x| *x += 1.0);
                }
            }
        }
        Ok(())
    }
}

fn reserve<T>(n: usize) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    Some(v)
}

fn missing(role: Role) -> Error {
    Error::InvalidInput(format!("internal: no data received for {role:?}"))
}

/// In wasm32 a module can address 4 GiB in all: a model whose weights cannot fit beside what is
/// already in use fails here, before anything is read or allocated.
fn check_fits(needed: u64) -> Result<()> {
    #[cfg(target_arch = "wasm32")]
    {
        const ADDRESSABLE: u64 = 4 << 30;
        let in_use = core::arch::wasm32::memory_size(0) as u64 * 65536;
        // Room for activations, the tokenizer and the checkpoint cache.
        let headroom = 256 << 20;
        if needed + in_use + headroom > ADDRESSABLE {
            return Err(Error::OutOfMemory {
                what: "the weights on the CPU backend (kept as stored)".into(),
                needed,
                limit: format!(
                    "WebAssembly (wasm32) can address at most 4 GiB, {:.2} GB of it already in use \
                     and 256 MiB kept for activations; use the GPU backend, or a smaller model",
                    in_use as f64 / 1e9
                ),
            });
        }
    }
    let _ = needed;
    Ok(())
}
