//! The Rust↔WGSL kernel contract, with Rust as the source of truth: every shader is reflected
//! with naga and each uniform struct it declares (`Params`, `Step`) must have the size and the
//! member offsets of the Rust struct the host writes into it (`src/kernels/*.rs`), member for
//! member by name; its bindings must be the ones its Rust wrapper declares (name, index,
//! access), both ways; the constants both sides use (flags, limits, workgroup-memory sizes) must
//! have the same values. A mismatch here is a kernel reading the wrong field or buffer, or
//! writing past its workgroup memory, on the GPU.
#![cfg(not(target_arch = "wasm32"))]

use std::mem::{offset_of, size_of};

use naga::{AddressSpace, Expression, Literal, Module, StorageAccess, TypeInner};
use webmamba::Error;
use webmamba::gpu::{Access, resolve};
use webmamba::kernels::{self, *};

fn registered(shader: &str) -> &'static Shader {
    kernels::SHADERS.iter().find(|s| s.name == shader).unwrap_or_else(|| panic!("no shader {shader}"))
}

fn module(shader: &str) -> Module {
    let source = registered(shader).source;
    naga::front::wgsl::parse_str(source).unwrap_or_else(|e| panic!("{shader}: {}", e.emit_to_string(source)))
}

/// `struct_name` of `shader`: (size in bytes, [(member, offset)]) as the shader lays it out.
fn wgsl_struct(shader: &str, struct_name: &str) -> (u32, Vec<(String, u32)>) {
    let m = module(shader);
    let (_, ty) = m
        .types
        .iter()
        .find(|(_, t)| t.name.as_deref() == Some(struct_name))
        .unwrap_or_else(|| panic!("{shader}: no struct {struct_name}"));
    let TypeInner::Struct { members, span } = &ty.inner else {
        panic!("{shader}: {struct_name} is not a struct")
    };
    (*span, members.iter().map(|mb| (mb.name.clone().unwrap_or_default(), mb.offset)).collect())
}

/// The struct's layout in the shader equals the Rust one: same size, and every named member
/// (padding, `_…`, excepted: the sizes cover it) at the same offset on both sides.
fn check(shader: &str, struct_name: &str, size: usize, rust: &[(&str, usize)]) {
    let (span, members) = wgsl_struct(shader, struct_name);
    assert_eq!(span as usize, size, "{shader}: {struct_name} is {span} bytes in WGSL, {size} in Rust");
    let named: Vec<(String, u32)> = members.into_iter().filter(|(n, _)| !n.starts_with('_')).collect();
    let rust: Vec<(String, u32)> =
        rust.iter().filter(|(n, _)| !n.starts_with('_')).map(|(n, o)| (n.to_string(), *o as u32)).collect();
    assert_eq!(named, rust, "{shader}: {struct_name} members (name, offset): WGSL left, Rust right");
}

/// Checks `shader`'s `Params` against Rust type `$ty` with fields `$f…` (in declaration order;
/// a field left out changes the size and fails). A field of an embedded struct is named by its
/// path (`shape.heads`) and matched to the WGSL member of its last name: the shaders' structs
/// are flat.
macro_rules! params {
    ($shader:expr, $ty:ty, [$($($f:ident).+),* $(,)?]) => {
        check($shader, "Params", size_of::<$ty>(), &[
            $((member(stringify!($($f).+)), offset_of!($ty, $($f).+))),*
        ])
    };
}

/// The WGSL member a Rust field path stands for: its last name (`shape.heads` → `heads`).
fn member(path: &'static str) -> &'static str {
    path.rsplit('.').next().unwrap_or(path).trim()
}

#[test]
fn every_params_struct_matches_its_rust_struct() {
    params!("argmax", argmax::ArgmaxParams, [vocab, capacity, _pad]);
    params!(
        "conv1d_silu",
        conv1d_silu::Conv1dParams,
        [d_inner, d_conv, xz_stride, state_offset, has_bias, map_len, slot_len, x_at]
    );
    params!("head_norm", head_norm::HeadNormParams, [stride, heads, q_heads, head_dim, eps, _pad]);
    params!(
        "delta_prep",
        delta_prep::DeltaPrepParams,
        [conv_dim, k_heads, k_dim, v_heads, xz_stride, beta_at, scale, _pad]
    );
    params!(
        "delta_chunks",
        delta_chunks::DeltaChunksParams,
        [conv_dim, k_heads, k_dim, v_dim, v_heads, xz_stride, beta_at, _pad]
    );
    params!(
        "delta_state",
        delta_state::DeltaStateParams,
        [
            conv_dim,
            k_heads,
            k_dim,
            v_dim,
            v_heads,
            xz_stride,
            c_at,
            state_offset,
            map_len,
            slot_len,
            slot_ssm_at,
            _pad
        ]
    );
    params!(
        "delta_step",
        delta_step::DeltaStepParams,
        [
            conv_dim,
            k_heads,
            k_dim,
            v_dim,
            v_heads,
            xz_stride,
            beta_at,
            state_offset,
            map_len,
            slot_len,
            slot_ssm_at,
            scale
        ]
    );
    params!(
        "short_conv",
        short_conv::ShortConvParams,
        [channels, taps, state_offset, has_bias, map_len, slot_len, _pad]
    );
    params!(
        "decode_in_proj",
        decode_in_proj::DecodeInProjParams,
        [
            n_in,
            n_out,
            row_start,
            w_scales,
            conv_from,
            channels,
            d_conv,
            state_offset,
            flags,
            eps,
            scale,
            segments.end_z,
            segments.end_x,
            segments.end_b,
            segments.end_c,
            segments.scale_z,
            segments.scale_x,
            segments.scale_b,
            segments.scale_c,
            segments.scale_dt,
        ]
    );
    params!(
        "decode_out_proj",
        decode_out_proj::DecodeOutProjParams,
        [n_in, n_out, y_col, w_scales, groups, flags, eps, scale]
    );
    params!(
        "decode_scan",
        decode_scan::DecodeScanParams,
        [d_inner, dbc_stride, dt_rank, state_offset, w_scales, flags, _pad]
    );
    params!("copy_cols", copy_cols::CopyColsParams, [width, x_stride, x_col, y_stride, y_col, _pad]);
    params!(
        "gated_act",
        gated_act::GatedActParams,
        [inner, x_stride, gate_col, up_col, y_stride, act, gated, gate_scale, expert, top_k, _pad]
    );
    params!(
        "moe_route",
        moe_route::MoeRouteParams,
        [experts, top_k, routing, flags, n_group, topk_group, scale, parts]
    );
    params!("embedding", embedding::EmbeddingParams, [d_model, row_start, n_rows, w_scales, scale, _pad]);
    for shader in ["linear", "linear_direct", "gemv", "gemv_coalesced"] {
        use linear::LinearParams as P;
        let fields = [
            ("n_in", offset_of!(P, n_in)),
            ("n_out", offset_of!(P, n_out)),
            ("x_stride", offset_of!(P, x_stride)),
            ("w_scales", offset_of!(P, w_scales)),
            ("x_row_start", offset_of!(P, x_row_start)),
            ("y_stride", offset_of!(P, y_stride)),
            ("y_col", offset_of!(P, y_col)),
            ("rows_max", offset_of!(P, rows_max)),
            ("flags", offset_of!(P, flags)),
            ("scale", offset_of!(P, scale)),
        ];
        check(shader, "Params", size_of::<P>(), &fields);
    }
    params!("rms_norm", rms_norm::RmsNormParams, [cols, eps, flags, groups]);
    params!("rope", rope::RopeParams, [stride, col, heads, head_dim, rot, positions, _pad]);
    params!(
        "kv_append",
        kv_append::KvAppendParams,
        [width, k_stride, k_col, v_stride, v_col, kv_offset, capacity, _pad]
    );
    params!(
        "attention_prefill",
        attention_prefill::AttentionPrefillParams,
        [
            q_stride,
            q_col,
            o_stride,
            o_col,
            shape.heads,
            shape.kv_heads,
            shape.head_dim,
            shape.kv_offset,
            shape.capacity,
            shape.scale,
            rows,
            keys
        ]
    );
    params!(
        "attention_decode",
        attention_decode::AttentionDecodeParams,
        [
            q_stride,
            q_col,
            shape.heads,
            shape.kv_heads,
            shape.head_dim,
            shape.kv_offset,
            shape.capacity,
            shape.scale,
            split_keys,
            _pad
        ]
    );
    params!(
        "attention_combine",
        attention_combine::AttentionCombineParams,
        [o_stride, o_col, heads, head_dim, split_keys, _pad]
    );
    params!("rms_slices", rms_slices::RmsSlicesParams, [stride, dt_rank, d_state, eps, flags, _pad]);
    params!("scan_carry", scan_carry::ScanCarryParams, [plane, state_offset, _pad]);
    params!(
        "scan_chunks",
        scan_chunks::ScanChunksParams,
        [d_inner, dbc_stride, dt_rank, chunk, delta_at, _pad]
    );
    params!(
        "scan_output",
        scan_output::ScanOutputParams,
        [
            d_inner,
            dbc_stride,
            dt_rank,
            chunk,
            state_offset,
            xz_stride,
            delta_at,
            map_len,
            slot_len,
            slot_ssm_at,
            _pad
        ]
    );
    params!("top_k", top_k::TopKParams, [vocab, k, capacity, _pad]);
    params!(
        "scale_segments",
        scale_segments::ScaleSegmentsParams,
        [
            width,
            segments.end_z,
            segments.end_x,
            segments.end_b,
            segments.end_c,
            segments.scale_z,
            segments.scale_x,
            segments.scale_b,
            segments.scale_c,
            segments.scale_dt,
            _pad
        ]
    );
    params!("silu_gate", silu_gate::SiluGateParams, [cols, y_stride, z_stride, z_col]);
    use ssd_chunks::SsdParams as S;
    let ssd = [
        ("d_inner", offset_of!(S, d_inner)),
        ("u_stride", offset_of!(S, u_stride)),
        ("proj_stride", offset_of!(S, proj_stride)),
        ("dt_at", offset_of!(S, dt_at)),
        ("head_dim", offset_of!(S, head_dim)),
        ("n_heads", offset_of!(S, n_heads)),
        ("n_groups", offset_of!(S, n_groups)),
        ("group_channels", offset_of!(S, group_channels)),
        ("group_wgs", offset_of!(S, group_wgs)),
        ("chunk", offset_of!(S, chunk)),
        ("dt_min", offset_of!(S, dt_min)),
        ("dt_max", offset_of!(S, dt_max)),
    ];
    check("ssd_chunks", "Params", size_of::<S>(), &ssd);
    // ssd_output's Params: the same members, flattened, then where the layer's state lives.
    use ssd_output::SsdOutputParams as O;
    let mut output = ssd.to_vec();
    output.extend([
        ("state_offset", offset_of!(O, state_offset)),
        ("map_len", offset_of!(O, map_len)),
        ("slot_len", offset_of!(O, slot_len)),
        ("slot_ssm_at", offset_of!(O, slot_ssm_at)),
        ("u_at", offset_of!(O, u_at)),
    ]);
    check("ssd_output", "Params", size_of::<O>(), &output);
}

#[test]
fn every_step_struct_matches_the_rust_step() {
    let rust = [
        ("t_len", offset_of!(Step, t_len)),
        ("n_chunks", offset_of!(Step, n_chunks)),
        ("past", offset_of!(Step, past)),
    ];
    let mut with_step = 0;
    for Shader { name: shader, .. } in kernels::SHADERS {
        if module(shader).types.iter().any(|(_, t)| t.name.as_deref() == Some("Step")) {
            check(shader, "Step", size_of::<Step>(), &rust);
            with_step += 1;
        }
    }
    assert!(with_step >= 10, "only {with_step} shaders declare Step");
}

/// A resource binding as the shader declares it: `@group(group) @binding(index) var<access> name`.
#[derive(Debug)]
struct WgslBinding {
    name: String,
    group: u32,
    index: u32,
    access: Access,
}

/// Every global of `shader` with a `@binding`, as naga reflects it.
fn wgsl_bindings(shader: &str) -> Vec<WgslBinding> {
    let m = module(shader);
    m.global_variables
        .iter()
        .filter_map(|(_, g)| {
            let binding = g.binding.as_ref()?;
            let access = match g.space {
                AddressSpace::Uniform => Access::Uniform,
                AddressSpace::Storage { access } if access.contains(StorageAccess::STORE) => {
                    Access::ReadWrite
                }
                AddressSpace::Storage { .. } => Access::Read,
                ref other => panic!("{shader}: {:?} is bound in address space {other:?}", g.name),
            };
            let name = g.name.clone().unwrap_or_else(|| panic!("{shader}: an unnamed binding"));
            Some(WgslBinding { name, group: binding.group, index: binding.binding, access })
        })
        .collect()
}

/// What is wrong between `shader`'s WGSL bindings and its Rust declaration, both ways.
fn binding_mismatches(shader: &Shader) -> Vec<String> {
    let (name, rust, wgsl) = (shader.name, shader.bindings, wgsl_bindings(shader.name));
    let mut wrong = Vec::new();
    for b in rust {
        if rust.iter().filter(|o| o.name == b.name).count() > 1 {
            wrong.push(format!("{name}: Rust declares `{}` more than once", b.name));
        }
        if rust.iter().filter(|o| o.index == b.index).count() > 1 {
            wrong.push(format!("{name}: Rust declares @binding({}) more than once", b.index));
        }
        match wgsl.iter().find(|w| w.name == b.name) {
            None => wrong.push(format!(
                "{name}: Rust declares `{}` (@binding({}), {:?}) but the shader has no such binding",
                b.name, b.index, b.access
            )),
            Some(w) if (w.group, w.index, w.access) != (0, b.index, b.access) => wrong.push(format!(
                "{name}: `{}` is @group({}) @binding({}) {:?} in WGSL but @group(0) @binding({}) {:?} in Rust",
                b.name, w.group, w.index, w.access, b.index, b.access
            )),
            Some(_) => {}
        }
    }
    for w in &wgsl {
        if !rust.iter().any(|b| b.name == w.name) {
            wrong.push(format!(
                "{name}: the shader binds `{}` at @binding({}) ({:?}) but Rust does not declare it",
                w.name, w.index, w.access
            ));
        }
    }
    wrong
}

#[test]
fn every_shader_binds_what_its_rust_wrapper_declares() {
    let wrong: Vec<String> = kernels::SHADERS.iter().flat_map(binding_mismatches).collect();
    assert!(wrong.is_empty(), "WGSL and Rust bindings disagree:\n{}", wrong.join("\n"));
    // One declaration (so one layout, one bind group per weight part) serves the four matmuls;
    // the check above proves each shader binds exactly it. (The embedding's pipelines, one per
    // weight format, all come from one shader.)
    for shader in ["linear", "linear_direct", "gemv", "gemv_coalesced"] {
        assert_eq!(registered(shader).bindings, linear::BINDINGS, "{shader}: not linear's bindings");
    }
}

#[test]
fn buffers_are_bound_by_declared_name_only() {
    let all = [("step", 0), ("p", 1), ("x", 2), ("w", 3), ("bias", 4), ("y", 5)];
    let mut reversed = all;
    reversed.reverse();
    // In any order, each resource lands on the binding its name declares.
    let bound = resolve("linear", linear::BINDINGS, &reversed).unwrap();
    assert_eq!(bound, vec![(0, 0), (1, 1), (2, 2), (3, 3), (4, 4), (5, 5)]);
    let internal = |named: &[(&str, i32)], says: &str| match resolve("linear", linear::BINDINGS, named) {
        Err(Error::Internal(m)) => assert!(m.contains(says), "{m:?} should say {says:?}"),
        other => panic!("expected Error::Internal saying {says:?}, got {other:?}"),
    };
    internal(&all[..5], "no buffer for `y`");
    let mut unknown = all;
    unknown[2].0 = "u";
    internal(&unknown, "no binding `u`");
    internal(&[&all[..], &[("x", 9)]].concat(), "`x` is named twice");
}

/// The value of `const name` in `shader` (a u32 literal).
fn constant(shader: &str, name: &str) -> u32 {
    let m = module(shader);
    let (_, c) = m
        .constants
        .iter()
        .find(|(_, c)| c.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("{shader}: no const {name}"));
    match m.global_expressions[c.init] {
        Expression::Literal(Literal::U32(v)) => v,
        ref other => panic!("{shader}: const {name} is not a u32 literal: {other:?}"),
    }
}

#[test]
fn shared_constants_have_one_value() {
    for shader in ["linear", "linear_direct", "gemv", "gemv_coalesced"] {
        assert_eq!(constant(shader, "BIAS"), linear::BIAS, "{shader}: BIAS");
        assert_eq!(constant(shader, "ACCUMULATE"), linear::ACCUMULATE, "{shader}: ACCUMULATE");
        assert_eq!(constant(shader, "SOFTPLUS"), linear::SOFTPLUS, "{shader}: SOFTPLUS");
        assert_eq!(constant(shader, "SCALE"), linear::SCALE, "{shader}: SCALE");
    }
    assert_eq!(constant("linear", "TILE"), linear::TILE, "linear: TILE");
    assert_eq!(constant("linear_direct", "TILE"), linear::DIRECT_TILE, "linear_direct: TILE");
    assert_eq!(constant("gemv_coalesced", "ROWS"), gemv_coalesced::OUTPUTS_PER_GROUP);
    assert_eq!(constant("rms_norm", "LAST_ROW"), rms_norm::LAST_ROW);
    assert_eq!(constant("argmax", "NON_FINITE_PICK"), argmax::NON_FINITE_PICK);
    // The first passes' slices: the host sizes their dispatch and scratch from these.
    assert_eq!(constant("argmax", "SLICE") as usize, argmax::SLICE);
    assert_eq!(constant("top_k", "SLICE") as usize, top_k::SLICE);
    let header = constant("top_k", "HEADER") as usize;
    assert_eq!(header + 2 * top_k::SLICE, top_k::SLICE_WORDS, "top_k: a slice's words");
    assert_eq!(constant("top_k", "PER") * constant("top_k", "WG"), constant("top_k", "SLICE"));
    assert_eq!(constant("conv1d_silu", "K_MAX") as usize, conv1d_silu::K_MAX);
    assert_eq!(constant("short_conv", "K_MAX") as usize, short_conv::K_MAX);
    assert_eq!(constant("rms_norm", "SHARED"), rms_norm::SHARED);
    for shader in ["delta_chunks", "delta_state"] {
        // One chunk size for the DeltaNet passes and the Step's n_chunks (the SSD scan's).
        assert_eq!(constant(shader, "CHUNK") as usize, delta_chunks::CHUNK, "{shader}: CHUNK");
    }
    for shader in ["delta_state", "delta_step"] {
        assert_eq!(constant(shader, "JB") as usize, delta_state::JB, "{shader}: JB");
        assert_eq!(constant(shader, "DK_MAX") as usize, delta_state::DK_MAX, "{shader}: DK_MAX");
    }
    assert_eq!(
        constant("delta_step", "PER_LANE") * constant("delta_step", "LANES"),
        constant("delta_step", "DK_MAX")
    );
    // delta_step sums q's and k's squares with one entry per invocation.
    assert!(constant("delta_step", "WG") >= constant("delta_step", "DK_MAX"));
    assert_eq!(constant("decode_in_proj", "K_MAX") as usize, conv1d_silu::K_MAX);
    assert_eq!(constant("decode_in_proj", "OUT"), decode_in_proj::OUTPUTS_PER_LANE_GROUP);
    assert_eq!(constant("decode_in_proj", "BIAS"), decode_in_proj::BIAS);
    assert_eq!(constant("decode_in_proj", "CONV_BIAS"), decode_in_proj::CONV_BIAS);
    assert_eq!(constant("decode_in_proj", "SCALE"), decode_in_proj::SCALE);
    assert_eq!(constant("decode_scan", "BIAS"), decode_scan::BIAS);
    assert_eq!(constant("decode_out_proj", "BIAS"), decode_out_proj::BIAS);
    assert_eq!(constant("decode_out_proj", "SCALE"), decode_out_proj::SCALE);
    assert_eq!(constant("decode_out_proj", "GATE_AFTER"), decode_out_proj::GATE_AFTER);
    assert_eq!(constant("decode_in_proj", "SEGMENTS"), decode_in_proj::SEGMENTS);
    assert_eq!(constant("decode_out_proj", "G_MAX") as usize, decode_out_proj::G_MAX);
    assert_eq!(constant("decode_out_proj", "OUT"), decode_in_proj::OUTPUTS_PER_LANE_GROUP);
    assert_eq!(constant("decode_scan", "STAGE") as usize, decode_scan::STAGE);
    assert_eq!(constant("decode_scan", "N_MAX") as usize, scan_output::N_MAX);
    assert_eq!(module("decode_scan").entry_points[0].workgroup_size, [decode_scan::WG, 1, 1]);
    // The embedding's dispatch covers a row with COLUMNS-wide workgroups.
    assert_eq!(module("embedding").entry_points[0].workgroup_size[0], embedding::COLUMNS);
    for shader in ["scan_chunks", "scan_output"] {
        // Workgroup memory is sized by STAGE in the shader and checked against it at load.
        assert_eq!(constant(shader, "STAGE") as usize, scan_chunks::STAGE, "{shader}: STAGE");
        assert_eq!(constant(shader, "N_MAX") as usize, scan_output::N_MAX, "{shader}: N_MAX");
    }
    for shader in ["attention_prefill", "attention_decode"] {
        assert_eq!(constant(shader, "HEAD_DIM_MAX"), kernels::HEAD_DIM_MAX, "{shader}: HEAD_DIM_MAX");
    }
    assert_eq!(constant("attention_prefill", "STAGE"), attention_prefill::STAGE);
    assert_eq!(constant("attention_decode", "SPLIT_MAX"), attention_decode::SPLIT_MAX);
    // One invocation per element: the dispatch counts divide by the shader's workgroup size.
    for (shader, wg) in [
        ("rope", rope::WG),
        ("kv_append", kv_append::WG),
        ("attention_prefill", attention_prefill::WG),
        ("attention_decode", attention_decode::WG),
        ("scale_segments", scale_segments::WG),
        ("silu_gate", silu_gate::WG),
    ] {
        assert_eq!(module(shader).entry_points[0].workgroup_size, [wg, 1, 1], "{shader}: workgroup size");
    }
    for shader in ["ssd_chunks", "ssd_output"] {
        assert_eq!(constant(shader, "STAGE") as usize, ssd_chunks::STAGE, "{shader}: STAGE");
        assert_eq!(constant(shader, "N_MAX") as usize, ssd_chunks::N_MAX, "{shader}: N_MAX");
        assert_eq!(constant(shader, "N_LANE") as usize, ssd_chunks::N_LANE, "{shader}: N_LANE");
    }
}

/// Bytes of workgroup memory `shader` declares (the sum of its `var<workgroup>` sizes).
fn workgroup_bytes(shader: &str) -> u32 {
    let m = module(shader);
    m.global_variables
        .iter()
        .filter(|(_, g)| g.space == AddressSpace::WorkGroup)
        .map(|(_, g)| m.types[g.ty].inner.size(m.to_ctx()))
        .sum()
}

#[test]
fn workgroup_memory_fits_what_webgpu_guarantees() {
    for Shader { name, .. } in kernels::SHADERS {
        let bytes = workgroup_bytes(name);
        assert!(bytes <= 16 * 1024, "{name}: {bytes} bytes of workgroup memory, WebGPU guarantees 16 KiB");
    }
    assert_eq!(workgroup_bytes("attention_prefill"), attention_prefill::WORKGROUP_BYTES);
    assert_eq!(workgroup_bytes("attention_decode"), attention_decode::WORKGROUP_BYTES);
}
