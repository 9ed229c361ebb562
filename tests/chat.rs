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
