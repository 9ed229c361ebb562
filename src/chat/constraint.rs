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
use crate::sampling::TokenMask;
use crate::session::{Decoding, GenerateOptions, Pace};

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
    /// The tokens that may come next.
    pub fn allowed(&mut self) -> Result<TokenMask> {
        let allowed = self.matcher.compute_mask().map_err(|e| err("structured output", e))?;
        Ok(TokenMask { words: allowed.as_slice().to_vec() })
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
/// must already hold the tokens generated since the prompt, see [`Constraint::replay`]): the
/// runtime's decode loop with the constraint's mask on every pick — drawn from the device's
/// top-k summary where it decides (a GPU engine; greedy or top-k sampling), else from all V
/// logits with the masked ones at −∞ — the same tokens either way. `on_piece` gets each piece
/// of text and returns false to stop. Ends at an end token of the runtime or when the
/// constraint is complete; the end of the history is then kept as the session's prompt-end.
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
    let mut d = Decoding::new(GenerateOptions { max_tokens, stop_at_eos: true }, Pace::ToEnd);
    let ran: Result<()> = async {
        loop {
            if constraint.is_stopped() {
                out.complete = true;
                return Ok(());
            }
            d.set_mask(Some(constraint.allowed()?));
            let Some(token) = rt.decode_next(id, &mut d, sampler).await? else { return Ok(()) };
            constraint.commit(token)?;
            out.tokens.push(token);
            if d.reached_eos() {
                out.complete = true;
                return Ok(());
            }
            if let Some(piece) = stream.step(tokenizer, token)? {
                out.text.push_str(&piece);
                if !on_piece(&piece, token) {
                    return Ok(());
                }
            }
            if !d.is_over() {
                crate::platform::yield_now().await;
            }
        }
    }
    .await;
    // What was generated stays, whatever happened; its end is kept if the failure allows.
    let ended = rt.end_decoding(id, &mut d).await;
    ran?;
    ended?;
    let tail = stream.finish(tokenizer)?;
    out.text.push_str(&tail);
    out.complete |= constraint.is_stopped();
    Ok(out)
}
