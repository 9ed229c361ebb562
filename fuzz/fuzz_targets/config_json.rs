//! `config.json` in either format (Hugging Face `MambaForCausalLM`, or the original
//! state-spaces one with `d_model`, `n_layer`, `ssm_cfg`): [`Config::from_json`].
//! Checks: no panic; an accepted config's derived sizes compute without overflow, and
//! [`Config::to_hf_json`] parses back to an equal config.

#![no_main]

use libfuzzer_sys::fuzz_target;
use webmamba::{Config, State};

fuzz_target!(|data: &[u8]| {
    let Ok(config) = Config::from_json(data) else { return };
    let _ = State::floats(&config);
    let _ = State::bytes(&config);
    let json = config.to_hf_json();
    let back = Config::from_json(json.as_bytes())
        .unwrap_or_else(|e| panic!("to_hf_json of {config:?} does not parse back: {e}\n{json}"));
    assert_eq!(back, config, "to_hf_json round trip\n{json}");
});
