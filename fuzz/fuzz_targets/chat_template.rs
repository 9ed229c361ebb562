//! A chat template from a model folder (tokenizer_config.json's `chat_template`) and the text a
//! model replies with: the input is a template, a NUL byte, then a reply.
//! [`ChatTemplate::new`] and a rendering of a conversation with tools and a tool call;
//! [`ToolSyntax::from_template`] on it, and with the syntax found (else Qwen2.5's, a fixture),
//! [`ToolSyntax::parse`] of the reply and [`ToolSyntax::grammar`] for two tools.
//! Checks: no panic; every call read has JSON arguments; the fuel bounds every rendering.

#![no_main]

use libfuzzer_sys::fuzz_target;
use webmamba::chat::{ChatTemplate, ToolSyntax};

const CONTEXT: &str = r#"{"messages": [{"role": "system", "content": "Be brief."},
  {"role": "user", "content": "Weather in Paris?"},
  {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
  {"role": "tool", "content": "21"}, {"role": "user", "content": "Thanks"}],
  "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]}"#;

const QWEN: &str = include_str!("../../tests/fixtures/chat/chatml-qwen2.5-instruct.jinja");

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let (source, reply) = text.split_once('\0').unwrap_or((&text, ""));
    let tools: serde_json::Value = serde_json::from_str(CONTEXT).map(|c: serde_json::Value| c["tools"].clone()).unwrap();
    let special = vec![("eos_token".to_string(), "<|im_end|>".to_string())];
    let syntax = match ChatTemplate::new(source, special.clone()) {
        Ok(t) => {
            let _ = t.render_prompt(CONTEXT);
            ToolSyntax::from_template(&t)
        }
        Err(_) => None,
    };
    let syntax = syntax.or_else(|| ToolSyntax::from_template(&ChatTemplate::new(QWEN, special).unwrap())).unwrap();
    for call in syntax.parse(reply).calls {
        serde_json::from_str::<serde_json::Value>(&call.arguments)
            .unwrap_or_else(|e| panic!("arguments {:?} are not JSON: {e}", call.arguments));
    }
    let _ = syntax.grammar(&tools, None, true);
    let _ = syntax.grammar(&tools, Some("get_weather"), false);
});
