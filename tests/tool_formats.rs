//! Tool calls in the formats that are not one JSON object per call (issue 56), natively and in
//! headless Chromium: Qwen3.5's XML-style calls (`<function=…>` with one `<parameter=…>` per
//! argument), learned from its template, and LFM2's Pythonic calls (`[f(a="x", n=1)]` between
//! its tool-call tokens), known by its template's tool tokens. Replies are read back (values
//! typed by the tools' schemas; Python literals), a call re-rendered through the template reads
//! back as the same call, and the required-call grammars compile with llguidance, take
//! well-formed calls and refuse malformed ones.

use serde_json::{Value, json};
use webmamba::chat::constraint::{Format, Grammars};
use webmamba::chat::{Arguments, ChatTemplate, ToolCall, ToolSyntax, reasoning};

#[path = "../src/bin/webmamba/default_model.rs"]
#[allow(dead_code)]
mod default_model;

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

const QWEN35: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/qwen3.5.jinja"));
const LFM2: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/lfm2.jinja"));

fn qwen35() -> (ChatTemplate, ToolSyntax) {
    let t = ChatTemplate::new(QWEN35, vec![("eos_token".into(), "<|im_end|>".into())]).unwrap();
    let s = ToolSyntax::from_template(&t).unwrap();
    (t, s)
}

fn lfm2() -> (ChatTemplate, ToolSyntax) {
    let t = ChatTemplate::new(LFM2, vec![("bos_token".into(), "<|startoftext|>".into())]).unwrap();
    let s = ToolSyntax::from_template(&t).unwrap();
    (t, s)
}

fn tools() -> Value {
    json!([
        { "type": "function", "function": { "name": "get_weather", "parameters": { "type": "object",
            "properties": { "city": { "type": "string" }, "unit": { "type": "string", "enum": ["celsius", "fahrenheit"] } },
            "required": ["city"] } } },
        { "type": "function", "function": { "name": "plan", "parameters": { "type": "object",
            "properties": { "note": { "type": "string" }, "days": { "type": "integer" }, "budget": { "type": "number" },
                "flexible": { "type": "boolean" }, "stops": { "type": "array", "items": { "type": "string" } },
                "prefs": { "type": "object", "properties": { "rooms": { "type": "integer" } }, "additionalProperties": true } },
            "required": ["days"] } } }
    ])
}

fn call(name: &str, arguments: Value) -> ToolCall {
    ToolCall { name: name.into(), arguments: arguments.to_string() }
}

/// The calls as an assistant message's `tool_calls`, rendered after a user message; the text
/// from the assistant's turn on.
fn rendered_turn(t: &ChatTemplate, content: &str, calls: &[ToolCall]) -> String {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|c| json!({ "type": "function", "function": { "name": c.name, "arguments": serde_json::from_str::<Value>(&c.arguments).unwrap() } }))
        .collect();
    let mut assistant = json!({ "role": "assistant", "content": content });
    if !tool_calls.is_empty() {
        assistant["tool_calls"] = tool_calls.into();
    }
    let context = json!({ "messages": [{ "role": "user", "content": "Go." }, assistant], "tools": tools() });
    let whole = t.render(&context.to_string()).unwrap();
    whole[whole.find("Go.<|im_end|>").unwrap()..].to_string()
}

/// The default model's tokenizer and grammar compiler.
fn setup() -> (webmamba::Tokenizer, Grammars) {
    let c = default_model::checkpoint().unwrap();
    let json = c.tokenizer_json.clone().unwrap();
    (webmamba::Tokenizer::from_bytes(&json).unwrap(), Grammars::new(&json, c.config.vocab_size, 0).unwrap())
}

/// Whether the matcher for `grammar` takes `text`'s tokens and may then end (the end token,
/// 0 here, allowed).
fn accepts(g: &(webmamba::Tokenizer, Grammars), grammar: &str, text: &str) -> bool {
    let mut k = g.1.constraint(&Format::Lark(grammar.to_string())).unwrap();
    k.replay(&g.0.encode(text, false).unwrap()).is_ok()
        && (k.is_stopped() || k.allowed().is_ok_and(|m| m.allows(0)))
}

/// A tricky set of calls: strings with newlines, quotes and markup, numbers, nested values.
fn tricky() -> Vec<ToolCall> {
    vec![
        call("get_weather", json!({ "city": "Zürich \"old town\"\nnorth <b>side</b>", "unit": "celsius" })),
        call(
            "plan",
            json!({ "note": "42", "days": 3, "budget": 1250.5, "flexible": true,
            "stops": ["Bern", "Lu\"zern"], "prefs": { "rooms": 2, "view": { "lake": [1, 2.5] } } }),
        ),
        call("plan", json!({ "note": "", "days": -1, "flexible": false })),
    ]
}

both! {
    /// Qwen3.5's template: XML-style calls learned, read back typed, and re-rendered.
    fn qwen35_xml_calls_read_back_and_round_trip() {
        let (t, s) = qwen35();
        let xml = Arguments::Xml { open: "<parameter=".into(), mid: ">\n".into(), close: "\n</parameter>\n".into() };
        assert_eq!(s.arguments, xml);
        assert_eq!((s.open.as_str(), s.close.as_str(), s.separator.as_str()), ("<tool_call>", "</tool_call>", "\n"));
        assert_eq!((s.block_open.as_str(), s.block_close.as_str(), s.before_arguments.as_str()), ("", "", ">\n"));
        let tools = tools();
        // A reply as the model writes it: reasoning, text, two calls; values typed by the schema
        // (a string parameter's "42" stays a string; without the schema it is a number).
        let reply = "Let me check.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSan \"Fran\"\ncisco\n</parameter>\n</function>\n</tool_call>\n\
                     <tool_call>\n<function=plan>\n<parameter=note>\n42\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=flexible>\nTrue\n</parameter>\n\
                     <parameter=prefs>\n{\"rooms\": 2, \"view\": {\"lake\": [1, 2.5]}}\n</parameter>\n<parameter=stops>\nNone\n</parameter>\n</function>\n</tool_call>";
        let r = s.parse_with(reply, Some(&tools));
        assert_eq!(r.content, "Let me check.");
        assert_eq!(r.calls, vec![
            call("get_weather", json!({ "city": "San \"Fran\"\ncisco" })),
            call("plan", json!({ "note": "42", "days": 3, "flexible": true, "prefs": { "rooms": 2, "view": { "lake": [1, 2.5] } }, "stops": null })),
        ]);
        assert_eq!(s.parse(reply).calls[1], call("plan", json!({ "note": 42, "days": 3, "flexible": true, "prefs": { "rooms": 2, "view": { "lake": [1, 2.5] } }, "stops": null })));
        // A reply that ended before its closing tags; a block with no function stays text.
        let cut = s.parse("<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n");
        assert_eq!(cut.calls, vec![call("get_weather", json!({ "city": "Rome" }))]);
        let none = s.parse("See <tool_call>{\"name\": \"f\"}</tool_call> there.");
        assert_eq!((none.calls.len(), none.content.as_str()), (0, "See <tool_call>{\"name\": \"f\"}</tool_call> there."));
        // Round trip: calls rendered by the template read back as the same calls.
        for (i, calls) in [tricky(), tricky()[..1].to_vec(), vec![call("plan", json!({ "days": 0 }))]].iter().enumerate() {
            let text = rendered_turn(&t, "", calls);
            assert_eq!(&s.parse_with(&text, Some(&tools)).calls, calls, "case {i}: {text}");
            let with_text = rendered_turn(&t, "Calling.", calls);
            let r = s.parse_with(&with_text, Some(&tools));
            assert!(r.content.contains("Calling.") && &r.calls == calls, "case {i}: {with_text}");
        }
    }

    /// LFM2's template: Pythonic calls, read back (Python literals), written, re-rendered.
    fn lfm2_pythonic_calls_read_back_and_round_trip() {
        let (t, s) = lfm2();
        assert_eq!(s.arguments, Arguments::Pythonic);
        assert_eq!((s.open.as_str(), s.close.as_str()), ("<|tool_call_start|>", "<|tool_call_end|>"));
        assert_eq!((s.block_open.as_str(), s.block_close.as_str(), s.separator.as_str()), ("<|tool_call_start|>[", "]<|tool_call_end|>", ", "));
        let reply = "<|tool_call_start|>[get_weather(city='It\\'s \"here\"\\nnow', unit=\"celsius\"), plan(days=3, budget=1_250.5, flexible=True, \
                     stops=['Bern', \"Lu\\u00e9\"], prefs={'rooms': 2, 'view': {'lake': (1, .5, -2e3)}}, note=None), ping()]<|tool_call_end|>Checking the weather.";
        let r = s.parse(reply);
        assert_eq!(r.content, "Checking the weather.");
        assert_eq!(r.calls, vec![
            call("get_weather", json!({ "city": "It's \"here\"\nnow", "unit": "celsius" })),
            call("plan", json!({ "days": 3, "budget": 1250.5, "flexible": true, "stops": ["Bern", "Lué"],
                "prefs": { "rooms": 2, "view": { "lake": [1, 0.5, -2000.0] } }, "note": null })),
            call("ping", json!({})),
        ]);
        // Not a call list: stays text.
        for bad in ["<|tool_call_start|>[get_weather(city=)]<|tool_call_end|>", "<|tool_call_start|>[f(\"x\")]<|tool_call_end|>",
                    "<|tool_call_start|>[f(a=\"open)]<|tool_call_end|>", "<|tool_call_start|>[f(a=1) g()]<|tool_call_end|>"] {
            let r = s.parse(bad);
            assert_eq!((r.calls.len(), r.content.as_str()), (0, bad));
        }
        // Nesting past 64 levels is not read (nor a stack overflow).
        let deep = |n: usize| format!("<|tool_call_start|>[f(a={}{})]<|tool_call_end|>", "[".repeat(n), "]".repeat(n));
        assert_eq!(s.parse(&deep(60)).calls.len(), 1);
        assert_eq!(s.parse(&deep(100_000)).calls.len(), 0);
        // The HF reference's Pythonic call in content.
        let refs: Value = serde_json::from_str(include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/references.json"))).unwrap();
        let case = refs["cases"].as_array().unwrap().iter().find(|c| c["template"] == "lfm2" && c["case"] == "tools-pythonic").unwrap();
        let calls = s.parse(case["rendered"].as_str().unwrap()).calls;
        assert_eq!(calls, vec![call("get_weather", json!({ "city": "Paris" }))]);
        // Round trip: written in the content as the model writes them, rendered by the template.
        for calls in [tricky(), tricky()[2..].to_vec()] {
            let written = s.write_in_content(&calls).unwrap();
            let text = rendered_turn(&t, &written, &[]);
            assert!(text.contains(&written));
            assert_eq!(s.parse(&text).calls, calls, "{text}");
        }
        assert_eq!(qwen35().1.write_in_content(&tricky()), None);
        // An OpenAI-shaped assistant message (content null, `tool_calls`) sent back: its calls
        // are written into its content, as the model wrote them, for the template to show.
        let ctx = json!({ "messages": [
            { "role": "user", "content": "Weather in Paris?" },
            { "role": "assistant", "content": null, "tool_calls": [
                { "type": "function", "function": { "name": "get_weather", "arguments": "{\"city\": \"Paris\"}" } }] },
            { "role": "tool", "content": "22 C" },
        ] })
        .to_string();
        let written = s.calls_into_content(&ctx).unwrap().expect("calls written");
        let text = t.render(&written).unwrap();
        assert!(text.contains("<|tool_call_start|>[get_weather(city=\"Paris\")]<|tool_call_end|>"), "{text}");
        assert_eq!(s.parse(&text).calls, vec![call("get_weather", json!({ "city": "Paris" }))]);
        // Content that already holds them (the reply's text sent back) and other formats: unchanged.
        assert_eq!(s.calls_into_content(&written).unwrap(), None);
        assert_eq!(qwen35().1.calls_into_content(&ctx).unwrap(), None);
    }

    /// Required-call grammars: compiled by llguidance, well-formed calls taken (the text the
    /// template writes for them), malformed ones refused.
    fn xml_and_pythonic_grammars_take_only_well_formed_calls() {
        let g = setup();
        let tools = tools();
        let (t, xml) = qwen35();
        let one = xml.grammar(&tools, None, false).unwrap();
        let many = xml.grammar(&tools, None, true).unwrap();
        // What the template writes for the tricky calls, each alone and all together.
        let tricky = tricky();
        let strip = |text: String| text["Go.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n".len()..text.len() - "<|im_end|>\n".len()].to_string();
        for c in &tricky {
            let text = strip(rendered_turn(&t, "", std::slice::from_ref(c)));
            assert!(accepts(&g, &one, &text), "{text}");
        }
        let all = strip(rendered_turn(&t, "", &tricky));
        assert!(!accepts(&g, &one, &all) && accepts(&g, &many, &all), "{all}");
        let w = |body: &str| format!("<tool_call>\n<function=get_weather>\n{body}</function>\n</tool_call>");
        let city = "<parameter=city>\nVerona\n</parameter>\n";
        assert!(accepts(&g, &one, &w(city)));
        assert!(accepts(&g, &one, &w(&format!("{city}<parameter=unit>\nfahrenheit\n</parameter>\n"))));
        for bad in [
            w(""), // city is required
            w(&format!("{city}<parameter=unit>\nkelvin\n</parameter>\n")), // not in the enum
            w(&format!("<parameter=unit>\ncelsius\n</parameter>\n{city}")), // out of order
            w(&format!("{city}<parameter=country>\nItaly\n</parameter>\n")), // no such parameter
            w("<parameter=city>\nVe</parameter>rona\n</parameter>\n"), // the closing tag inside
            w(city).replace("get_weather", "get_wether"),
            w(city).replace("<tool_call>\n", "<tool_call>"),
            "<tool_call>\n<function=plan>\n<parameter=days>\nthree\n</parameter>\n</function>\n</tool_call>".into(),
            "<tool_call>\n<function=plan>\n<parameter=days>\n3\n</parameter>\n<parameter=flexible>\ntrue\n</parameter>\n</function>\n</tool_call>".into(),
        ] {
            assert!(!accepts(&g, &one, &bad), "{bad}");
        }
        let named = xml.grammar(&tools, Some("plan"), false).unwrap();
        assert!(!accepts(&g, &named, &w(city)));
        // Pythonic.
        let (_, py) = lfm2();
        let one = py.grammar(&tools, None, false).unwrap();
        let many = py.grammar(&tools, None, true).unwrap();
        for c in &tricky {
            let text = py.write_in_content(std::slice::from_ref(c)).unwrap();
            assert!(accepts(&g, &one, &text), "{text}");
        }
        let all = py.write_in_content(&tricky).unwrap();
        assert!(!accepts(&g, &one, &all) && accepts(&g, &many, &all), "{all}");
        let p = |calls: &str| format!("<|tool_call_start|>[{calls}]<|tool_call_end|>");
        assert!(accepts(&g, &one, &p("get_weather(city=\"Verona\")")));
        assert!(accepts(&g, &one, &p("plan(days=2, flexible=False)")));
        for bad in [p("get_weather()"), p("get_weather(city='Verona')"), p("get_weather(town=\"Verona\")"),
                    p("plan(days=2, flexible=false)"), p("plan(days=2.5)"), "get_weather(city=\"Verona\")".into(),
                    p("get_weather(city=\"Verona\",unit=\"celsius\")")] {
            assert!(!accepts(&g, &one, &bad), "{bad}");
        }
        // Calls without parameters' properties take any names.
        let open = json!([{ "name": "anything", "parameters": { "type": "object" } }]);
        assert!(accepts(&g, &py.grammar(&open, None, false).unwrap(), &p("anything(x=1, y=[\"a\"])")));
        assert!(accepts(&g, &xml.grammar(&open, None, false).unwrap(), "<tool_call>\n<function=anything>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>"));
        // A parameter llguidance refuses names its tool.
        let bad = json!([{ "name": "lookup", "parameters": { "type": "object", "properties": { "n": { "type": "integer", "not": { "const": 3 } } } } }]);
        for s in [&xml, &py] {
            let e = g.1.constraint(&Format::Lark(s.grammar(&bad, None, false).unwrap())).err().map(|e| e.to_string());
            assert!(e.as_deref().is_some_and(|e| e.contains("lookup")), "{e:?}");
        }
    }

    /// Qwen3.5 with thinking on (its default): the generation prompt opens `<think>`, so a
    /// required call comes after free thinking and `\n</think>\n\n`; the reply splits into the
    /// reasoning and the call, and the template renders that message back (reasoning_content,
    /// tool_calls) as exactly the prompt and the model's text — so the next turn reuses them.
    fn qwen35_thinking_then_a_required_call() {
        let (t, s) = qwen35();
        let g = setup();
        let ask = json!({ "messages": [{ "role": "user", "content": "Go." }], "tools": tools() });
        let prompt = t.render_prompt(&ask.to_string()).unwrap();
        assert!(reasoning::opens_thinking(&prompt), "{prompt:?}");
        let mut off = ask.clone();
        off["enable_thinking"] = false.into();
        assert!(!reasoning::opens_thinking(&t.render_prompt(&off.to_string()).unwrap()));

        let format = Format::AfterThinking(Box::new(Format::Lark(s.grammar(&tools(), None, false).unwrap())));
        let takes = |text: &str| {
            let mut k = g.1.constraint(&format).unwrap();
            k.replay(&g.0.encode(text, false).unwrap()).is_ok() && (k.is_stopped() || k.allowed().is_ok_and(|m| m.allows(0)))
        };
        let the_call = "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>";
        for thought in ["", "Rome, then.", "Two <b>lines</b>\nof thought."] {
            let reply = format!("{thought}\n</think>\n\n{the_call}");
            assert!(takes(&reply), "{reply:?}");
            let (r, answer) = reasoning::split(&reply);
            assert_eq!(r, thought);
            let parsed = s.parse_with(answer, Some(&tools()));
            assert_eq!((parsed.content.as_str(), parsed.calls.clone()), ("", vec![call("get_weather", json!({ "city": "Rome" }))]));
            // The message sent back as OpenAI-compatible servers return it.
            let mut back = ask.clone();
            back["messages"].as_array_mut().unwrap().push(json!({ "role": "assistant", "content": "", "reasoning_content": r,
                "tool_calls": [{ "type": "function", "function": { "name": "get_weather", "arguments": { "city": "Rome" } } }] }));
            let again = t.render(&back.to_string()).unwrap();
            assert!(again.starts_with(&format!("{prompt}{reply}")), "{again:?}");
        }
        // The call must come after the thinking, and nothing but a call after it.
        assert!(!takes(the_call));
        assert!(!takes(&format!("Hmm.\n</think>\n\nSunny. {the_call}")));
        // A response_format after thinking too.
        let json_after = Format::AfterThinking(Box::new(Format::JsonObject));
        let mut k = g.1.constraint(&json_after).unwrap();
        assert!(k.replay(&g.0.encode("Braces.\n</think>\n\n{\"a\":1}", false).unwrap()).is_ok());
        // JSON at once is thinking still: the reply may not end there.
        let mut k = g.1.constraint(&json_after).unwrap();
        k.replay(&g.0.encode("{\"a\":1}", false).unwrap()).unwrap();
        assert!(!k.is_stopped() && !k.allowed().unwrap().allows(0));
    }
}
