//! Chat: a checkpoint's chat template and end-of-turn tokens ([`ChatConfig`], from
//! `tokenizer_config.json`, `chat_template.jinja` and `generation_config.json`), rendered as
//! Hugging Face transformers renders them ([`ChatTemplate`], minijinja with HF's additions);
//! turns that read only their new tokens ([`ChatHistory`]); structured output
//! ([`constraint`]: JSON schemas and regexes as token masks, llguidance; `strict` as a
//! rewrite of the schema, its errors as sentences); tool calls in the template's own format
//! ([`ToolSyntax`]); thinking before the answer ([`reasoning`]).

mod config;
pub mod constraint;
mod endless;
mod grammar_error;
mod pyjson;
pub mod reasoning;
mod strict;
mod template;
pub(crate) mod template_memory;
mod tools;
mod turn;

pub use config::{ChatConfig, wants_template_file};
pub use template::ChatTemplate;
pub use template_memory::{TEMPLATE_MEMORY, TemplateUsage};
pub use tools::{Arguments, ToolCall, ToolReply, ToolSyntax};
pub use turn::{ChatHistory, TurnTokens};
