//! [`Constraint`]: structured output — a JSON schema or a regular expression that the generated
//! text must match, enforced token by token with llguidance (Microsoft's constrained-decoding
//! engine, MIT): before each token the logits of every token that cannot continue a match are
//! set to −∞. The generation loop runs it ([`crate::session::Generation::with_constraint`]:
//! [`Constraint::allowed`] before each pick, [`Constraint::commit`] after), so a constrained
//! text has a free one's stop strings, stream decoder and errors. The constraint's state is a
//! function of the tokens generated since the prompt, so a session that rewinds or stops and
//! continues rebuilds it by replaying them: exact.

use std::sync::Arc;

use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::{ApproximateTokEnv, InferenceCapabilities, TokEnv, TokRxInfo, TokTrie};
use llguidance::{Matcher, ParserFactory};

use crate::chat::grammar_error;
use crate::error::{Error, Result};
use crate::sampling::TokenMask;

/// What the generated text must match.
#[derive(Clone, Debug, PartialEq)]
pub enum Format {
    /// A JSON document valid under this JSON schema, its objects held to `strict` (OpenAI's
    /// `json_schema.strict`; `None` when absent): `Some(true)` — only the properties an object
    /// names, every one required (OpenAI's contract; an object that allows others is refused);
    /// `None` — no property an object does not name where it says nothing of
    /// `additionalProperties` (XGrammar's default); `Some(false)` — the schema as JSON Schema
    /// reads it.
    JsonSchema {
        /// The schema.
        schema: serde_json::Value,
        /// `strict`, when given.
        strict: Option<bool>,
    },
    /// Any JSON object (OpenAI's `json_object`).
    JsonObject,
    /// A regular expression (Rust `regex` syntax) matching the whole text.
    Regex(String),
    /// A grammar in llguidance's Lark dialect (a required tool call:
    /// [`crate::chat::ToolSyntax::grammar`]).
    Lark(String),
    /// The format after free thinking that ends with `\n</think>\n\n`, for a prompt that
    /// leaves the reply inside a think block ([`crate::chat::reasoning`]).
    AfterThinking(Box<Format>),
}

impl Format {
    /// Whether this is `inner` after thinking ([`Format::AfterThinking`]).
    pub fn after_thinking_of(&self, inner: &Format) -> bool {
        matches!(self, Format::AfterThinking(f) if f.as_ref() == inner)
    }
}

/// `schema` as it is compiled: rewritten for `strict`, and refused (`InvalidInput`, the
/// message starting with `what`) when `strict: true` meets an open object or a `$ref` recurses
/// without a base case.
pub(crate) fn prepare(
    schema: &serde_json::Value,
    strict: Option<bool>,
    what: &str,
) -> Result<serde_json::Value> {
    let schema = super::strict::apply(schema, strict, what)?;
    super::endless::check(&schema, what)?;
    Ok(schema)
}

/// llguidance's view of a tokenizer: every token's bytes, built once per model.
#[derive(Clone)]
pub struct Grammars {
    factory: Arc<ParserFactory>,
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
        .map_err(|e| Error::InvalidInput(format!("structured output: {e}")))?;
        factory.set_stderr_log_level(0);
        // An error's text without the parser's state dump (the message never shows it).
        factory.limits_mut().verbose_errors = false;
        Ok(Self { factory: Arc::new(factory) })
    }

    /// A fresh matcher for `format`. A format llguidance refuses, or that allows no text at
    /// all, is `InvalidInput` ([`Error::Grammar`]: a sentence naming what and where, the
    /// engine's text in `detail`); so is a schema [`prepare`] refuses.
    pub fn constraint(&self, format: &Format) -> Result<Constraint> {
        let (format, thinking) = match format {
            Format::AfterThinking(inner) => (inner.as_ref(), true),
            other => (other, false),
        };
        // JSON without free whitespace (llguidance's default lets a model pad it forever):
        // `x-guidance` in the schema overrides it.
        let compact = |mut schema: serde_json::Value| {
            if let Some(o) = schema.as_object_mut() {
                o.entry("x-guidance").or_insert_with(|| serde_json::json!({ "whitespace_flexible": false }));
            }
            TopLevelGrammar::from_json_schema(schema)
        };
        let (what, schema, grammar) = match format {
            Format::JsonSchema { schema, strict } => {
                let what = "response_format: the JSON schema";
                let schema = prepare(schema, *strict, what)?;
                (what.to_string(), Some(schema.clone()), compact(schema))
            }
            Format::JsonObject => (
                "response_format: json_object".into(),
                None,
                compact(serde_json::json!({ "type": "object" })),
            ),
            Format::Regex(rx) => ("response_format: the regex".into(), None, TopLevelGrammar::from_regex(rx)),
            Format::Lark(lark) => {
                ("tools: the tool-call grammar".into(), None, TopLevelGrammar::from_lark(lark.clone()))
            }
            Format::AfterThinking(_) => {
                return Err(Error::InvalidInput("structured output: thinking within thinking".into()));
            }
        };
        let grammar = if thinking { super::reasoning::after_thinking(grammar) } else { grammar };
        // A tool-call grammar's error names a line: the tool whose parameters it compiles.
        let refused = |raw: String| {
            let tool = match format {
                Format::Lark(lark) => super::tools::tool_at(lark, &raw),
                _ => None,
            };
            match tool {
                Some((name, params)) => grammar_error::refused(
                    &format!("tools: {}'s parameters", grammar_error::cap(&name, 40)),
                    &raw,
                    Some(&params),
                ),
                None => grammar_error::refused(&what, &raw, schema.as_ref()),
            }
        };
        let parser = self.factory.create_parser(grammar).map_err(|e| refused(e.to_string()))?;
        let mut matcher = Matcher::new(Ok(parser));
        if let Some(e) = matcher.get_error() {
            return Err(refused(e));
        }
        // The first mask now: a format no token can begin is refused here, not mid-generation.
        let first = matcher.compute_mask().map_err(|e| grammar_error::empty(&what, &e.to_string()))?;
        Ok(Constraint { matcher, fed: 0, first: Some(TokenMask { words: first.as_slice().to_vec() }) })
    }
}

/// One generation's matcher.
pub struct Constraint {
    matcher: Matcher,
    /// Tokens taken so far.
    fed: usize,
    /// The mask computed when the matcher was made, until a token is taken.
    first: Option<TokenMask>,
}

impl Constraint {
    /// The tokens that may come next.
    pub fn allowed(&mut self) -> Result<TokenMask> {
        if let Some(first) = self.first.take() {
            return Ok(first);
        }
        let allowed =
            self.matcher.compute_mask().map_err(|e| grammar_error::stuck(&e.to_string(), self.fed))?;
        Ok(TokenMask { words: allowed.as_slice().to_vec() })
    }

    /// Takes `token` as the next one.
    pub fn commit(&mut self, token: u32) -> Result<()> {
        self.first = None;
        self.matcher.consume_token(token).map_err(|e| grammar_error::stuck(&e.to_string(), self.fed))?;
        self.fed += 1;
        Ok(())
    }

    /// Takes `tokens` in order (a replay after a rewind).
    pub fn replay(&mut self, tokens: &[u32]) -> Result<()> {
        tokens.iter().try_for_each(|&t| self.commit(t))
    }

    /// Whether the text is complete (nothing but the end token may come).
    pub fn is_stopped(&self) -> bool {
        self.matcher.is_stopped()
    }
}
