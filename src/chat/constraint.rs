//! [`Constraint`]: structured output — a JSON schema or a regular expression that the generated
//! text must match, enforced token by token with llguidance (Microsoft's constrained-decoding
//! engine, MIT): before each token the logits of every token that cannot continue a match are
//! set to −∞. The constraint's state is a function of the tokens generated since the prompt, so
//! a session that rewinds or stops and continues rebuilds it by replaying them: exact.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, InferenceCapabilities, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};

use crate::error::{Error, Result};

/// What the generated text must match.
#[derive(Clone, Debug, PartialEq)]
pub enum Format {
    /// A JSON document valid under this JSON schema (`{}`: any JSON object... any value).
    JsonSchema(serde_json::Value),
    /// Any JSON object (OpenAI's `json_object`).
    JsonObject,
    /// A regular expression (Rust `regex` syntax) matching the whole text.
    Regex(String),
    /// A grammar in llguidance's Lark dialect (a required tool call:
    /// [`crate::chat::ToolSyntax::grammar`]).
    Lark(String),
}

/// llguidance's view of a tokenizer: every token's bytes, built once per model.
#[derive(Clone)]
pub struct Grammars {
    factory: Arc<ParserFactory>,
}

fn err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::InvalidInput(format!("{what}: {e}"))
}

impl Grammars {
    /// From `tokenizer.json`'s text and the model's vocabulary size and end token.
    pub fn new(tokenizer_json: &[u8], vocab: usize, eos: u32) -> Result<Self> {
        let json: serde_json::Value =
            serde_json::from_slice(tokenizer_json).map_err(|e| Error::Tokenizer(e.to_string()))?;
        let mut words = llguidance::token_bytes_from_tokenizer_json(&json)
            .map_err(|e| Error::Tokenizer(format!("structured output needs the tokens' bytes: {e}")))?;
        words.resize(words.len().max(vocab), Vec::new());
        let trie = TokTrie::from(&TokRxInfo::new(words.len() as u32, eos), &words);
        let env: TokEnv = Arc::new(ApproximateTokEnv::new(trie));
        let mut factory = ParserFactory::new(
            &env,
            InferenceCapabilities::default(),
            &llguidance::earley::SlicedBiasComputer::general_slices(),
        )
        .map_err(|e| err("structured output", e))?;
        factory.set_stderr_log_level(0);
        Ok(Self { factory: Arc::new(factory) })
    }

    /// A fresh matcher for `format`; a schema or regex llguidance refuses is `InvalidInput`.
    pub fn constraint(&self, format: &Format) -> Result<Constraint> {
        // JSON without free whitespace (llguidance's default lets a model pad it forever):
        // `x-guidance` in the schema overrides it.
        let compact = |mut schema: serde_json::Value| {
            if let Some(o) = schema.as_object_mut() {
                o.entry("x-guidance").or_insert_with(|| serde_json::json!({ "whitespace_flexible": false }));
            }
            TopLevelGrammar::from_json_schema(schema)
        };
        let grammar = match format {
            Format::JsonSchema(schema) => compact(schema.clone()),
            Format::JsonObject => compact(serde_json::json!({ "type": "object" })),
            Format::Regex(rx) => TopLevelGrammar::from_regex(rx),
            Format::Lark(lark) => TopLevelGrammar::from_lark(lark.clone()),
        };
        let parser = self.factory.create_parser(grammar).map_err(|e| err("response_format", e))?;
        let matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(err("response_format", e));
        }
        Ok(Constraint { matcher })
    }
}

/// One generation's matcher.
pub struct Constraint {
    matcher: Matcher,
}

impl Constraint {
    /// Sets the logits of every token that cannot come next to −∞.
    pub fn mask(&mut self, logits: &mut [f32]) -> Result<()> {
        let allowed = self.matcher.compute_mask().map_err(|e| err("structured output", e))?;
        for (i, l) in logits.iter_mut().enumerate() {
            if !allowed.is_allowed(i as u32) {
                *l = f32::NEG_INFINITY;
            }
        }
        Ok(())
    }

    /// Takes `token` as the next one.
    pub fn commit(&mut self, token: u32) -> Result<()> {
        self.matcher.consume_token(token).map_err(|e| err("structured output", e))
    }

    /// Takes `tokens` in order (a replay after a rewind).
    pub fn replay(&mut self, tokens: &[u32]) -> Result<()> {
        self.matcher.consume_tokens(tokens).map_err(|e| err("structured output", e))
    }

    /// Whether the text is complete (nothing but the end token may come).
    pub fn is_stopped(&self) -> bool {
        self.matcher.is_stopped()
    }
}

/// What a constrained generation made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Constrained {
    /// The text (the end token's not included).
    pub text: String,
    /// The tokens fed (the end token included when it came).
    pub tokens: Vec<u32>,
    /// Whether the text is complete: the constraint finished, or an end token came.
    pub complete: bool,
}

/// Generates up to `max_tokens` tokens after session `id`'s history under `constraint` (which
/// must already hold the tokens generated since the prompt, see [`Constraint::replay`]), sampling
/// with `sampler` from the masked logits on the host; `on_piece` gets each piece of text and
/// returns false to stop. Ends at an end token of the runtime or when the constraint is complete.
pub async fn generate(
    rt: &mut crate::session::Runtime,
    id: crate::session::SessionId,
    tokenizer: &crate::tokenizer::Tokenizer,
    sampler: &mut crate::sampling::Sampler,
    constraint: &mut Constraint,
    max_tokens: usize,
    mut on_piece: impl FnMut(&str, u32) -> bool,
) -> Result<Constrained> {
    let mut out = Constrained::default();
    let mut stream = tokenizer.stream(true);
    for _ in 0..max_tokens {
        if constraint.is_stopped() {
            out.complete = true;
            break;
        }
        let mut logits = rt
            .logits(id)?
            .ok_or_else(|| Error::InvalidInput("structured output needs a prompt first".into()))?
            .to_vec();
        constraint.mask(&mut logits)?;
        let token = sampler.sample(&logits, rt.history(id)?)?;
        constraint.commit(token)?;
        rt.append(id, &[token]).await?;
        out.tokens.push(token);
        if rt.end_tokens().contains(&token) {
            out.complete = true;
            break;
        }
        if let Some(piece) = stream.step(tokenizer, token)? {
            out.text.push_str(&piece);
            if !on_piece(&piece, token) {
                break;
            }
        }
    }
    let tail = stream.finish(tokenizer)?;
    out.text.push_str(&tail);
    out.complete |= constraint.is_stopped();
    Ok(out)
}
