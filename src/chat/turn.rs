//! [`ChatHistory`]: how a chat turn reads only its new tokens. A session's history after a turn
//! is the rendered prompt's tokens and the tokens the model generated — not the tokenization of
//! the conversation's text, which may cut the reply differently. So the session remembers the
//! text its history stands for; the next turn's rendering, when it starts with that text (the
//! previous reply is in the conversation as the model wrote it, and the template adds only glue
//! and the new message after it), becomes the history followed by the new text's tokens. Only
//! those are prefilled; the model's own tokens stay as they were. When the rendering does not
//! start with it (an edited message, a template that trims the reply, another call in between),
//! the whole rendering is tokenized and the session resumes from its longest cached prefix.

use crate::error::Result;
use crate::tokenizer::Tokenizer;

/// The text a session's history stands for, as of the last chat turn.
#[derive(Clone, Debug, Default)]
pub struct ChatHistory {
    /// The history's tokens when the text was recorded.
    tokens: Vec<u32>,
    /// Their text: the rendered prompt, then the generated tokens decoded.
    text: String,
}

/// The tokens a turn should make the history, and how many of them extend it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TurnTokens {
    /// The whole target history.
    pub tokens: Vec<u32>,
    /// How many leading tokens are the current history unchanged (0 when the rendering does
    /// not extend the recorded text).
    pub kept: usize,
}

impl ChatHistory {
    /// The target history for `rendered` (the conversation rendered with the generation
    /// prompt) on a session whose history is `history`.
    pub fn target(&self, history: &[u32], rendered: &str, tokenizer: &Tokenizer) -> Result<TurnTokens> {
        if !self.tokens.is_empty()
            && self.tokens == history
            && let Some(rest) = rendered.strip_prefix(self.text.as_str())
        {
            let mut tokens = history.to_vec();
            tokens.extend(tokenizer.encode(rest, false)?);
            return Ok(TurnTokens { tokens, kept: history.len() });
        }
        Ok(TurnTokens { tokens: tokenizer.encode(rendered, false)?, kept: 0 })
    }

    /// Records the history after a turn: the prompt's text (`rendered`) and tokens, then the
    /// generated `tokens` (their text decoded with special tokens, as the next rendering will
    /// hold them if the template writes the reply and its end token back as they were).
    pub fn record(
        &mut self,
        rendered: &str,
        prompt: &[u32],
        generated: &[u32],
        tokenizer: &Tokenizer,
    ) -> Result<()> {
        self.text = format!("{rendered}{}", tokenizer.decode(generated, false)?);
        self.tokens = prompt.iter().chain(generated).copied().collect();
        Ok(())
    }

    /// Forgets the recorded text (the next turn tokenizes its whole rendering).
    pub fn clear(&mut self) {
        *self = ChatHistory::default();
    }
}
