//! Chat templates, natively and in headless Chromium: published instruct checkpoints'
//! templates (tests/fixtures/chat, sources in SOURCES.md) render byte for byte what HF
//! transformers renders (`tools/fixtures/chat_templates.py` → references.json) for
//! conversations with a system prompt, several turns, tools and a tool call, documents; a
//! broken template is a typed `Template` error naming its line; the checkpoint files' chat
//! settings (`tokenizer_config.json`, `chat_template.jinja`, `generation_config.json`) parse;
//! tool calls are read back from HF's renderings, and required calls are valid and re-render.

use serde::Deserialize;
use serde_json::value::RawValue;
use webmamba::Error;
use webmamba::chat::{ChatConfig, ChatTemplate};

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

macro_rules! both {
    ($($(#[$doc:meta])* fn $name:ident() $body:block)*) => {$(
        $(#[$doc])*
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
        "falcon-h1" => {
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/falcon-h1.jinja"))
        }
        "nemotron-nano-v2" => {
            include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/nemotron-nano-v2.jinja"))
        }
        "qwen3.5" => include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/qwen3.5.jinja")),
        "lfm2" => include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/lfm2.jinja")),
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
        assert_eq!(tools, 16, "tool cases rendered");
    }

    fn a_broken_template_is_a_typed_error_naming_its_line() {
        let err = ChatTemplate::new("{% for m in messages %}\n{{ m.content }}\n{% endfor", Vec::new()).err().unwrap();
        assert!(matches!(err, Error::Template { line: Some(3), .. }), "{err}");
        // The template's own refusal, with its message.
        let t = ChatTemplate::new("ok\n{{ raise_exception('Only user and assistant roles are supported!') }}", Vec::new()).unwrap();
        let err = t.render(r#"{"messages": []}"#).unwrap_err();
        assert!(matches!(&err, Error::Template { line: Some(2), message } if message.contains("Only user and assistant")), "{err}");
        // A template that would run for hours runs out of fuel.
        let t = ChatTemplate::new("{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}", Vec::new()).unwrap();
        let err = t.render(r#"{"messages": []}"#).unwrap_err();
        assert!(matches!(&err, Error::Template { message, .. } if message.contains("fuel")), "{err}");
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
        // A list of end ids longer than any checkpoint's, and a file of a million values, are
        // refused before they are built (issue 54).
        let many = format!(r#"{{"eos_token_id": [{}]}}"#, vec!["2"; 2000].join(","));
        let err = ChatConfig::from_files(None, None, Some(many.as_bytes()), None).unwrap_err();
        assert!(err.to_string().contains("2000 ids; at most 1024"), "{err}");
        let huge = format!(r#"{{"temperature": 0.7, "x": [{}]}}"#, vec!["0"; 1_100_000].join(","));
        let err = ChatConfig::from_files(None, None, Some(huge.as_bytes()), None).unwrap_err();
        assert_eq!(err.code(), "Config");
        assert!(err.to_string().contains("more than 1048576 JSON values"), "{err}");
        let bad_template = br#"{"chat_template": 5}"#;
        assert_eq!(ChatConfig::from_files(Some(bad_template), None, None, None).unwrap_err().code(), "Config");
    }
}

#[path = "common/constrained.rs"]
mod constrained;
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
    use crate::constrained::generate;
    use webmamba::chat::constraint::{Format, Grammars};
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
    let format = Format::JsonSchema { schema, strict: None };
    for seed in 0..20 {
        rt.rewind(id, prompt.len()).await.unwrap();
        let mut sampler = Sampler::new(sampling, seed).unwrap();
        let k = grammars.constraint(&format).unwrap();
        let out = generate(&mut rt, id, &tokenizer, &mut sampler, k, 200, &[], |_| true).await.unwrap();
        assert!(out.complete, "seed {seed}: complete: {:?}", out.text);
        valid(&out.text).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
    }
    // Stopped after 5 pieces (inside the JSON), then continued: the constraint is rebuilt by
    // replaying the tokens generated since the prompt.
    rt.rewind(id, prompt.len()).await.unwrap();
    let mut sampler = Sampler::new(sampling, 7).unwrap();
    let k = grammars.constraint(&format).unwrap();
    let mut pieces = 0;
    let first = generate(&mut rt, id, &tokenizer, &mut sampler, k, 200, &[], |p| {
        pieces += !p.text.is_empty() as usize;
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
    let rest = generate(&mut rt, id, &tokenizer, &mut sampler, replayed, 200, &[], |_| true).await.unwrap();
    let whole = tokenizer.decode(&rt.history(id).unwrap()[prompt.len()..], true).unwrap();
    assert!(rest.complete);
    valid(&whole).unwrap_or_else(|e| panic!("continued after a stop: {e}"));
    // Regenerate after the stop: from the prompt end, a fresh constraint.
    rt.rewind(id, prompt.len()).await.unwrap();
    let k = grammars.constraint(&format).unwrap();
    let again =
        generate(&mut rt, id, &tokenizer, &mut Sampler::new(sampling, 8).unwrap(), k, 200, &[], |_| true)
            .await
            .unwrap();
    valid(&again.text).unwrap_or_else(|e| panic!("regenerated: {e}"));
    // A regex, matched whole.
    rt.rewind(id, prompt.len()).await.unwrap();
    let k = grammars.constraint(&Format::Regex("(Lord|Lady) [A-Z][a-z]{2,8}".into())).unwrap();
    let out =
        generate(&mut rt, id, &tokenizer, &mut Sampler::new(sampling, 3).unwrap(), k, 40, &[], |_| true)
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
    let bad = grammars.constraint(&Format::JsonSchema {
        schema: serde_json::json!({ "type": "no-such-type" }),
        strict: None,
    });
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

fn special_tokens(template: &str) -> Vec<(String, String)> {
    let eos = if template == "granite-4.0-h" { "<|end_of_text|>" } else { "<|im_end|>" };
    vec![("eos_token".into(), eos.into())]
}

both! {
    /// Each template's tool-call syntax, learned by rendering a probe, reads back the calls of
    /// every conversation HF rendered with calls in it (JSON arguments, Qwen3.5's XML-style
    /// ones; the system prompt's example block, not JSON, stays text).
    fn tool_calls_read_back_from_hf_renderings() {
        use webmamba::chat::{Arguments, ToolCall, ToolSyntax};
        let refs: References = serde_json::from_str(REFERENCES).unwrap();
        let mut read = 0;
        for case in &refs.cases {
            let t = ChatTemplate::new(template(&case.template), special_tokens(&case.template)).unwrap();
            // Falcon-H1's template writes an assistant message's content only, never its calls.
            let Some(syntax) = ToolSyntax::from_template(&t) else {
                assert_eq!(case.template, "falcon-h1", "no tool syntax");
                continue;
            };
            // LFM2's writes no calls either: its model writes Pythonic ones in its content
            // (known by the template's tool tokens; read back in tests/tool_formats.rs).
            if case.template == "lfm2" {
                assert_eq!(syntax.arguments, Arguments::Pythonic);
                continue;
            }
            // One tag pair per call (Hermes' format; Qwen3.5's XML-style calls), or one block
            // of a JSON list (Nemotron's).
            let (open, close, block, separator) = match case.template.as_str() {
                "nemotron-nano-v2" => ("<TOOLCALL>", "</TOOLCALL>", ("<TOOLCALL>[", "]</TOOLCALL>"), ", "),
                _ => ("<tool_call>", "</tool_call>", ("", ""), "\n"),
            };
            let (before_arguments, arguments) = match case.template.as_str() {
                "qwen3.5" => (">\n", Arguments::Xml { open: "<parameter=".into(), mid: ">\n".into(), close: "\n</parameter>\n".into() }),
                _ => ("\", \"arguments\": ", Arguments::Json),
            };
            assert_eq!((syntax.open.as_str(), syntax.close.as_str()), (open, close), "{}", case.template);
            assert_eq!((syntax.block_open.as_str(), syntax.block_close.as_str()), block, "{}", case.template);
            assert_eq!((syntax.before_arguments.as_str(), syntax.separator.as_str()), (before_arguments, separator));
            assert_eq!(syntax.arguments, arguments, "{}", case.template);
            let Some(rendered) = &case.rendered else { continue };
            // Qwen3.5's system prompt shows a call in its format: the conversation after it.
            let rendered = match case.template.as_str() {
                "qwen3.5" => &rendered[rendered.find("<|im_start|>user").unwrap()..],
                _ => rendered.as_str(),
            };
            let context: serde_json::Value = serde_json::from_str(case.context.get()).unwrap();
            let want: Vec<(String, serde_json::Value)> = context["messages"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
                .map(|c| (c["function"]["name"].as_str().unwrap().to_string(), c["function"]["arguments"].clone()))
                .collect();
            let got: Vec<(String, serde_json::Value)> = syntax
                .parse(rendered)
                .calls
                .into_iter()
                .map(|c| (c.name, serde_json::from_str(&c.arguments).unwrap()))
                .collect();
            assert_eq!(got, want, "{} / {}", case.template, case.case);
            read += want.len();
        }
        assert_eq!(read, 15, "calls in the references");
        // Text around calls, a block that is not a call, arguments written as a string, a list
        // of calls in one block, a reply that ended before its closing tag.
        let t = ChatTemplate::new(template("chatml-qwen2.5-instruct"), special_tokens("")).unwrap();
        let s = ToolSyntax::from_template(&t).unwrap();
        let call = |name: &str, arguments: &str| ToolCall { name: name.into(), arguments: arguments.into() };
        let r = s.parse("Let me look.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>\n<tool_call>\nnot json\n</tool_call>");
        assert_eq!(r.calls, vec![call("f", "{\"x\": [1, 2]}")]);
        assert_eq!(r.content, "Let me look.\n\n<tool_call>\nnot json\n</tool_call>");
        let r = s.parse("<tool_call>[{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}, {\"name\": \"g\", \"parameters\": {}}]</tool_call>");
        assert_eq!((r.calls, r.content), (vec![call("f", "{\"x\": 1}"), call("g", "{}")], String::new()));
        let r = s.parse("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}");
        assert_eq!(r.calls, vec![call("f", "{}")]);
        assert_eq!(s.parse("plain text, <tool_call> nothing").calls, vec![]);
        assert_eq!(s.parse("plain text, <tool_call> nothing").content, "plain text, <tool_call> nothing");
        // A generation prompt that parts from the calls inside a character (é and ê share their
        // first byte): taken apart at whole characters.
        let odd = ChatTemplate::new(
            "{%- for m in messages %}{% if m.role == 'user' %}U:{{ m.content }}\n{% elif m.tool_calls %}{% for c in m.tool_calls %}\
             é<call>{\"name\": \"{{ c.function.name }}\", \"arguments\": {{ c.function.arguments | tojson }}}</call>{% endfor %}\
             {% endif %}{% endfor %}{% if add_generation_prompt %}ê{% endif %}",
            Vec::new(),
        )
        .unwrap();
        let s2 = ToolSyntax::from_template(&odd).unwrap();
        assert_eq!((s2.open.as_str(), s2.close.as_str(), s2.separator.as_str()), ("é<call>", "</call>", ""));
        assert_eq!(s2.parse("é<call>{\"name\": \"f\", \"arguments\": {}}</call>").calls, vec![call("f", "{}")]);
        // A template without tool calls has no syntax.
        let plain = ChatTemplate::new("{% for m in messages %}{{ m.content }}{% endfor %}", Vec::new()).unwrap();
        assert_eq!(ToolSyntax::from_template(&plain), None);
    }
}

/// A required tool call on the default model (CPU) with Qwen2.5's template: 20 seeded replies
/// constrained by the template's own call syntax each parse to one call of a listed tool with
/// arguments valid under its schema; a named tool_choice calls that tool; parallel calls each
/// parse; and the next turn (the call sent back as the conversation's assistant message, the
/// tool's result) reads only its new tokens - the model's call re-renders as it wrote it.
async fn required_tool_calls_parse_validate_and_re_render() {
    use crate::constrained::generate;
    use webmamba::chat::constraint::{Format, Grammars};
    use webmamba::chat::{ChatHistory, ToolSyntax};
    use webmamba::sampling::{Sampler, SamplingOptions};
    use webmamba::{CacheConfig, Engine, Runtime, Tokenizer};
    let c = default_model::checkpoint().unwrap();
    let json = c.tokenizer_json.clone().unwrap();
    let tokenizer = Tokenizer::from_bytes(&json).unwrap();
    let grammars = Grammars::new(&json, c.config.vocab_size, 0).unwrap();
    let t = ChatTemplate::new(template("chatml-qwen2.5-instruct"), special_tokens("")).unwrap();
    let syntax = ToolSyntax::from_template(&t).unwrap();
    let tools = serde_json::json!([
        { "type": "function", "function": { "name": "get_weather", "description": "The weather in a city.",
          "parameters": { "type": "object", "properties": { "city": { "type": "string", "maxLength": 16 },
            "unit": { "enum": ["celsius", "fahrenheit"] } }, "required": ["city"], "additionalProperties": false } } },
        { "type": "function", "function": { "name": "add", "description": "Adds two integers.",
          "parameters": { "type": "object", "properties": { "a": { "type": "integer", "minimum": -999, "maximum": 999 },
            "b": { "type": "integer", "minimum": -999, "maximum": 999 } },
            "required": ["a", "b"], "additionalProperties": false } } }
    ]);
    let valid = |name: &str, arguments: &str| -> Result<(), String> {
        let v: serde_json::Value =
            serde_json::from_str(arguments).map_err(|e| format!("{arguments:?}: {e}"))?;
        let o = v.as_object().ok_or("arguments not an object")?;
        let keys: Vec<&str> = o.keys().map(String::as_str).collect();
        let ok = match name {
            "get_weather" => {
                o.get("city").and_then(|c| c.as_str()).is_some_and(|c| c.chars().count() <= 16)
                    && o.get("unit").is_none_or(|u| u == "celsius" || u == "fahrenheit")
                    && keys.iter().all(|k| ["city", "unit"].contains(k))
            }
            // JSON's integers include -0 (serde_json reads it as a float).
            "add" => {
                keys == ["a", "b"]
                    && o.values().all(|x| x.as_f64().is_some_and(|x| x.fract() == 0.0 && x.abs() <= 999.0))
            }
            _ => false,
        };
        ok.then_some(()).ok_or(format!("{name}({arguments}) breaks the schema"))
    };
    let user = serde_json::json!({ "role": "user", "content": "What is the weather in Verona?" });
    let rendered =
        t.render_prompt(&serde_json::json!({ "messages": [user], "tools": tools }).to_string()).unwrap();
    let prompt = tokenizer.encode(&rendered, false).unwrap();
    let mut rt = Runtime::new(Engine::cpu(c.weights().unwrap()), CacheConfig::default()).unwrap();
    let id = rt.new_session().unwrap();
    rt.append(id, &prompt).await.unwrap();
    let sampling = SamplingOptions { temperature: 1.0, top_k: 0, top_p: 1.0, repetition_penalty: 1.0 };
    let one = Format::Lark(syntax.grammar(&tools, None, false).unwrap());
    let mut last = None;
    for seed in 0..20 {
        rt.rewind(id, prompt.len()).await.unwrap();
        let k = grammars.constraint(&one).unwrap();
        let mut sampler = Sampler::new(sampling, seed).unwrap();
        let out = generate(&mut rt, id, &tokenizer, &mut sampler, k, 120, &[], |_| true).await.unwrap();
        let reply = syntax.parse(&out.text);
        assert!(
            out.complete && reply.calls.len() == 1 && reply.content.is_empty(),
            "seed {seed}: {:?}",
            out.text
        );
        valid(&reply.calls[0].name, &reply.calls[0].arguments).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        last = Some((out, reply));
    }
    // The last reply, sent back: the next turn keeps the history and prefills only the glue
    // and the tool's result.
    let (out, reply) = last.unwrap();
    let mut history = ChatHistory::default();
    let generated = &rt.history(id).unwrap()[prompt.len()..].to_vec();
    assert_eq!(generated, &out.tokens);
    history.record(&rendered, &prompt, generated, &tokenizer).unwrap();
    let call = &reply.calls[0];
    let arguments: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
    let messages = serde_json::json!([user,
        { "role": "assistant", "content": "", "tool_calls": [{ "type": "function", "function": { "name": call.name, "arguments": arguments } }] },
        { "role": "tool", "content": "{\"temperature\": 21}" }]);
    let next =
        t.render_prompt(&serde_json::json!({ "messages": messages, "tools": tools }).to_string()).unwrap();
    let before = rt.history(id).unwrap().to_vec();
    let target = history.target(&before, &next, &tokenizer).unwrap();
    let glue = "<|im_end|>\n<|im_start|>user\n<tool_response>\n{\"temperature\": 21}\n</tool_response><|im_end|>\n<|im_start|>assistant\n";
    assert_eq!(
        (target.kept, target.tokens.len() - before.len()),
        (before.len(), tokenizer.encode(glue, false).unwrap().len())
    );
    let edited = rt.edit(id, &target.tokens).await.unwrap();
    assert_eq!(edited.prefilled, target.tokens.len() - before.len());
    // A named tool.
    let named = Format::Lark(syntax.grammar(&tools, Some("add"), false).unwrap());
    for seed in 0..3 {
        rt.rewind(id, prompt.len()).await.unwrap();
        let k = grammars.constraint(&named).unwrap();
        let out = generate(
            &mut rt,
            id,
            &tokenizer,
            &mut Sampler::new(sampling, seed).unwrap(),
            k,
            120,
            &[],
            |_| true,
        )
        .await
        .unwrap();
        let calls = syntax.parse(&out.text).calls;
        assert!(calls.len() == 1 && calls[0].name == "add", "{:?}", out.text);
        valid("add", &calls[0].arguments).unwrap();
    }
    // Parallel calls: every call made parses and validates.
    let many = Format::Lark(syntax.grammar(&tools, None, true).unwrap());
    for seed in 0..3 {
        rt.rewind(id, prompt.len()).await.unwrap();
        let k = grammars.constraint(&many).unwrap();
        let out = generate(
            &mut rt,
            id,
            &tokenizer,
            &mut Sampler::new(sampling, seed).unwrap(),
            k,
            160,
            &[],
            |_| true,
        )
        .await
        .unwrap();
        let whole = match out.complete {
            true => out.text.as_str(),
            false => &out.text[..out.text.rfind("</tool_call>").unwrap() + 12],
        };
        let reply = syntax.parse(whole);
        assert!(!reply.calls.is_empty() && reply.content.is_empty(), "{:?}", out.text);
        for c in &reply.calls {
            valid(&c.name, &c.arguments).unwrap();
        }
    }
    // Nemotron's block of calls: `<TOOLCALL>[` calls joined by ", " `]</TOOLCALL>`.
    let nemotron = ChatTemplate::new(template("nemotron-nano-v2"), Vec::new()).unwrap();
    let block = ToolSyntax::from_template(&nemotron).unwrap();
    let prompt = tokenizer
        .encode(
            &nemotron
                .render_prompt(&serde_json::json!({ "messages": [user], "tools": tools }).to_string())
                .unwrap(),
            false,
        )
        .unwrap();
    rt.edit(id, &prompt).await.unwrap();
    for (seed, parallel) in [(0, false), (1, false), (2, true), (3, true)] {
        rt.rewind(id, prompt.len()).await.unwrap();
        let k = grammars.constraint(&Format::Lark(block.grammar(&tools, None, parallel).unwrap())).unwrap();
        let mut sampler = Sampler::new(sampling, seed).unwrap();
        let out = generate(&mut rt, id, &tokenizer, &mut sampler, k, 240, &[], |_| true).await.unwrap();
        // A tiny model may go on adding calls to the token limit: the calls made so far.
        let text = match out.complete {
            true => out.text.clone(),
            false => format!("{}]</TOOLCALL>", &out.text[..out.text.rfind("}, ").unwrap() + 1]),
        };
        let reply = block.parse(&text);
        assert!(
            (out.complete || parallel)
                && text.starts_with("<TOOLCALL>[{\"name\": \"")
                && text.ends_with("}]</TOOLCALL>")
                && (parallel || reply.calls.len() == 1)
                && !reply.calls.is_empty()
                && reply.content.is_empty(),
            "seed {seed}: {:?}",
            out.text
        );
        for c in &reply.calls {
            valid(&c.name, &c.arguments).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
    }
    // A tool_choice naming no tool, and tools that are not a list, are InvalidInput.
    assert_eq!(syntax.grammar(&tools, Some("nope"), false).unwrap_err().code(), "InvalidInput");
    assert_eq!(syntax.grammar(&serde_json::json!({}), None, false).unwrap_err().code(), "InvalidInput");
}

#[cfg(not(target_arch = "wasm32"))]
#[test]
fn required_tool_calls() {
    pollster::block_on(required_tool_calls_parse_validate_and_re_render());
}

#[cfg(target_arch = "wasm32")]
#[wasm_bindgen_test::wasm_bindgen_test]
async fn required_tool_calls() {
    required_tool_calls_parse_validate_and_re_render().await;
}
