//! GGUF: ggml's block types decoded as gguf-py decodes them (the reference: llama.cpp's own
//! Python package, `tools/fixtures/gguf_blocks.py`).

use safetensors::SafeTensors;
use webmamba::load::gguf::{GgmlType, dequant::dequantize};

#[test]
fn every_block_type_decodes_as_gguf_py_does() {
    let file = std::fs::read("tests/fixtures/ggml_blocks.safetensors").unwrap();
    let st = SafeTensors::deserialize(&file).unwrap();
    let types = [
        (0, "F32"),
        (1, "F16"),
        (30, "BF16"),
        (2, "Q4_0"),
        (3, "Q4_1"),
        (6, "Q5_0"),
        (7, "Q5_1"),
        (8, "Q8_0"),
        (12, "Q4_K"),
        (13, "Q5_K"),
        (14, "Q6_K"),
    ];
    for (id, name) in types {
        let ty = GgmlType::from_id(id).unwrap();
        assert_eq!(ty.name(), name);
        let bytes = st.tensor(&format!("{name}.bytes")).unwrap().data().to_vec();
        let want: Vec<f32> =
            bytemuck::pod_collect_to_vec(st.tensor(&format!("{name}.values")).unwrap().data());
        let mut got = Vec::new();
        dequantize(ty, &bytes, &mut got);
        assert_eq!(got.len(), want.len(), "{name}");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(g.to_bits() == w.to_bits(), "{name} element {i}: {g} vs gguf-py's {w}");
        }
    }
}
