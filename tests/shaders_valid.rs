//! Every `shaders/*.wgsl` parses and validates with naga (no GPU needed), and the crate's
//! shader registry (`webmamba::kernels::SHADERS`) lists exactly the files on disk.
#![cfg(not(target_arch = "wasm32"))]

use std::collections::BTreeSet;
use std::path::Path;

#[test]
fn every_shader_parses_and_validates() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let mut on_disk = BTreeSet::new();
    for entry in std::fs::read_dir(&dir).expect("read shaders/") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_none_or(|e| e != "wgsl") {
            continue;
        }
        let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
        let source = std::fs::read_to_string(&path).expect("read shader");
        let module = naga::front::wgsl::parse_str(&source)
            .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.emit_to_string(&source)));
        // The capabilities every WebGPU implementation has (no f16, no subgroups): a shader
        // needing more must be gated on a device feature, not validated here. WGSL's
        // pack/unpack2x16float are core WebGPU; naga names them as a capability only because
        // some of its other targets (old GLSL/HLSL) lack them.
        let core = naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32;
        let info = naga::valid::Validator::new(naga::valid::ValidationFlags::all(), core)
            .validate(&module)
            .unwrap_or_else(|e| panic!("{}: {}", path.display(), e.emit_to_string(&source)));
        // wgpu's native backends (GL here, Vulkan, Metal) run naga's pipeline-constant pass on
        // every pipeline. naga 30 panics there when a named override follows the anonymous one
        // it makes for an override-sized array: caught here, not at a model's load.
        let processed = std::panic::catch_unwind(|| {
            naga::back::pipeline_constants::process_overrides(
                &module,
                &info,
                Some((naga::ShaderStage::Compute, stem.as_str())),
                &naga::back::PipelineConstants::default(),
            )
            .is_ok()
        });
        assert!(
            matches!(processed, Ok(true)),
            "{}: naga's pipeline-constant pass fails (declare named overrides before override-sized arrays)",
            path.display()
        );
        assert!(
            module.entry_points.iter().any(|ep| ep.name == stem),
            "{}: the entry point must be named like the file ({stem})",
            path.display()
        );
        on_disk.insert(stem);
    }
    let registered: BTreeSet<String> =
        webmamba::kernels::SHADERS.iter().map(|shader| shader.name.to_string()).collect();
    assert_eq!(on_disk, registered, "shaders/ and webmamba::kernels::SHADERS differ");
    for shader in webmamba::kernels::SHADERS {
        let on_disk = std::fs::read_to_string(dir.join(format!("{}.wgsl", shader.name))).unwrap();
        assert_eq!(shader.source, on_disk, "{}: registry source is not the file's", shader.name);
    }
}

/// The text of `struct <name> { ... }` in `source`, if it has one.
fn struct_text<'a>(source: &'a str, name: &str) -> Option<&'a str> {
    let start = source.find(&format!("struct {name} {{"))?;
    let end = start + source[start..].find("\n}")? + 2;
    Some(&source[start..end])
}

/// Shaders stand alone (no includes), so declarations they share are written out in each; they
/// must stay identical or a kernel would read its uniforms wrongly.
#[test]
fn shared_declarations_are_identical() {
    let shaders: Vec<(&str, &str)> = webmamba::kernels::SHADERS.iter().map(|s| (s.name, s.source)).collect();
    let steps: Vec<_> = shaders.iter().filter_map(|(n, s)| struct_text(s, "Step").map(|t| (n, t))).collect();
    assert!(steps.len() >= 8, "every forward kernel declares Step");
    for (name, text) in &steps {
        assert_eq!(*text, steps[0].1, "{name}: Step differs from {}", steps[0].0);
    }
    let linear_family = ["linear", "linear_direct", "gemv", "gemv_coalesced"];
    let params: Vec<_> = shaders
        .iter()
        .filter(|(n, _)| linear_family.contains(n))
        .map(|(n, s)| (n, struct_text(s, "Params").expect("Params")))
        .collect();
    assert_eq!(params.len(), 4);
    for (name, text) in &params {
        assert_eq!(*text, params[0].1, "{name}: linear Params differ from {}", params[0].0);
    }
    // How weights are decoded (f32 / packed f16 / int8 + scales) must be the same everywhere.
    let weight_readers: Vec<_> = shaders
        .iter()
        .filter_map(|(n, s)| {
            let start = s.find("override W_FORMAT")?;
            let end = start + s[start..].find("fn weight1")?;
            Some((n, &s[start..end + s[end..].find("\n}")?]))
        })
        .collect();
    assert_eq!(
        weight_readers.len(),
        8,
        "embedding, linear, linear_direct, gemv, gemv_coalesced and the decode kernels read weights"
    );
    for (name, text) in &weight_readers {
        assert_eq!(
            *text, weight_readers[0].1,
            "{name}: weight decoding differs from {}",
            weight_readers[0].0
        );
    }
    // The activations written out in several shaders: PyTorch's softplus and SiLU, one text.
    for function in ["fn softplus(", "fn silu("] {
        let copies: Vec<_> = shaders
            .iter()
            .filter_map(|(n, s)| {
                let start = s.find(function)?;
                Some((n, &s[start..start + s[start..].find("\n}")? + 2]))
            })
            .collect();
        assert!(copies.len() >= 3, "{function}: {} copies", copies.len());
        for (name, text) in &copies {
            assert_eq!(*text, copies[0].1, "{name}: {function}…) differs from {}'s", copies[0].0);
        }
    }
}

/// The kernels that end in `lanes_sum` (webmamba::kernels::lanes) write its tree version out
/// alike, and their subgroup versions validate with naga given subgroup operations — and not
/// without them, so the subgroup version is what uses them.
#[test]
fn subgroup_versions_of_the_gemv_kernels_validate() {
    use webmamba::kernels::lanes;
    let blocks: Vec<_> = lanes::KERNELS
        .iter()
        .map(|&(name, source)| {
            lanes::tree_block(source).unwrap_or_else(|| panic!("{name}: no lanes_sum block"))
        })
        .collect();
    for (block, (name, _)) in blocks.iter().zip(&lanes::KERNELS) {
        assert_eq!(*block, blocks[0], "{name}: its lanes_sum block differs from {}'s", lanes::KERNELS[0].0);
    }
    for (name, source) in lanes::KERNELS {
        let subgroups = lanes::subgroup_source(name).unwrap_or_else(|| panic!("{name}: no subgroup version"));
        assert!(lanes::tree_block(subgroups).is_none() && subgroups.contains("subgroupAdd"), "{name}");
        assert_eq!(
            subgroups.replacen(lanes::SUBGROUP_BLOCK, "", 1),
            source.replacen(blocks[0], "", 1),
            "{name}: only the block differs"
        );
        let module = naga::front::wgsl::parse_str(subgroups)
            .unwrap_or_else(|e| panic!("{name} (subgroups): {}", e.emit_to_string(subgroups)));
        let core = naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32;
        let with = core | naga::valid::Capabilities::SUBGROUP;
        naga::valid::Validator::new(naga::valid::ValidationFlags::all(), with)
            .subgroup_stages(naga::valid::ShaderStages::COMPUTE)
            .subgroup_operations(naga::valid::SubgroupOperationSet::all())
            .validate(&module)
            .unwrap_or_else(|e| panic!("{name} (subgroups): {}", e.emit_to_string(subgroups)));
        assert!(
            naga::valid::Validator::new(naga::valid::ValidationFlags::all(), core).validate(&module).is_err(),
            "{name}: the subgroup version validates without subgroup operations"
        );
        assert!(module.entry_points.iter().any(|ep| ep.name == name), "{name}: entry point");
    }
    assert_eq!(lanes::subgroup_source("rms_norm"), None);
}
