//! Loading checkpoints: both config formats, both tensor layouts, dtypes, sharding, and a
//! distinct typed error for every way a checkpoint can be broken.

mod common;

use std::collections::BTreeSet;

use common::fixtures;
use safetensors::tensor::{Dtype, SafeTensors, TensorView, serialize};
use webmamba::blocks::{BlockKind, BlockWeights, Mamba1, Mamba2, mamba1, mamba2};
use webmamba::{Arch, Checkpoint, Config, Error};

/// The first block of `c`, a Mamba-1 one (every fixture's blocks are all of one kind).
fn m1(c: &Config) -> &Mamba1 {
    match &c.blocks[0].kind {
        BlockKind::Mamba1(b) => b,
        other => panic!("not a Mamba-1 block: {other:?}"),
    }
}

/// The first block of `c`, a Mamba-2 one.
fn m2(c: &Config) -> &Mamba2 {
    match &c.blocks[0].kind {
        BlockKind::Mamba2(b) => b,
        other => panic!("not a Mamba-2 block: {other:?}"),
    }
}

/// The first layer's mixer weights, of a Mamba-1 block.
fn w1(w: &webmamba::ModelWeights) -> &mamba1::Weights {
    match &w.layers[0].mixer {
        BlockWeights::Mamba1(_, m) => m,
        _ => panic!("not a Mamba-1 block"),
    }
}

/// The first layer's mixer weights, of a Mamba-2 block.
fn w2(w: &webmamba::ModelWeights) -> &mamba2::Weights {
    match &w.layers[0].mixer {
        BlockWeights::Mamba2(_, m) => m,
        _ => panic!("not a Mamba-2 block"),
    }
}

/// The tiny fixture's weights rebuilt with `edit` applied to its tensor list.
fn rebuilt(edit: impl FnOnce(&mut Vec<(String, Dtype, Vec<usize>, Vec<u8>)>)) -> Vec<u8> {
    let f = &fixtures::all()[0];
    let st = SafeTensors::deserialize(f.weights[0].1).unwrap();
    let mut tensors: Vec<_> = st
        .tensors()
        .into_iter()
        .map(|(n, t)| (n, t.dtype(), t.shape().to_vec(), t.data().to_vec()))
        .collect();
    edit(&mut tensors);
    let views: Vec<_> =
        tensors.iter().map(|(n, d, s, b)| (n.clone(), TensorView::new(*d, s.clone(), b).unwrap())).collect();
    serialize(views, None).unwrap()
}

fn load(config: &[u8], weights: Vec<u8>) -> Result<(), Error> {
    Checkpoint::from_bytes(config, vec![("model.safetensors".into(), weights)], None, None)?.weights()?;
    Ok(())
}

dual_test! {
    async fn every_fixture_loads_with_the_right_config() {
        for f in fixtures::all() {
            let c = f.checkpoint().config;
            let w = f.checkpoint().weights().unwrap();
            assert_eq!(w.layers.len(), c.n_layer(), "{}", f.name);
            assert_eq!(w.embedding.len(), c.vocab_size * c.d_model, "{}", f.name);
            assert_eq!(c.arch == webmamba::Arch::FalconMamba, f.name.starts_with("falcon"), "{}", f.name);
            match f.name {
                "tiny-f32" => {
                    let b = m1(&c);
                    assert_eq!((c.d_model, b.d_state, b.d_conv, b.dt_rank, b.d_inner), (16, 4, 4, 1, 32));
                }
                "bias-untied-bf16" => {
                    let b = m1(&c);
                    assert_eq!((b.dt_rank, b.use_bias, b.use_conv_bias, c.tie_embeddings), (5, true, false, false));
                    assert!(w.lm_head.is_some() && w1(&w).ssm.in_proj_bias.is_some() && w1(&w).ssm.conv_bias.is_none());
                    assert_eq!(c.norm_eps, 1e-6);
                }
                "wide-f16" => assert_eq!((m1(&c).d_inner, m1(&c).d_conv, m1(&c).dt_rank), (96, 2, 3)),
                "medium-bf16" => assert_eq!((c.d_model, c.n_layer(), m1(&c).dt_rank), (64, 4, 4)),
                // vocab 301 padded to a multiple of 8; dt_rank "auto" = ceil(20 / 16)
                "original-sharded" => assert_eq!((c.vocab_size, m1(&c).dt_rank, m1(&c).d_state), (304, 2, 6)),
                // intermediate_size 40, not expand 2 × 16 (HF builds in_proj with 80 rows)
                "intermediate-f32" => assert_eq!((m1(&c).d_inner, w1(&w).ssm.in_proj.len()), (40, 80 * 16)),
                // mixer_rms_eps as config.json says: 1e-3 here, HF's default 1e-6 in the other
                "falcon-f32" => assert_eq!((m1(&c).dbc_norm_eps, m1(&c).dt_rank, c.d_model), (Some(1e-3), 4, 24)),
                "falcon-bias-bf16" => {
                    let b = m1(&c);
                    assert_eq!((b.dbc_norm_eps, b.use_bias, c.tie_embeddings, b.d_conv), (Some(1e-6), true, false, 3))
                }
                // Mamba-2: heads, groups and the Δ clamp as config.json says (HF 5 writes ∞ as
                // {"__float__": "Infinity"}); no x_proj / dt_proj, a gated norm per block.
                "mamba2-f32" => {
                    let b = m2(&c);
                    assert_eq!((c.arch, b.n_heads, b.head_dim, b.n_groups, b.chunk_size), (Arch::Mamba2, 8, 8, 2, 8));
                    assert_eq!((b.time_step_limit, b.conv_dim(), c.tie_embeddings), ((0.0, f32::INFINITY), 64 + 32, true));
                    assert_eq!(w2(&w).gated_norm.len(), 64);
                }
                "mamba2-bias-bf16" => {
                    let b = m2(&c);
                    assert_eq!((b.n_heads, b.head_dim, b.n_groups, b.time_step_limit), (3, 16, 1, (0.02, 0.3)));
                    assert_eq!((b.use_bias, b.use_conv_bias, c.tie_embeddings, c.norm_eps), (true, false, false, 1e-6));
                }
                "mamba2-groups-f16" => {
                    let b = m2(&c);
                    assert_eq!((b.n_heads, b.head_dim, b.n_groups, b.d_state, b.d_conv), (8, 4, 4, 32, 2))
                }
                other => panic!("unknown fixture {other}"),
            }
        }
    }

    async fn broken_checkpoints_give_distinct_typed_errors() {
        let f = &fixtures::all()[0];
        let good = f.weights[0].1.to_vec();
        let config = f.config;
        let mut messages = BTreeSet::new();
        let mut expect = |what: &str, r: Result<(), Error>, ok: &dyn Fn(&Error) -> bool| {
            let e = r.expect_err(what);
            assert!(ok(&e), "{what}: unexpected error {e:?}");
            common::log(&format!("[error] {what}: {e}"));
            assert!(messages.insert(e.to_string()), "{what}: message not distinct: {e}");
        };

        let truncated = good[..good.len() - 10].to_vec();
        expect("truncated", load(config, truncated),
            &|e| matches!(e, Error::Safetensors { reason, .. } if reason.contains("truncated")));

        let mut long_header = good.clone();
        long_header[..8].copy_from_slice(&(good.len() as u64 + 100).to_le_bytes());
        expect("header length > file", load(config, long_header),
            &|e| matches!(e, Error::Safetensors { reason, .. } if reason.contains("larger than the file")));

        let wrong_dtype = rebuilt(|t| {
            let norm = t.iter_mut().find(|t| t.0 == "backbone.norm_f.weight").unwrap();
            norm.1 = Dtype::I32;
        });
        expect("wrong dtype", load(config, wrong_dtype),
            &|e| matches!(e, Error::UnsupportedDtype { tensor, dtype } if tensor == "backbone.norm_f.weight" && dtype == "I32"));

        let wrong_shape = rebuilt(|t| {
            let a = t.iter_mut().find(|t| t.0 == "backbone.layers.1.mixer.A_log").unwrap();
            a.2 = vec![a.2[1], a.2[0]];
        });
        expect("wrong shape", load(config, wrong_shape),
            &|e| matches!(e, Error::ShapeMismatch { tensor, expected, got }
                if tensor == "backbone.layers.1.mixer.A_log" && expected == &[32, 4] && got == &[4, 32]));

        let missing = rebuilt(|t| t.retain(|t| t.0 != "backbone.layers.0.mixer.D"));
        expect("missing tensor", load(config, missing),
            &|e| matches!(e, Error::MissingTensor { tensor, .. } if tensor == "backbone.layers.0.mixer.D"));

        let non_finite = rebuilt(|t| {
            let x = t.iter_mut().find(|t| t.0 == "backbone.layers.1.mixer.x_proj.weight").unwrap();
            x.3[4 * 37..4 * 38].copy_from_slice(&f32::NAN.to_le_bytes());
        });
        expect("NaN weight", load(config, non_finite.clone()),
            &|e| matches!(e, Error::NonFiniteWeight { tensor, index } if tensor == "backbone.layers.1.mixer.x_proj.weight" && *index == 37));
        if let Some(ctx) = common::gpu("broken_checkpoints_give_distinct_typed_errors").await {
            let c = Checkpoint::from_bytes(config, vec![("model.safetensors".into(), non_finite)], None, None).unwrap();
            let e = webmamba::GpuModel::load(&ctx, &c, Default::default()).await.err().expect("NaN weight on the GPU");
            assert_eq!(e.code(), "NonFiniteWeight", "{e}");
        }

        let other_model = String::from_utf8(config.to_vec()).unwrap().replace("\"mamba\"", "\"llama\"");
        expect("unknown model_type", load(other_model.as_bytes(), good.clone()),
            &|e| matches!(e, Error::UnsupportedModel(m) if m.contains("llama")));

        assert_eq!(messages.len(), 7);
        load(config, good).expect("the untouched file still loads");
    }

    async fn sharded_index_must_agree_with_the_shards() {
        let f = fixtures::all().into_iter().find(|f| f.name == "original-sharded").unwrap();
        // Drop the second shard: the index names tensors that are nowhere.
        let mut files = f.weight_files();
        files.pop();
        let err = Checkpoint::from_bytes(f.config, files, f.index, None).err().expect("missing shard");
        assert!(matches!(err, Error::MissingTensor { .. }), "{err}");
    }
}

fn config(json: &str) -> Result<Config, Error> {
    Config::from_json(json.as_bytes())
}

dual_test! {
    async fn config_formats_and_derived_sizes() {
        let hf = config(r#"{"model_type":"mamba","vocab_size":50280,"hidden_size":768,"num_hidden_layers":24,
            "state_size":16,"expand":2,"conv_kernel":4,"time_step_rank":"auto","intermediate_size":1536}"#).unwrap();
        let b = m1(&hf);
        assert_eq!((b.d_inner, b.dt_rank, b.use_bias, b.use_conv_bias, hf.tie_embeddings), (1536, 48, false, true, true));
        assert_eq!(hf.norm_eps, 1e-5);

        let original = config(r#"{"d_model":768,"n_layer":24,"vocab_size":50277,"ssm_cfg":{},"rms_norm":true,
            "residual_in_fp32":true,"fused_add_norm":true,"pad_vocab_size_multiple":8}"#).unwrap();
        assert_eq!(original, Config { eos_token_id: None, ..hf });

        // As HF: intermediate_size decides when given, even where it is not expand × hidden_size
        // (the intermediate-f32 fixture checks HF's outputs for such a model).
        let wide = config(r#"{"model_type":"mamba","vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"intermediate_size":20}"#).unwrap();
        assert_eq!(m1(&wide).d_inner, 20);

        let rank = config(r#"{"model_type":"mamba","vocab_size":10,"hidden_size":33,"num_hidden_layers":1}"#).unwrap();
        assert_eq!(m1(&rank).dt_rank, 3, "auto = ceil(33 / 16)");

        // Mamba-2: ∞ as older HF wrote it (a bare `Infinity`, not JSON) and as HF 5 does.
        let json2 = r#"{"model_type":"mamba2","vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"num_heads":4,
            "head_dim":4,"n_groups":2,"state_size":8,"chunk_size":16,"time_step_limit":[0.0, LIMIT]}"#;
        for limit in ["Infinity", r#"{"__float__": "Infinity"}"#, "1e9"] {
            let c = config(&json2.replace("LIMIT", limit)).unwrap();
            let b = m2(&c);
            assert_eq!((c.arch, b.d_inner, b.n_heads, b.head_dim, b.n_groups), (webmamba::Arch::Mamba2, 16, 4, 4, 2));
            assert_eq!((b.conv_dim(), b.in_proj_dim(), c.tie_embeddings, c.eos_token_id), (16 + 32, 16 + 48 + 4, false, None));
            assert_eq!(b.time_step_limit.1, if limit == "1e9" { 1e9 } else { f32::INFINITY });
            // to_hf_json round-trips (∞ left out: HF's default).
            assert_eq!(config(&c.to_hf_json()).unwrap(), c);
        }
        // A string that merely contains the word stays a string.
        assert!(config(&json2.replace("LIMIT", "1").replace("\"mamba2\"", "\"mamba2\",\"note\":\"NaN Infinity\"")).is_ok());

        let groups_3 = json2.replace("LIMIT", "Infinity").replace(r#""n_groups":2"#, r#""n_groups":3"#);
        let (reversed, one) = (json2.replace("[0.0, LIMIT]", "[0.5, 0.1]"), json2.replace("[0.0, LIMIT]", "[0.0]"));
        let nan = json2.replace("LIMIT", "NaN");
        for (bad, kind) in [
            // HF's defaults: 128 heads × 64 is not 2 × 8.
            (r#"{"model_type":"mamba2","vocab_size":10,"hidden_size":8,"num_hidden_layers":1}"#, "Config"),
            (groups_3.as_str(), "Config"),
            (reversed.as_str(), "Config"),
            (one.as_str(), "Config"),
            (nan.as_str(), "Config"),
            (r#"{"d_model":8,"n_layer":1,"vocab_size":10,"ssm_cfg":{"layer":"Mamba2"}}"#, "UnsupportedModel"),
            (r#"{"vocab_size":10}"#, "UnsupportedModel"),
            (r#"{"model_type":"mamba","vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"intermediate_size":0}"#, "Config"),
            (r#"{"model_type":"mamba","vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"time_step_rank":"big"}"#, "Config"),
            (r#"{"model_type":"mamba","hidden_size":8,"num_hidden_layers":1}"#, "Config"),
            (r#"{"model_type":"mamba","vocab_size":10,"hidden_size":0,"num_hidden_layers":1}"#, "Config"),
            ("not json", "Config"),
            // Sizes that used to wrap (or saturate) into misleading numbers.
            (r#"{"model_type":"mamba","vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"state_size":9223372036854775808}"#, "Config"),
            (r#"{"model_type":"mamba","vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"expand":1e30}"#, "Config"),
            (r#"{"model_type":"mamba","vocab_size":10,"hidden_size":8,"num_hidden_layers":1,"expand":-2}"#, "Config"),
            (r#"{"model_type":"mamba","vocab_size":4294967296,"hidden_size":8,"num_hidden_layers":1}"#, "Config"),
            (r#"{"d_model":8,"n_layer":1,"vocab_size":18446744073709551615,"ssm_cfg":{}}"#, "Config"),
            (r#"{"model_type":"mamba","vocab_size":10,"hidden_size":65536,"num_hidden_layers":100000}"#, "Config"),
        ] {
            let e = config(bad).expect_err(bad);
            assert_eq!(e.code(), kind, "{bad}: {e}");
        }
    }

    // Found by hand while writing `fuzz/` (safetensors_header crashes on it): tensors that
    // tile up to 2^64 - 8 bytes made `data_start + end` overflow (a panic in debug builds, a
    // wrapped size in release ones).
    async fn header_whose_data_ends_past_2_64_is_an_error() {
        let n = (1u64 << 61) - 1;
        let table: Vec<String> = (0..8)
            .map(|i| format!(r#""t{i}":{{"dtype":"U8","shape":[{n}],"data_offsets":[{},{}]}}"#, i * n, (i + 1) * n))
            .collect();
        let json = format!("{{{}}}", table.join(","));
        for size in [None, Some(8 + json.len() as u64)] {
            let e = webmamba::model::FileHeader::parse("model.safetensors", json.as_bytes(), size).unwrap_err();
            assert_eq!(e.code(), "Safetensors", "{e}");
        }
    }

    // Found by hand while writing `fuzz/` (config_json's round trip fails on it): 61 / 7 × 7
    // truncates to 60, so `to_hf_json` wrote an expand that did not parse back to 61.
    async fn to_hf_json_parses_back_to_the_same_config() {
        for (expand, d_model) in [(8.72, 7), (1.5, 49), (2.0, 768), (0.03, 49), (4.37, 11)] {
            let json = format!(
                r#"{{"model_type":"mamba","vocab_size":10,"hidden_size":{d_model},"num_hidden_layers":1,"expand":{expand}}}"#
            );
            let c = config(&json).unwrap();
            assert_eq!(config(&c.to_hf_json()).unwrap(), c, "{json}");
        }
        // HF 5.24's MambaConfig is a strict dataclass: `expand` must be an integer (2.0 failed
        // `MambaForCausalLM.from_pretrained` on our random folders), and the epsilon reads as
        // written.
        let c = config(r#"{"model_type":"mamba","vocab_size":10,"hidden_size":768,"num_hidden_layers":1}"#).unwrap();
        let hf: serde_json::Value = serde_json::from_str(&c.to_hf_json()).unwrap();
        assert!(hf["expand"].is_u64(), "{hf}");
        assert_eq!((hf["expand"].as_u64(), hf["layer_norm_epsilon"].as_f64()), (Some(2), Some(1e-5)), "{hf}");
    }
}

/// The fingerprint's text of a Mamba-1 config is what `{:?}` printed before the architecture
/// fields existed (states exported by earlier builds keep importing); Falcon-Mamba's differs.
#[test]
fn config_identity_is_stable() {
    let json = br#"{"model_type":"mamba","vocab_size":300,"hidden_size":16,"num_hidden_layers":2,
        "state_size":4,"conv_kernel":4,"expand":2,"time_step_rank":1,"eos_token_id":0}"#;
    let c = webmamba::Config::from_json(json).unwrap();
    assert_eq!(
        c.identity(),
        "Config { d_model: 16, n_layer: 2, d_inner: 32, d_state: 4, d_conv: 4, dt_rank: 1, vocab_size: 300, \
         use_bias: false, use_conv_bias: true, norm_eps: 1e-5, tie_embeddings: true, eos_token_id: Some(0) }"
    );
    let falcon = String::from_utf8(json.to_vec()).unwrap().replace("\"mamba\"", "\"falcon_mamba\"");
    let f = webmamba::Config::from_json(falcon.as_bytes()).unwrap();
    assert_eq!(f.arch, webmamba::Arch::FalconMamba);
    assert_eq!(m1(&f).dbc_norm_eps, Some(1e-6));
    assert!(f.identity().ends_with(", arch: \"falcon_mamba\", mixer_rms_eps: 1e-6 }"), "{}", f.identity());
    assert_eq!(webmamba::Config::from_json(f.to_hf_json().as_bytes()).unwrap(), f);
}

dual_test! {
    async fn lfm2_and_qwen3_5_configs_and_their_errors() {
        let kinds = |c: &Config| -> String {
            c.blocks
                .iter()
                .map(|b| match b.kind {
                    BlockKind::ShortConv(_) => 'c',
                    BlockKind::DeltaNet(_) => 'd',
                    BlockKind::Attention(_) => 'a',
                    BlockKind::Mlp(_) => 'm',
                    _ => '?',
                })
                .collect()
        };
        let lfm2 = r#"{"model_type":"lfm2","vocab_size":300,"hidden_size":32,"num_hidden_layers":3,
            "num_attention_heads":4,"num_key_value_heads":2,"intermediate_size":100,"block_multiple_of":32 LAYERS}"#;
        let lfm2 = lfm2.replace("LAYERS", r#","layer_types":["conv","full_attention","conv"]LAYERS"#);
        let c = config(&lfm2.replace("LAYERS", "")).unwrap();
        assert_eq!((c.arch, kinds(&c).as_str(), c.tie_embeddings), (Arch::Lfm2, "cmamcm", true));
        // HF's Lfm2MLP: int(2 · 100 / 3) = 66, × 1.0, up to a multiple of 32: 96 (w1 is (96, 32)).
        let sizes = webmamba::model::tensor_sizes(&c).unwrap();
        let w1 = sizes.iter().find(|(role, ..)| format!("{role:?}") == "Layer(1, Mlp(Gate))").unwrap();
        assert_eq!((w1.1, w1.2), (96, 32));
        // full_attn_idxs instead of layer_types; without either every layer is attention.
        let idxs = lfm2.replace(r#""layer_types":["conv","full_attention","conv"]LAYERS"#, r#""full_attn_idxs":[2]"#);
        assert!(idxs.contains("full_attn_idxs"));
        assert_eq!(kinds(&config(&idxs).unwrap()), "cmcmam");
        let all = lfm2.replace(r#","layer_types":["conv","full_attention","conv"]LAYERS"#, "");
        assert!(!all.contains("layer_types"));
        assert_eq!(kinds(&config(&all).unwrap()), "amamam");

        let qwen = r#"{"model_type":"qwen3_5_text","vocab_size":300,"hidden_size":32,"num_hidden_layers":4,
            "num_attention_heads":4,"num_key_value_heads":2,"head_dim":8,"intermediate_size":64,
            "linear_num_key_heads":2,"linear_num_value_heads":4,"linear_key_head_dim":8,"linear_value_head_dim":8,
            "rope_parameters":{"rope_type":"default","rope_theta":10000000,"partial_rotary_factor":0.25}EXTRA}"#;
        let c = config(&qwen.replace("EXTRA", "")).unwrap();
        // Every 4th layer attention (full_attention_interval's default).
        assert_eq!((c.arch, kinds(&c).as_str(), c.zero_centred_norms), (Arch::Qwen3_5Text, "dmdmdmam", true));
        let text = qwen.replace(r#""model_type":"qwen3_5_text","#, "").replace("EXTRA", "");
        let vl = format!(r#"{{"model_type":"qwen3_5","tie_word_embeddings":true,"text_config":{text},"vision_config":{{"depth":1}}}}"#);
        let c = config(&vl).unwrap();
        assert_eq!((c.arch, kinds(&c).as_str(), c.tie_embeddings), (Arch::Qwen3_5, "dmdmdmam", true));
        let embedding = webmamba::model::tensor_sizes(&c).unwrap()[0].0;
        assert_eq!(format!("{embedding:?}"), "Embedding");

        for (bad, kind) in [
            (lfm2.replace(r#""num_attention_heads":4"#, r#""num_attention_heads":0"#).replace("LAYERS", ""), "Config"),
            (lfm2.replace("LAYERS", r#","conv_L_cache":0"#), "Config"),
            (lfm2.replace(r#""conv","full_attention""#, r#""conv","sliding_attention""#).replace("LAYERS", ""), "UnsupportedModel"),
            (lfm2.replace(r#""num_key_value_heads":2"#, r#""num_key_value_heads":3"#).replace("LAYERS", ""), "Config"),
            (qwen.replace(r#""linear_num_key_heads":2"#, r#""linear_num_key_heads":3"#).replace("EXTRA", ""), "Config"),
            (qwen.replace(r#""num_attention_heads":4"#, r#""num_attention_heads":0"#).replace("EXTRA", ""), "Config"),
            (qwen.replace("EXTRA", r#","linear_conv_kernel_dim":0"#), "Config"),
            (qwen.replace("EXTRA", r#","layer_types":["linear_attention","mamba2","linear_attention","full_attention"]"#), "UnsupportedModel"),
            (qwen.replace("qwen3_5_text", "qwen3_5_moe").replace("EXTRA", ""), "UnsupportedModel"),
            (qwen.replace("qwen3_5_text", "qwen3_next").replace("EXTRA", ""), "UnsupportedModel"),
            (lfm2.replace(r#""lfm2""#, r#""lfm2_moe""#).replace("LAYERS", ""), "UnsupportedModel"),
            (r#"{"model_type":"qwen3_5","text_config":7}"#.to_string(), "Config"),
        ] {
            let e = config(&bad).expect_err(&bad);
            assert_eq!(e.code(), kind, "{bad}: {e}");
        }
    }
}
