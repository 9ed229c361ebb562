//! The memory a chat template may use. A template comes with the model folder — somebody
//! else's code, run on every turn — so beside its fuel (instructions) every rendering is held
//! to a byte budget: minijinja's `memory` module, webmamba's patch (`vendor/PATCHES.md`).
//! The limit is [`TEMPLATE_MEMORY`] plus twice the conversation's JSON: every string, list and
//! map the template makes (counted with all it holds), every capture and the rendered prompt
//! stay within it, all it makes together within 16 times it, whichever way it grows them
//! (`~`, `+`, `*`, `join`, `format`, `replace`, `indent`, `tojson`, loops, macros, namespaces).
//! Crossing it is a `Template` error naming the limit; the session is untouched.

use minijinja::value::Value;
use minijinja::{Error, ErrorKind};

/// The bytes a rendering may make besides twice its conversation: 4 MiB. HF's published
/// templates stay far below it (tests/chat.rs prints how far).
pub const TEMPLATE_MEMORY: usize = 4 << 20;

/// The limit for a rendering of a `context_bytes`-byte conversation (or a compile of a
/// template that long).
pub(crate) fn limit_for(context_bytes: usize) -> usize {
    TEMPLATE_MEMORY.saturating_add(context_bytes.saturating_mul(2))
}

/// What one rendering used of its memory budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TemplateUsage {
    /// The limit it ran under (bytes).
    pub limit: usize,
    /// The largest value, capture or output it made (bytes, a list or map counted with all it
    /// holds).
    pub largest: usize,
    /// All the bytes it made together (at most 16 × the limit).
    pub total: usize,
}

impl From<minijinja::memory::Usage> for TemplateUsage {
    fn from(u: minijinja::memory::Usage) -> Self {
        Self { limit: u.limit, largest: u.largest, total: u.total }
    }
}

/// Sizes the result of Python's `str.join` and `str.replace` (minijinja-contrib's `pycompat`,
/// which builds them unchecked) before they are built; other methods pass.
pub(crate) fn guard_method(value: &Value, method: &str, args: &[Value]) -> Result<(), Error> {
    let (Some(s), Some(limit)) = (value.as_str(), minijinja::memory::limit()) else { return Ok(()) };
    match method {
        "join" => {
            let Some(items) = args.first() else { return Ok(()) };
            let mut len = 0usize;
            for (i, item) in items.try_iter()?.enumerate() {
                let item_len = match item.as_str() {
                    Some(text) => text.len(),
                    None => displayed_len(&item, limit)?,
                };
                len = len.saturating_add(item_len).saturating_add(if i > 0 { s.len() } else { 0 });
                if len > limit {
                    return minijinja::memory::check_result_len(len);
                }
            }
            Ok(())
        }
        "replace" => {
            let (Some(old), Some(new)) =
                (args.first().and_then(Value::as_str), args.get(1).and_then(Value::as_str))
            else {
                return Ok(());
            };
            let mut n = if old.is_empty() { s.chars().count() + 1 } else { s.matches(old).count() };
            if let Some(count) = args.get(2).and_then(|c| i64::try_from(c.clone()).ok())
                && count >= 0
            {
                n = n.min(usize::try_from(count).unwrap_or(usize::MAX));
            }
            let removed = n.saturating_mul(old.len()).min(s.len());
            minijinja::memory::check_result_len(
                (s.len() - removed).saturating_add(n.saturating_mul(new.len())),
            )
        }
        _ => Ok(()),
    }
}

/// The length of `value` displayed, counted up to just past `limit` without building it.
fn displayed_len(value: &Value, limit: usize) -> Result<usize, Error> {
    struct Count {
        len: usize,
        limit: usize,
    }
    impl std::fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            self.len = self.len.saturating_add(s.len());
            if self.len > self.limit { Err(std::fmt::Error) } else { Ok(()) }
        }
    }
    let mut count = Count { len: 0, limit };
    use std::fmt::Write;
    match write!(count, "{value}") {
        Ok(()) => Ok(count.len),
        Err(_) if count.len > limit => Ok(count.len),
        Err(_) => Err(Error::new(ErrorKind::InvalidOperation, "a value could not be displayed")),
    }
}
