//! [`Generation`]: text generated on a session — the decode loop ([`Runtime::decode_next`])
//! with its sampler, the tokenizer's stream decoder, stop strings and the end-of-text token.
//! The JS API's `Session.generate`, `Session.chat` and `Session.stream` and the CLI's
//! `generate` all run it, free or constrained: generate is [`Generation::run`],
//! [`Generation::next`] until the end; a stream is one [`Generation::next`] per pull, at
//! [`Pace::Stepwise`].
//!
//! **Constrained text** ([`Generation::with_constraint`]: a JSON schema, a regex, a required
//! tool call) is the same loop with a grammar's mask on every pick: before each token the
//! constraint says which tokens may come ([`crate::sampling::TokenMask`], to
//! [`Decoding::set_mask`]), after it the token is committed to it, and the generation ends once
//! the text is complete. Everything else — text, stop strings, the end token, errors — is
//! shared, so a constrained text ends at a stop string as a free one does.
//!
//! **Text.** Each token's text comes from the stream decoder (special tokens skipped; a token
//! inside a character gives none until the character is whole) through [`StopStrings`], which
//! holds back a tail that may become a stop string. A stop string ends the generation; the text
//! before it is all that shows. With `stop_at_eos` the end-of-text token ends it too: it stays
//! in the history, and its text is not shown.
//!
//! **Errors.** Every token fed stays in the session's history, whatever fails after it. An
//! error from the model's step is returned as it is, with the session whole at the tokens fed
//! before it: a run ends there (keeping the session's end where it can), a stream may be pulled
//! again, which tries the step again. A detokenizer error ends the generation with its typed
//! [`crate::Error::Tokenizer`]: the token whose text failed stays in the history, the session's
//! end is kept (as when a generation ends), no text follows, and later pulls give nothing —
//! never a text with a piece silently missing. A constraint's error (no token allowed, a token
//! refused) ends the generation the same way: it would fail again on the same tokens.

use crate::chat::constraint::Constraint;
use crate::error::{Error, Result};
use crate::sampling::{Sampler, StopStrings};
use crate::session::decode::{Decoding, Pace};
use crate::session::{GenerateOptions, Runtime, SessionId};
use crate::tokenizer::{StreamDecoder, Tokenizer};

/// One token handed out by a [`Generation`] and the text it shows now (empty when a token
/// completes no character yet, or its text is held back as the start of a stop string).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The text to show.
    pub text: String,
    /// The token id.
    pub token: u32,
}

/// A text generation on a session: the sampler, the decode, the detokenizer, the stop strings.
pub struct Generation {
    sampler: Sampler,
    decoding: Decoding,
    decoder: StreamDecoder,
    stops: StopStrings,
    /// The last token handed out.
    last: Option<u32>,
    /// No more text: a stop string was reached, the caller left, or the detokenizer failed.
    cut: bool,
    /// Ended ([`Generation::end`]): no more tokens, no more text.
    done: bool,
    /// What the text must match, when constrained: it masks every pick and takes every token.
    constraint: Option<Constraint>,
}

impl Generation {
    /// Up to `options.max_tokens` tokens by `sampler` at `pace`, decoded by `tokenizer`,
    /// ending at any of `stops` (empty strings are refused).
    pub fn new(
        tokenizer: &Tokenizer,
        sampler: Sampler,
        options: GenerateOptions,
        stops: Vec<String>,
        pace: Pace,
    ) -> Result<Self> {
        Ok(Self {
            sampler,
            decoding: Decoding::new(options, pace),
            decoder: tokenizer.stream(true),
            stops: StopStrings::new(stops)?,
            last: None,
            cut: false,
            done: false,
            constraint: None,
        })
    }

    /// The same generation with its text held to `constraint`, which must already hold the
    /// tokens generated since its text began ([`Constraint::replay`], a stop then continue).
    /// An end token ends it whatever `stop_at_eos` says: a grammar's text ends with one.
    pub fn with_constraint(mut self, constraint: Constraint) -> Self {
        self.decoding.options.stop_at_eos = true;
        self.constraint = Some(constraint);
        self
    }

    /// The sampler (its generator state moves on with every draw).
    #[cfg(target_arch = "wasm32")]
    pub(crate) fn sampler_mut(&mut self) -> &mut Sampler {
        &mut self.sampler
    }

    /// The sampler, once the generation is over (to continue its random stream later).
    pub fn into_sampler(self) -> Sampler {
        self.sampler
    }

    /// The last token handed out.
    pub fn last_token(&self) -> Option<u32> {
        self.last
    }

    /// Whether no more tokens will come (then [`Generation::end`] finishes it).
    pub(crate) fn is_over(&self) -> bool {
        self.done || self.decoding.is_over() || self.constraint.as_ref().is_some_and(Constraint::is_stopped)
    }

    /// Whether the text came to its own end: the end-of-text token (with `stop_at_eos`), or a
    /// constraint's text complete. Not after `max_tokens`, a stop string or a stop: a
    /// constrained text cut there is continued by replaying its tokens into a fresh constraint.
    pub fn is_complete(&self) -> bool {
        self.decoding.reached_eos() || self.constraint.as_ref().is_some_and(Constraint::is_stopped)
    }

    /// Whether it has ended ([`Generation::end`]).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Asks for no more tokens (the caller stopped, aborted, or its callback failed); `cut`:
    /// not even the text still held back (a caller that leaves).
    pub(crate) fn stop(&mut self, cut: bool) {
        self.decoding.stop();
        self.cut |= cut;
    }

    /// The next token, fed to the model and in the history, with the text it shows; `None` once
    /// it is over (then [`Generation::end`]). See the module documentation for errors.
    pub async fn next(
        &mut self,
        rt: &mut Runtime,
        id: SessionId,
        tokenizer: &Tokenizer,
    ) -> Result<Option<Piece>> {
        if self.is_over() {
            return Ok(None);
        }
        if let Some(constraint) = &mut self.constraint {
            match constraint.allowed() {
                Ok(mask) => self.decoding.set_mask(Some(mask)),
                Err(e) => return self.fail(rt, id, tokenizer, e).await,
            }
        }
        let Some(token) = rt.decode_next(id, &mut self.decoding, &mut self.sampler).await? else {
            return Ok(None);
        };
        self.last = Some(token);
        if let Some(Err(e)) = self.constraint.as_mut().map(|c| c.commit(token)) {
            return self.fail(rt, id, tokenizer, e).await;
        }
        if self.decoding.reached_eos() {
            return Ok(Some(Piece { text: String::new(), token }));
        }
        let piece = match self.decoder.step(tokenizer, token) {
            Ok(piece) => piece.unwrap_or_default(),
            Err(e) => return self.fail(rt, id, tokenizer, e).await,
        };
        let (text, reached) = self.stops.push(&piece);
        if reached {
            self.stop(true); // what the decoder still holds is past the stop string
        }
        Ok(Some(Piece { text, token }))
    }

    /// Ends the generation on an error of its text (the detokenizer's, the constraint's): no
    /// text after it, the session's end kept if it can be — `e` is the error told.
    async fn fail(
        &mut self,
        rt: &mut Runtime,
        id: SessionId,
        tokenizer: &Tokenizer,
        e: Error,
    ) -> Result<Option<Piece>> {
        self.stop(true);
        let _ = self.end(rt, id, tokenizer).await;
        Err(e)
    }

    /// Ends it: no more tokens; the session is made whole and its end kept as its latest
    /// prompt-end ([`Runtime::end_decoding`]). Returns the text still held back, which no
    /// [`Piece`] showed (none after a stop string or a cut). Once ended, it returns nothing.
    pub async fn end(&mut self, rt: &mut Runtime, id: SessionId, tokenizer: &Tokenizer) -> Result<String> {
        if self.done {
            return Ok(String::new());
        }
        self.done = true;
        rt.end_decoding(id, &mut self.decoding).await?;
        if self.cut {
            return Ok(String::new());
        }
        let (tail, _) = self.stops.push(&self.decoder.finish(tokenizer)?);
        Ok(tail + &self.stops.finish())
    }

    /// Runs it to the end: `on_piece` sees each token's [`Piece`] as it comes and returns
    /// whether to go on; between tokens it yields to the event loop (in the browser a Stop
    /// click lands there). Returns the text held back to the end ([`Generation::end`]).
    pub async fn run(
        &mut self,
        rt: &mut Runtime,
        id: SessionId,
        tokenizer: &Tokenizer,
        mut on_piece: impl FnMut(&Piece) -> bool,
    ) -> Result<String> {
        loop {
            match self.next(rt, id, tokenizer).await {
                Ok(Some(piece)) => {
                    if !on_piece(&piece) {
                        self.stop(false);
                    } else if !self.is_over() {
                        crate::platform::yield_now().await;
                    }
                }
                Ok(None) => return self.end(rt, id, tokenizer).await,
                Err(e) => {
                    // What was generated stays; keep its end if the failure allows.
                    if !std::mem::replace(&mut self.done, true) {
                        let _ = rt.end_decoding(id, &mut self.decoding).await;
                    }
                    return Err(e);
                }
            }
        }
    }
}
