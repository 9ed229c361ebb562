//! Chat templates, natively and in headless Chromium: published instruct checkpoints'
//! templates (tests/fixtures/chat, sources in SOURCES.md) render byte for byte what HF
//! transformers renders (`tools/fixtures/chat_templates.py` → references.json) for
//! conversations with a system prompt, several turns, tools and a tool call, documents; a
//! broken template is a typed `Template` error naming its line; the checkpoint files' chat
//! settings (`tokenizer_config.json`, `chat_template.jinja`, `generation_config.json`) parse.

use serde::Deserialize;
use serde_json::value::RawValue;
use webmamba::Error;
use webmamba::chat::{ChatConfig, ChatTemplate};

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

macro_rules! both {
    ($(fn $name:ident() $body:block)*) => {$(
        #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
        #[cfg_attr(not(target_arch = "wasm32"), test)]
        fn $name() $body
    )*};
}

const REFERENCES: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/references.json"));

fn template(name: &str) -> &'static str {
    match name {
        "granite-4.0-h" => {
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/granite-4.0-h.jinja"))
        }
        "chatml-qwen2.5-instruct" => {
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/chat/chatml-qwen2.5-instruct.jinja"
            ))
        }
        other => panic!("no template {other}"),
    }
}

#[derive(Deserialize)]
struct Case<'a> {
    template: String,
    case: String,
    #[serde(borrow)]
    context: &'a RawValue,
    rendered: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
struct References<'a> {
    clock: String,
    #[serde(borrow)]
    cases: Vec<Case<'a>>,
}

both! {
    fn published_templates_render_as_hf_does() {
        let refs: References = serde_json::from_str(REFERENCES).unwrap();
        let now = chrono::NaiveDateTime::parse_from_str(&refs.clock, "%Y-%m-%dT%H:%M:%S").unwrap();
        assert!(refs.cases.len() >= 18, "{} cases", refs.cases.len());
        let mut tools = 0;
        for case in &refs.cases {
            let t = ChatTemplate::with_clock(template(&case.template), Vec::new(), Some(now))
                .unwrap_or_else(|e| panic!("{}: {e}", case.template));
            let got = t.render(case.context.get());
            match (&case.rendered, &case.error, got) {
                (Some(want), _, Ok(got)) => {
                    assert!(
                        &got == want,
                        "{} / {}: rendered differently from HF\n--- HF:\n{want}\n--- webmamba:\n{got}",
                        case.template,
                        case.case
                    );
                    tools += case.case.starts_with("tools") as usize;
                }
                (_, Some(want), Err(e)) => assert_eq!(e.code(), "Template", "{}: {want} vs {e}", case.case),
                (_, _, got) => panic!("{} / {}: HF {:?} / {:?}, webmamba {got:?}", case.template, case.case, case.rendered, case.error),
            }
        }
        assert_eq!(tools, 4, "tool cases rendered");
    }

    fn a_broken_template_is_a_typed_error_naming_its_line() {
        let err = ChatTemplate::new("{% for m in messages %}\n{{ m.content }}\n{% endfor", Vec::new()).err().unwrap();
        assert!(matches!(err, Error::Template { line: Some(3), .. }), "{err}");
        // The template's own refusal, with its message.
        let t = ChatTemplate::new("ok\n{{ raise_exception('Only user and assistant roles are supported!') }}", Vec::new()).unwrap();
        let err = t.render(r#"{"messages": []}"#).unwrap_err();
        assert!(matches!(&err, Error::Template { line: Some(2), message } if message.contains("Only user and assistant")), "{err}");
        // Not a conversation.
        assert_eq!(t.render("[1, 2]").unwrap_err().code(), "InvalidInput");
        assert_eq!(t.render("{}").unwrap_err().code(), "InvalidInput");
    }

    fn checkpoint_files_give_template_special_tokens_and_end_ids() {
        let tokenizer_config = br#"{"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}],
            "bos_token": {"__type": "AddedToken", "content": "<s>"}, "eos_token": "<|im_end|>", "pad_token": null}"#;
        let generation = br#"{"eos_token_id": [2, 7], "temperature": 0.6, "top_p": 0.9, "max_length": 9}"#;
        let config = br#"{"eos_token_id": 7, "bos_token_id": 1}"#;
        let c = ChatConfig::from_files(Some(tokenizer_config), None, Some(generation), Some(config)).unwrap();
        assert_eq!((c.template(false), c.template(true)), (Some("D"), Some("T")));
        assert_eq!((c.special("bos_token"), c.special("eos_token"), c.special("pad_token")), (Some("<s>"), Some("<|im_end|>"), None));
        assert_eq!(c.eos_token_ids, vec![2, 7]);
        assert_eq!(c.end_ids(|t| (t == "<|im_end|>").then_some(11)), vec![2, 7, 11]);
        assert_eq!(c.generation.keys().collect::<Vec<_>>(), ["temperature", "top_p"]);
        // chat_template.jinja wins over tokenizer_config.json's default.
        let c = ChatConfig::from_files(Some(tokenizer_config), Some(b"J"), None, None).unwrap();
        assert_eq!((c.template(false), c.template(true)), (Some("J"), Some("T")));
        // A single eos id, and none anywhere.
        let c = ChatConfig::from_files(None, None, Some(br#"{"eos_token_id": 0}"#), None).unwrap();
        assert_eq!((c.eos_token_ids.clone(), c.template(false)), (vec![0], None));
        for bad in [&br#"{"eos_token_id": -1}"#[..], br#"{"eos_token_id": "x"}"#, b"{"] {
            assert_eq!(ChatConfig::from_files(None, None, Some(bad), None).unwrap_err().code(), "Config");
        }
        let bad_template = br#"{"chat_template": 5}"#;
        assert_eq!(ChatConfig::from_files(Some(bad_template), None, None, None).unwrap_err().code(), "Config");
    }
}

#[path = "../src/bin/webmamba/default_model.rs"]
#[allow(dead_code)]
mod default_model;

/// A 4-turn chat with a ChatML template (Qwen2.5's) on the default model (CPU): turn k prefills
/// exactly the tokens of the template's glue and message k (the previous reply stays as the
/// model's own tokens), and each turn's greedy reply equals an uncached run — a fresh runtime
/// fed the same history — and, where the whole rendered text tokenizes to that history, the run
/// of the rendered text.
async fn four_turns_read_only_their_new_tokens() {
    use webmamba::chat::ChatHistory;
    use webmamba::sampling::Sampler;
    use webmamba::{CacheConfig, Engine, GenerateOptions, Runtime, Tokenizer};
    let c = default_model::checkpoint().unwrap();
    let tokenizer = Tokenizer::from_bytes(c.tokenizer_json.as_deref().unwrap()).unwrap();
    let template = ChatTemplate::new(
        template("chatml-qwen2.5-instruct"),
        vec![("eos_token".into(), "<|im_end|>".into())],
    )
    .unwrap();
    let options = GenerateOptions { max_tokens: 12, stop_at_eos: true };
    let mut rt = Runtime::new(Engine::cpu(c.weights().unwrap()), CacheConfig::default()).unwrap();
    let id = rt.new_session().unwrap();
    let mut history = ChatHistory::default();
    let mut messages =
        vec![serde_json::json!({"role": "system", "content": "You are a player in a Shakespeare play."})];
    let mut whole_text_equal = 0;
    for (k, message) in
        ["Good morrow, sir.", "What news from the court?", "Speak, I pray thee.", "Farewell then."]
            .iter()
            .enumerate()
    {
        messages.push(serde_json::json!({"role": "user", "content": message}));
        let rendered =
            template.render_prompt(&serde_json::json!({ "messages": messages }).to_string()).unwrap();
        let before = rt.history(id).unwrap().to_vec();
        let target = history.target(&before, &rendered, &tokenizer).unwrap();
        let out = rt.edit(id, &target.tokens).await.unwrap();
        if k == 0 {
            assert_eq!(out.prefilled, target.tokens.len());
        } else {
            // The glue after the previous reply, the message, the generation prompt: counted
            // from the format, not from the template.
            let glue = format!("<|im_end|>\n<|im_start|>user\n{message}<|im_end|>\n<|im_start|>assistant\n");
            let expected = tokenizer.encode(&glue, false).unwrap().len();
            assert_eq!(
                (target.kept, out.prefilled),
                (before.len(), expected),
                "turn {k}: only its own tokens"
            );
        }
        let reply = rt.generate(id, &mut Sampler::greedy(), options, |_| true).await.unwrap();
        history.record(&rendered, &target.tokens, &reply, &tokenizer).unwrap();
        // Uncached: a fresh runtime fed the same history.
        let mut fresh = Runtime::new(Engine::cpu(c.weights().unwrap()), CacheConfig::default()).unwrap();
        let s = fresh.new_session().unwrap();
        fresh.append(s, &target.tokens).await.unwrap();
        let again = fresh.generate(s, &mut Sampler::greedy(), options, |_| true).await.unwrap();
        assert_eq!(reply, again, "turn {k}: the reply equals an uncached run");
        if tokenizer.encode(&rendered, false).unwrap() == target.tokens {
            whole_text_equal += 1;
        }
        messages.push(
            serde_json::json!({"role": "assistant", "content": tokenizer.decode(&reply, true).unwrap()}),
        );
    }
    // The model's replies re-tokenize as they were generated here, so the cached turns are
    // also exactly the uncached run of each whole rendered conversation.
    assert_eq!(whole_text_equal, 4, "turns whose rendered text tokenizes to the session's history");
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn four_turn_chat() {
    pollster::block_on(four_turns_read_only_their_new_tokens());
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen_test::wasm_bindgen_test]
async fn four_turn_chat() {
    four_turns_read_only_their_new_tokens().await;
}

/// Structured output (llguidance) on the default model (CPU): 20 seeded samples under a small
/// JSON schema all parse and validate (checked here by hand against the schema's rules); a
/// generation stopped inside the JSON then continued (the constraint replaying the tokens made
/// so far) ends valid too, as does a regenerate from the prompt; a regex is matched exactly.
async fn structured_output_is_valid_json_and_survives_a_stop() {
    use webmamba::chat::constraint::{Format, Grammars, generate};
    use webmamba::sampling::{Sampler, SamplingOptions};
    use webmamba::{CacheConfig, Engine, Runtime, Tokenizer};
    let c = default_model::checkpoint().unwrap();
    let json = c.tokenizer_json.clone().unwrap();
    let tokenizer = Tokenizer::from_bytes(&json).unwrap();
    let grammars = Grammars::new(&json, c.config.vocab_size, 0).unwrap();
    let schema = serde_json::json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "maxLength": 12 },
            "age": { "type": "integer", "minimum": 0, "maximum": 120 },
            "mood": { "enum": ["merry", "sad"] }
        },
        "required": ["name", "age", "mood"],
        "additionalProperties": false
    });
    let valid = |text: &str| -> Result<(), String> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("{text:?}: {e}"))?;
        let o = v.as_object().ok_or("not an object")?;
        let keys: Vec<&str> = o.keys().map(String::as_str).collect();
        let name = o.get("name").and_then(|n| n.as_str()).ok_or("name")?;
        let age = o.get("age").and_then(|a| a.as_u64()).ok_or("age")?;
        let mood = o.get("mood").and_then(|m| m.as_str()).ok_or("mood")?;
        (keys == ["name", "age", "mood"]
            && name.chars().count() <= 12
            && age <= 120
            && ["merry", "sad"].contains(&mood))
        .then_some(())
        .ok_or(format!("{text:?} breaks the schema"))
    };
    let mut rt = Runtime::new(Engine::cpu(c.weights().unwrap()), CacheConfig::default()).unwrap();
    let id = rt.new_session().unwrap();
    let prompt = tokenizer.encode("The record of the player:", false).unwrap();
    rt.append(id, &prompt).await.unwrap();
    let sampling = SamplingOptions { temperature: 1.0, top_k: 0, top_p: 1.0, repetition_penalty: 1.0 };
    let format = Format::JsonSchema(schema);
    for seed in 0..20 {
        rt.rewind(id, prompt.len()).await.unwrap();
        let mut sampler = Sampler::new(sampling, seed).unwrap();
        let mut k = grammars.constraint(&format).unwrap();
        let out = generate(&mut rt, id, &tokenizer, &mut sampler, &mut k, 200, |_, _| true).await.unwrap();
        assert!(out.complete, "seed {seed}: complete: {:?}", out.text);
        valid(&out.text).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
    // Stopped after 5 pieces (inside the JSON), then continued: the constraint is rebuilt by
    // replaying the tokens generated since the prompt.
    rt.rewind(id, prompt.len()).await.unwrap();
    let mut sampler = Sampler::new(sampling, 7).unwrap();
    let mut k = grammars.constraint(&format).unwrap();
    let mut pieces = 0;
    let first = generate(&mut rt, id, &tokenizer, &mut sampler, &mut k, 200, |_, _| {
        pieces += 1;
        pieces < 5
    })
    .await
    .unwrap();
    assert!(
        !first.complete && serde_json::from_str::<serde_json::Value>(&first.text).is_err(),
        "{:?}",
        first.text
    );
    let mut replayed = grammars.constraint(&format).unwrap();
    replayed.replay(&rt.history(id).unwrap()[prompt.len()..]).unwrap();
    let rest =
        generate(&mut rt, id, &tokenizer, &mut sampler, &mut replayed, 200, |_, _| true).await.unwrap();
    let whole = tokenizer.decode(&rt.history(id).unwrap()[prompt.len()..], true).unwrap();
    assert!(rest.complete);
    valid(&whole).unwrap_or_else(|e| panic!("continued after a stop: {e}"));
    // Regenerate after the stop: from the prompt end, a fresh constraint.
    rt.rewind(id, prompt.len()).await.unwrap();
    let mut k = grammars.constraint(&format).unwrap();
    let again =
        generate(&mut rt, id, &tokenizer, &mut Sampler::new(sampling, 8).unwrap(), &mut k, 200, |_, _| true)
            .await
            .unwrap();
    valid(&again.text).unwrap_or_else(|e| panic!("regenerated: {e}"));
    // A regex, matched whole.
    rt.rewind(id, prompt.len()).await.unwrap();
    let mut k = grammars.constraint(&Format::Regex("(Lord|Lady) [A-Z][a-z]{2,8}".into())).unwrap();
    let out =
        generate(&mut rt, id, &tokenizer, &mut Sampler::new(sampling, 3).unwrap(), &mut k, 40, |_, _| true)
            .await
            .unwrap();
    let (title, rest) = out.text.split_once(' ').unwrap_or_else(|| panic!("{:?}", out.text));
    assert!(
        out.complete
            && ["Lord", "Lady"].contains(&title)
            && rest.chars().next().unwrap().is_ascii_uppercase()
            && (3..=9).contains(&rest.len())
            && rest[1..].chars().all(|c| c.is_ascii_lowercase()),
        "{:?}",
        out.text
    );
    // A schema llguidance refuses is InvalidInput.
    let bad = grammars.constraint(&Format::JsonSchema(serde_json::json!({ "type": "no-such-type" })));
    assert_eq!(bad.err().map(|e| e.code()), Some("InvalidInput"));
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn structured_output() {
    pollster::block_on(structured_output_is_valid_json_and_survives_a_stop());
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen_test::wasm_bindgen_test]
async fn structured_output() {
    structured_output_is_valid_json_and_survives_a_stop().await;
}
