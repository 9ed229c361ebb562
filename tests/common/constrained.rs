//! A constrained generation run to the end the way `session.generate` with a `responseFormat`
//! runs it — a [`Generation`] held to a [`Constraint`] — with what the tests read of it. Used
//! by `#[path]` from the tests of structured output (`chat.rs`, `structured.rs`).

use webmamba::chat::constraint::Constraint;
use webmamba::sampling::Sampler;
use webmamba::session::{Generation, Pace, Piece};
use webmamba::{GenerateOptions, Runtime, SessionId, Tokenizer};

/// What a constrained generation made.
pub struct Made {
    /// The text shown: every piece and the tail held back to the end.
    pub text: String,
    /// The tokens handed out (the end token included when it came).
    pub tokens: Vec<u32>,
    /// Whether the text came to its end ([`Generation::is_complete`]).
    pub complete: bool,
}

/// Up to `max_tokens` tokens after session `id`'s history under `constraint` (holding the
/// tokens since its text began), drawn by `sampler` (whose random stream moves on, as a
/// session's does) and ending at any of `stops`; `on_piece` sees each piece and says whether
/// to go on.
#[allow(clippy::too_many_arguments)]
pub async fn generate(
    rt: &mut Runtime,
    id: SessionId,
    tokenizer: &Tokenizer,
    sampler: &mut Sampler,
    constraint: Constraint,
    max_tokens: usize,
    stops: &[&str],
    mut on_piece: impl FnMut(&Piece) -> bool,
) -> webmamba::Result<Made> {
    let options = GenerateOptions { max_tokens, stop_at_eos: true };
    let stops = stops.iter().map(|s| s.to_string()).collect();
    let mut g =
        Generation::new(tokenizer, sampler.clone(), options, stops, Pace::ToEnd)?.with_constraint(constraint);
    let (mut text, mut tokens) = (String::new(), Vec::new());
    let ran = g
        .run(rt, id, tokenizer, |p| {
            text.push_str(&p.text);
            tokens.push(p.token);
            on_piece(p)
        })
        .await;
    let complete = g.is_complete();
    *sampler = g.into_sampler();
    text.push_str(&ran?);
    Ok(Made { text, tokens, complete })
}
