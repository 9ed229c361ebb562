//! NVIDIA Nemotron-H (`"nemotron_h"`, HF `NemotronHForCausalLM`): a stack of single blocks,
//! each a Mamba-2 mixer, attention (no positions), a relu² MLP or a mixture of relu² experts
//! with a shared expert (sigmoid routing), as `layers_block_type` or the Hub's
//! `hybrid_override_pattern` ("M*-E") lists them. Tensors under `backbone.`.

use serde_json::Value;

use crate::blocks::{Activation, Block, BlockKind, ExpertLayout, Mlp, MlpNames, Moe, Routing};
use crate::error::{Error, Result};
use crate::model::config::{Arch, Config, Names};
use crate::model::hybrid::{LayerType, Ssd, attention, base, flag, layer_list, mamba2, number, size, whole};

/// The value of `new`, or of its legacy name `old`, in `v`.
fn alias<'a>(v: &'a Value, new: &str, old: &str) -> Option<&'a Value> {
    v.get(new).filter(|x| !x.is_null()).or_else(|| v.get(old).filter(|x| !x.is_null()))
}

/// The layer pattern: `layers_block_type` (or `layer_types`), else `hybrid_override_pattern`,
/// else HF's default.
fn pattern(v: &Value) -> Result<Vec<LayerType>> {
    for field in ["layers_block_type", "layer_types"] {
        if let Some(list) = layer_list(v, field)? {
            return Ok(list);
        }
    }
    match v.get("hybrid_override_pattern") {
        None | Some(Value::Null) => {
            Ok(vec![LayerType::Mamba, LayerType::Moe, LayerType::Attention, LayerType::Mlp])
        }
        Some(Value::String(p)) => p
            .chars()
            .map(|c| match c {
                'M' => Ok(LayerType::Mamba),
                '*' => Ok(LayerType::Attention),
                '-' => Ok(LayerType::Mlp),
                'E' => Ok(LayerType::Moe),
                other => Err(Error::UnsupportedModel(format!("hybrid_override_pattern: layer {other:?}"))),
            })
            .collect(),
        Some(other) => Err(Error::Config(format!("hybrid_override_pattern must be a string, not {other}"))),
    }
}

/// config.json of a Nemotron-H checkpoint as a [`Config`].
pub(crate) fn parse(v: Value) -> Result<Config> {
    let d = size(&v, "hidden_size", 4096)?;
    let eps = number(&v, "layer_norm_epsilon", 1e-5)? as f32;
    let types = pattern(&v)?;
    if types.len() > 4096 {
        return Err(Error::Config(format!("{} layers: not a model webmamba can hold", types.len())));
    }
    let act = |field: &str, default: &str| {
        Activation::parse(field, v.get(field).and_then(Value::as_str).unwrap_or(default))
    };
    if act("mamba_hidden_act", "silu")? != Activation::Silu {
        return Err(Error::UnsupportedModel("mamba_hidden_act other than \"silu\"".into()));
    }
    let mlp_act = act("mlp_hidden_act", "relu2")?;
    if v.get("moe_latent_size").is_some_and(|x| !x.is_null()) {
        return Err(Error::UnsupportedModel("moe_latent_size (latent mixtures of experts)".into()));
    }
    let n = |new: &str, old: &str, default: usize| -> Result<usize> {
        match alias(&v, new, old) {
            Some(x) => {
                whole(x).ok_or_else(|| Error::Config(format!("{new} must be a whole number, not {x}")))
            }
            None => Ok(default),
        }
    };
    let (mamba_heads, mamba_head_dim) = (size(&v, "mamba_num_heads", 128)?, size(&v, "mamba_head_dim", 64)?);
    let dt_min = match alias(&v, "time_step_min", "mamba_dt_min") {
        Some(x) => {
            x.as_f64().ok_or_else(|| Error::Config(format!("time_step_min must be a number, not {x}")))?
        }
        None => 0.001,
    };
    let use_conv_bias = match alias(&v, "use_conv_bias", "mamba_conv_bias") {
        Some(x) => x
            .as_bool()
            .ok_or_else(|| Error::Config(format!("use_conv_bias must be true or false, not {x}")))?,
        None => true,
    };
    let ssd = mamba2(Ssd {
        heads: mamba_heads,
        head_dim: mamba_head_dim,
        groups: n("n_groups", "mamba_n_groups", 8)?,
        state: size(&v, "ssm_state_size", 128)?,
        conv: n("conv_kernel", "mamba_d_conv", 4)?,
        inner: mamba_heads.saturating_mul(mamba_head_dim),
        chunk: n("chunk_size", "mamba_chunk_size", 128)?,
        // HF's mixer clamps Δ below at time_step_min; time_step_limit is unused.
        limit: (dt_min as f32, f32::INFINITY),
        bias: flag(&v, "use_bias", false)?,
        conv_bias: use_conv_bias,
        eps,
    });
    let heads = size(&v, "num_attention_heads", 32)?;
    // No positions; no biases whatever attention_bias says (HF builds them without).
    let attn = attention(heads, size(&v, "num_key_value_heads", heads)?, size(&v, "head_dim", 128)?, None);
    let mlp_bias = flag(&v, "mlp_bias", false)?;
    let plain =
        |inner| Mlp { inner, act: mlp_act, names: MlpNames::Plain, bias: mlp_bias, scales: (1.0, 1.0) };
    let moe = Moe {
        n_experts: n("n_routed_experts", "num_local_experts", 8)?,
        top_k: size(&v, "num_experts_per_tok", 2)?,
        expert: plain(size(&v, "moe_intermediate_size", 7688)?),
        routing: Routing::Sigmoid {
            n_group: size(&v, "n_group", 1)?,
            topk_group: size(&v, "topk_group", 1)?,
            normalize: flag(&v, "norm_topk_prob", true)?,
            scale: number(&v, "routed_scaling_factor", 1.0)? as f32,
        },
        layout: ExpertLayout::NemotronH,
        stacked: false,
        shared: Some(plain(size(&v, "moe_shared_expert_intermediate_size", 7688)?)),
    };
    let blocks = types
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let kind = match t {
                LayerType::Mamba => BlockKind::Mamba2(ssd.clone()),
                LayerType::Attention => BlockKind::Attention(attn.clone()),
                LayerType::Mlp => BlockKind::Mlp(plain(size(&v, "intermediate_size", 21504)?)),
                LayerType::Moe => BlockKind::Moe(moe.clone()),
                LayerType::Hybrid => {
                    return Err(Error::UnsupportedModel(
                        "layers_block_type: \"hybrid\" layers in Nemotron-H".into(),
                    ));
                }
            };
            Ok(Block::new(kind, format!("backbone.layers.{i}."), "norm.weight", "mixer."))
        })
        .collect::<Result<Vec<_>>>()?;
    Config::stack(base(&v, Arch::NemotronH, (d, eps), (131072, false), Names::MAMBA)?, blocks)
}
