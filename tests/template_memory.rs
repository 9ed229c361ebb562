//! A chat template cannot take the tab down (issue 54): the templates of
//! tests/fixtures/chat/memory-bombs.json — each growing a string, list or map without end in
//! another way (`~`, `+`, `*`, `join`, `format`, `replace`, `indent`, loops, captures, macros,
//! namespaces, `tojson`) — end as typed `Template` errors naming the memory limit within 5 s,
//! natively and in the browser, and the next rendering works; HF's published templates render
//! far below the limit (the test prints how far). `tests/cli.rs` runs the issue's template
//! through `webmamba chat --template` under a 1 GB address-space cap.

use serde::Deserialize;
use webmamba::chat::{ChatTemplate, TEMPLATE_MEMORY};

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

const BOMBS: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/memory-bombs.json"));
const REFERENCES: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/references.json"));
const QWEN: &str =
    include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/chatml-qwen2.5-instruct.jinja"));

#[derive(Deserialize)]
struct Bomb {
    name: String,
    template: String,
}

#[derive(Deserialize)]
struct Bombs {
    bombs: Vec<Bomb>,
}

/// Milliseconds since some fixed point (`std::time::Instant` panics in wasm32).
fn now_ms() -> f64 {
    #[cfg(target_arch = "wasm32")]
    {
        js_sys::Date::now()
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        use std::sync::OnceLock;
        static START: OnceLock<std::time::Instant> = OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_secs_f64() * 1e3
    }
}

const CONVERSATION: &str = r#"{"messages": [{"role": "user", "content": "Hello"}]}"#;

both! {
    fn every_memory_bomb_is_a_template_error_within_five_seconds() {
        let bombs: Bombs = serde_json::from_str(BOMBS).unwrap();
        assert!(bombs.bombs.len() >= 11, "{} templates", bombs.bombs.len());
        let good = ChatTemplate::new(QWEN, Vec::new()).unwrap();
        for bomb in &bombs.bombs {
            let t0 = now_ms();
            // A constant expression may already be refused when compiling.
            let err = match ChatTemplate::new(&bomb.template, Vec::new()) {
                Ok(t) => t.render_prompt(CONVERSATION).expect_err(&bomb.name),
                Err(e) => e,
            };
            let ms = now_ms() - t0;
            assert_eq!(err.code(), "Template", "{}: {err}", bomb.name);
            let text = err.to_string();
            assert!(text.contains("template memory limit of "), "{}: {text}", bomb.name);
            assert!(text.len() < 400, "{}: {} characters", bomb.name, text.len());
            assert!(ms < 5000.0, "{}: {ms:.0} ms", bomb.name);
            println!("{:34} {ms:7.1} ms  {text}", bomb.name);
            // The next rendering works.
            assert!(good.render_prompt(CONVERSATION).unwrap().ends_with("<|im_start|>assistant\n"));
        }
    }

    fn published_templates_stay_far_below_the_limit() {
        #[derive(Deserialize)]
        struct Case<'a> {
            template: String,
            case: String,
            #[serde(borrow)]
            context: &'a serde_json::value::RawValue,
            rendered: Option<String>,
        }
        #[derive(Deserialize)]
        struct References<'a> {
            #[serde(borrow)]
            cases: Vec<Case<'a>>,
        }
        let refs: References = serde_json::from_str(REFERENCES).unwrap();
        let mut most = 0.0f64;
        for case in refs.cases.iter().filter(|c| c.rendered.is_some()) {
            let source = match case.template.as_str() {
                "granite-4.0-h" => include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/granite-4.0-h.jinja")),
                "chatml-qwen2.5-instruct" => QWEN,
                "falcon-h1" => include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/falcon-h1.jinja")),
                "nemotron-nano-v2" => include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/nemotron-nano-v2.jinja")),
                "qwen3.5" => include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/qwen3.5.jinja")),
                "lfm2" => include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/chat/lfm2.jinja")),
                other => panic!("no template {other}"),
            };
            let t = ChatTemplate::new(source, Vec::new()).unwrap();
            let (rendered, usage) = t.render_measured(case.context.get(), false);
            rendered.unwrap_or_else(|e| panic!("{} / {}: {e}", case.template, case.case));
            assert!(usage.limit >= TEMPLATE_MEMORY);
            let share = (usage.largest as f64 / usage.limit as f64).max(usage.total as f64 / (16.0 * usage.limit as f64));
            most = most.max(share);
            println!(
                "{:24} {:18} largest {:6} B, all {:7} B of {} B: {:.4}%",
                case.template, case.case, usage.largest, usage.total, usage.limit, share * 100.0
            );
        }
        println!("published templates: at most {:.4}% of the limit", most * 100.0);
        assert!(most < 0.01, "a published template used {:.2}% of its memory limit", most * 100.0);
    }

    fn a_long_conversation_raises_the_limit_with_it() {
        // Twice the conversation's size on top of 4 MiB: a 6 MB conversation still renders.
        let long = "x".repeat(6_000_000);
        let ctx = serde_json::json!({ "messages": [{"role": "user", "content": long}] }).to_string();
        let t = ChatTemplate::new(QWEN, Vec::new()).unwrap();
        let (rendered, usage) = t.render_measured(&ctx, true);
        assert!(rendered.unwrap().len() > 6_000_000);
        assert_eq!(usage.limit, TEMPLATE_MEMORY + 2 * ctx.len());
        // A template message (`raise_exception`) as long as the limit allows is cut short.
        let t = ChatTemplate::new("{{ raise_exception('y' * 3000000) }}", Vec::new()).unwrap();
        let err = t.render(CONVERSATION).unwrap_err();
        assert!(err.to_string().len() < 700, "{} characters", err.to_string().len());
    }
}
