//! `webmamba chat`: a conversation on a terminal. Each line typed is a user message; the
//! conversation is rendered with the model's chat template (or `--template FILE`) as HF's
//! `apply_chat_template` renders it, each turn feeds only what extends the session's history
//! (`webmamba::chat::ChatHistory`: the previous reply stays as the model's own tokens), and the
//! reply streams to stdout until an end-of-turn token (generation_config's, the eos token's).
//! After each reply, stderr gets the turn's token counts. `/reset` starts over, `/exit` (or the
//! end of input) ends it. Not on a terminal, stdin's lines are the messages, one turn each.
//! With `--tools FILE` (a JSON list of tool definitions) the template gets the tools, a reply's
//! calls (in the template's format) are printed to stderr as JSON and kept in the conversation
//! as the assistant message's `tool_calls`, and `/tool TEXT` answers them (a `tool` message,
//! then the model's turn).

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use clap::Args;
use serde_json::json;
use webmamba::GenerateOptions;
use webmamba::chat::{ChatHistory, ChatTemplate, ToolSyntax};
use webmamba::session::{Generation, Pace};

use crate::setup::{LoadArgs, SamplingArgs, checkpoint, tokenizer};

/// `webmamba chat`'s flags.
#[derive(Args)]
pub struct ChatArgs {
    /// Model folder (config.json, weights, tokenizer.json, tokenizer_config.json with its chat
    /// template) or GGUF file (its metadata's tokenizer and template). Default: the embedded shakespeare-mamba-3m (which has no template: pass
    /// --template).
    #[arg(long)]
    model: Option<PathBuf>,
    /// A Jinja chat template to use instead of the model's.
    #[arg(long)]
    template: Option<PathBuf>,
    /// The system prompt.
    #[arg(long)]
    system: Option<String>,
    /// Tool definitions: a JSON file with a list of `{ "type": "function", "function": { name,
    /// description, parameters } }`.
    #[arg(long)]
    tools: Option<PathBuf>,
    /// Most tokens per reply.
    #[arg(long, default_value_t = 256)]
    max_tokens: usize,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    load: LoadArgs,
}

/// Runs it.
pub fn run(a: ChatArgs) -> Result<()> {
    let checkpoint = checkpoint(a.model.as_ref())?;
    let tokenizer = tokenizer(&checkpoint)?;
    let source = match &a.template {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        None => match checkpoint.chat.template(a.tools.is_some()) {
            Some(t) => t.to_string(),
            None => bail!(
                "the model has no chat template (tokenizer_config.json or chat_template.jinja): pass --template FILE"
            ),
        },
    };
    let template = ChatTemplate::new(&source, checkpoint.chat.special_tokens.clone())?;
    let tools: Option<serde_json::Value> = match &a.tools {
        Some(path) => {
            let text =
                std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
            let v: serde_json::Value =
                serde_json::from_str(&text).with_context(|| format!("{} is not JSON", path.display()))?;
            if !v.is_array() {
                bail!("{}: tools must be a JSON list", path.display());
            }
            Some(v)
        }
        None => None,
    };
    let syntax = match tools {
        Some(_) => Some(
            ToolSyntax::from_template(&template)
                .context("the chat template writes no tool calls webmamba can read")?,
        ),
        None => None,
    };
    let mut rt = a.load.runtime(&checkpoint, &tokenizer)?;
    let mut sampler = Some(a.sampling.sampler()?);
    let generate = GenerateOptions { max_tokens: a.max_tokens, stop_at_eos: true };
    let system: Vec<serde_json::Value> =
        a.system.iter().map(|s| json!({ "role": "system", "content": s })).collect();
    let mut messages = system.clone();
    let mut session = rt.new_session()?;
    let mut history = ChatHistory::default();
    let interactive = std::io::stdin().is_terminal();
    let mut stdout = std::io::stdout().lock();
    let mut lines = std::io::stdin().lock().lines();
    let mut refused = 0;
    loop {
        if interactive {
            eprint!("> ");
        }
        let Some(line) = lines.next().transpose()? else { break };
        match line.trim() {
            "" => continue,
            "/exit" => break,
            "/reset" => {
                rt.close_session(session)?;
                session = rt.new_session()?;
                history.clear();
                messages = system.clone();
                continue;
            }
            _ => {}
        }
        match line.strip_prefix("/tool ") {
            Some(result) => messages.push(json!({ "role": "tool", "content": result })),
            None => messages.push(json!({ "role": "user", "content": line })),
        }
        let mut context = json!({ "messages": messages });
        if let Some(t) = &tools {
            context["tools"] = t.clone();
        }
        // A template that refuses this conversation (its own raise_exception, its memory or
        // fuel limit) costs this message, not the conversation.
        let rendered = match template.render_prompt(&context.to_string()) {
            Ok(rendered) => rendered,
            Err(e) => {
                eprintln!("error: {e} (the message was not sent; the conversation goes on)");
                messages.pop();
                refused += 1;
                continue;
            }
        };
        let before = rt.history(session)?.to_vec();
        let target = history.target(&before, &rendered, &tokenizer)?;
        let outcome = pollster::block_on(rt.edit(session, &target.tokens))?;
        let chosen = sampler.take().context("the sampler")?;
        let mut generation = Generation::new(&tokenizer, chosen, generate, Vec::new(), Pace::ToEnd)?;
        let mut reply = String::new();
        let ran = pollster::block_on(generation.run(&mut rt, session, &tokenizer, |piece| {
            reply.push_str(&piece.text);
            write!(stdout, "{}", piece.text).and_then(|()| stdout.flush()).is_ok()
        }));
        sampler = Some(generation.into_sampler());
        let tail = ran?;
        reply.push_str(&tail);
        writeln!(stdout, "{tail}")?;
        let after = rt.history(session)?.to_vec();
        let generated = after.get(target.tokens.len()..).unwrap_or_default();
        history.record(&rendered, &target.tokens, generated, &tokenizer)?;
        eprintln!(
            "[{} prompt tokens, {} prefilled, {} from the session's state; {} generated]",
            target.tokens.len(),
            outcome.prefilled,
            target.tokens.len() - outcome.prefilled,
            generated.len()
        );
        let calls =
            syntax.as_ref().map(|s| s.parse_with(&reply, tools.as_ref())).filter(|r| !r.calls.is_empty());
        match calls {
            None => messages.push(json!({ "role": "assistant", "content": reply })),
            Some(r) => {
                let calls: Vec<serde_json::Value> = r
                    .calls
                    .iter()
                    .map(|c| {
                        let arguments: serde_json::Value =
                            serde_json::from_str(&c.arguments).unwrap_or_else(|_| c.arguments.clone().into());
                        json!({ "type": "function", "function": { "name": c.name, "arguments": arguments } })
                    })
                    .collect();
                eprintln!("[tool calls] {}", serde_json::Value::from(calls.clone()));
                // A template that writes no calls (LFM2's: the model writes them in its
                // content) gets the reply as the model wrote it.
                let content = match syntax.as_ref().and_then(|s| s.write_in_content(&r.calls)) {
                    Some(_) => reply.clone(),
                    None => r.content,
                };
                messages.push(json!({ "role": "assistant", "content": content, "tool_calls": calls }));
            }
        }
    }
    if refused > 0 {
        bail!("the chat template refused {refused} message(s)");
    }
    Ok(())
}
