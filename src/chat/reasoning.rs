//! Thinking: a template whose generation prompt ends in an open `<think>` (Qwen3.5 and Qwen3
//! with `enable_thinking` on, their default; DeepSeek-R1's) has the model reason first and
//! close the block with `</think>` before its answer. A reply is split there
//! ([`split`]: OpenAI-compatible servers' `reasoning_content`), and a constrained reply — a
//! required tool call, a response_format — is constrained only after the thinking
//! ([`after_thinking`]): free text, then `\n</think>\n\n` — what the template writes between a
//! message's `reasoning_content` and its content — then the format. So the model may think
//! before it answers, and the next turn's rendering of that message (`<think>\n` reasoning
//! `\n</think>\n\n` answer) is the model's own tokens, which the cache then reuses.

use llguidance::api::{GrammarWithLexer, TopLevelGrammar};

/// The tag a think block opens with.
pub const OPEN: &str = "<think>";
/// The tag it closes with.
pub const CLOSE: &str = "</think>";
/// What a constrained reply writes between its thinking and the format's text: what Qwen3's
/// and Qwen3.5's templates write after a message's reasoning.
const SEPARATOR: &str = "\n</think>\n\n";

/// Whether a rendered `prompt` leaves the reply inside a think block: it ends (whitespace
/// aside) with `<think>`, as a thinking template's generation prompt does. A `<think>` earlier
/// in the prompt (a user's text) does not count.
pub fn opens_thinking(prompt: &str) -> bool {
    prompt.trim_end().ends_with(OPEN)
}

/// A reply to a prompt that [`opens_thinking`], split at its first `</think>`: the reasoning
/// before it (trimmed, as the templates trim `reasoning_content`) and the answer after it (its
/// leading newlines dropped, as the templates drop them). A reply that never closed the block
/// (cut short by its token limit) is all reasoning.
pub fn split(reply: &str) -> (String, &str) {
    match reply.find(CLOSE) {
        Some(i) => (reply[..i].trim().to_string(), reply[i + CLOSE.len()..].trim_start_matches('\n')),
        None => (reply.trim().to_string(), ""),
    }
}

/// `grammar` preceded by the thinking: any text up to the first `\n</think>\n\n` (llguidance's
/// lazy lexeme: it ends where that first appears), then `grammar`'s own start. `grammar`'s
/// first grammar is the one that applies: it is renamed and referred to from a new first one.
pub fn after_thinking(mut grammar: TopLevelGrammar) -> TopLevelGrammar {
    const NAME: &str = "after_thinking";
    if let Some(first) = grammar.grammars.first_mut() {
        first.name = Some(NAME.into());
    }
    let suffix = serde_json::to_string(SEPARATOR).unwrap_or_default();
    let lark = format!("start: thought @{NAME}\nthought[suffix={suffix}]: /(?s:.*)/\n");
    grammar.grammars.insert(0, GrammarWithLexer::from_lark(lark));
    grammar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_only_at_the_end() {
        assert!(opens_thinking("<|im_start|>assistant\n<think>\n"));
        assert!(!opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
        assert!(!opens_thinking("<|im_start|>user\nwhat is <think>?<|im_end|>\n<|im_start|>assistant\n"));
    }

    #[test]
    fn split_as_the_template_reads_it() {
        assert_eq!(split("\nHmm.\n</think>\n\nHello"), ("Hmm.".to_string(), "Hello"));
        assert_eq!(split("\n</think>\n\n<tool_call>"), (String::new(), "<tool_call>"));
        assert_eq!(split("still thinking"), ("still thinking".to_string(), ""));
    }
}
