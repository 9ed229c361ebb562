//! Zyphra Zamba2 (`"zamba2"`, HF `Zamba2ForCausalLM`): Mamba-2 layers, and "hybrid" layers
//! whose Mamba-2 input also gets a shared transformer block's output — `num_mem_blocks` blocks
//! used in turn by the hybrid layers, each use with its own LoRA adapters, reading hidden ‖
//! the original embeddings. Derived sizes (`attention_head_dim`, `mamba_headdim`,
//! `hybrid_layer_ids`...) are read from config.json where it has them, as HF does.

use serde_json::Value;

use crate::blocks::{Activation, Block, BlockKind, Mlp, MlpNames, SharedBlock, Zamba2Layer};
use crate::error::{Error, Result};
use crate::model::config::{Arch, Config};
use crate::model::config_fields::inner_width;
use crate::model::hybrid::{
    LayerType, MODEL_NAMES, Ssd, attention, base, check_len, flag, layer, layer_count, layer_list, mamba2,
    number, rope, size, whole,
};

/// config.json of a Zamba2 checkpoint as a [`Config`].
pub(crate) fn parse(v: Value) -> Result<Config> {
    let d = size(&v, "hidden_size", 2560)?;
    let n_layer = layer_count(&v, 54)?;
    let eps = number(&v, "rms_norm_eps", 1e-5)? as f32;
    let types = match layer_list(&v, "layers_block_type")? {
        Some(list) => list,
        None => layer_list(&v, "layer_types")?.ok_or_else(|| {
            Error::UnsupportedModel("a Zamba2 config.json without layers_block_type".into())
        })?,
    };
    check_len("layers_block_type", &types, n_layer)?;
    let heads = size(&v, "num_attention_heads", 32)?;
    let kv_heads = size(&v, "num_key_value_heads", heads)?;
    let attn_width = size(&v, "attention_hidden_size", d.saturating_mul(2))?;
    let head_dim = match v.get("attention_head_dim").filter(|x| !x.is_null()) {
        Some(_) => size(&v, "attention_head_dim", 0)?,
        None => size(&v, "head_dim", attn_width.checked_div(heads).unwrap_or(0))?,
    };
    if attn_width != 2 * d {
        return Err(Error::UnsupportedModel(format!(
            "attention_hidden_size {attn_width} (Zamba2's is 2 × hidden_size)"
        )));
    }
    let rope = if flag(&v, "use_mem_rope", false)? {
        let mut r = rope(&v, head_dim, 1.0, false)?;
        r.dims = head_dim;
        Some(r)
    } else {
        None
    };
    let mut attn = attention(heads, kv_heads, head_dim, rope);
    attn.scale = 1.0 / (head_dim as f32 / 2.0).sqrt();
    let act_name = v.get("hidden_act").and_then(Value::as_str).unwrap_or("gelu");
    let bias = flag(&v, "add_bias_linear", false)?;
    let mlp = Mlp {
        inner: size(&v, "intermediate_size", d.saturating_mul(4))?,
        act: Activation::parse("hidden_act", act_name)?,
        names: MlpNames::GateUp,
        bias,
        scales: (1.0, 1.0),
    };
    let shared_block = SharedBlock {
        attention: attn,
        mlp,
        rank: size(&v, "adapter_rank", 128)?,
        attention_adapters: flag(&v, "use_shared_attention_adapter", false)?,
    };
    let inner = inner_width(number(&v, "mamba_expand", 2.0)?, d)?;
    let mamba_heads = size(&v, "n_mamba_heads", 8)?;
    let ssd = mamba2(Ssd {
        heads: mamba_heads,
        head_dim: size(&v, "mamba_headdim", inner.checked_div(mamba_heads).unwrap_or(0))?,
        groups: size(&v, "mamba_ngroups", 1)?,
        state: size(&v, "mamba_d_state", 64)?,
        conv: size(&v, "mamba_d_conv", 4)?,
        inner,
        chunk: size(&v, "chunk_size", 256)?,
        // HF's Zamba2 mixer clamps Δ below at time_step_min only.
        limit: (number(&v, "time_step_min", 0.001)? as f32, f32::INFINITY),
        bias,
        // The conv always has a bias; the gated norm's ε is fixed at 1e-5.
        conv_bias: true,
        eps: 1e-5,
    });
    let hybrid_ids: Vec<usize> =
        types.iter().enumerate().filter(|(_, t)| **t == LayerType::Hybrid).map(|(i, _)| i).collect();
    let hybrid_ids = match v.get("hybrid_layer_ids") {
        None | Some(Value::Null) => hybrid_ids,
        Some(Value::Array(list)) => {
            let given: Option<Vec<usize>> = list.iter().map(whole).collect();
            match given {
                Some(given) if given == hybrid_ids => given,
                _ => {
                    return Err(Error::UnsupportedModel(format!(
                        "hybrid_layer_ids {list:?} that are not the \"hybrid\" entries of layers_block_type"
                    )));
                }
            }
        }
        Some(other) => return Err(Error::Config(format!("hybrid_layer_ids must be a list, not {other}"))),
    };
    let mem_blocks = match size(&v, "num_mem_blocks", 1)? {
        0 => return Err(Error::Config("num_mem_blocks must be positive".into())),
        n => n,
    };
    let mut blocks: Vec<Block> = Vec::with_capacity(n_layer);
    let mut owners: Vec<usize> = Vec::new(); // block index owning shared block b
    let mut j = 0;
    for (i, t) in types.iter().enumerate() {
        match t {
            LayerType::Mamba => blocks.push(Block::new(
                BlockKind::Mamba2(ssd.clone()),
                layer(i),
                "input_layernorm.weight",
                "mamba.",
            )),
            LayerType::Hybrid => {
                let b = j % mem_blocks;
                if owners.len() == b {
                    owners.push(blocks.len());
                }
                let kind = Zamba2Layer {
                    shared: shared_block.clone(),
                    owner_layer: hybrid_ids[b],
                    owner_block: owners[b],
                    use_index: j,
                    layer: i,
                    block: blocks.len(),
                    mamba: ssd.clone(),
                };
                let norm = format!("model.layers.{i}.mamba_decoder.input_layernorm.weight");
                blocks.push(Block::new(BlockKind::Zamba2(kind), String::new(), &norm, ""));
                j += 1;
            }
            other => {
                return Err(Error::UnsupportedModel(format!(
                    "layers_block_type: {other:?} layers in Zamba2"
                )));
            }
        }
    }
    let mut base = base(&v, Arch::Zamba2, (d, eps), (32000, true), MODEL_NAMES)?;
    base.max_positions = rope.map(|_| size(&v, "max_position_embeddings", 4096)).transpose()?;
    Config::stack(base, blocks)
}
