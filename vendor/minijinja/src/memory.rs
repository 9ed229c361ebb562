//! A memory budget for one rendering — webmamba's patch to minijinja (see `vendor/PATCHES.md`).
//!
//! Fuel bounds the instructions a template runs, not what they build: forty `s ~ s` double a
//! string to terabytes, `[l, l]` forty times is a list of 2^40 items when displayed. Inside
//! [`with_limit`] every rendering on this thread is held to a byte budget:
//!
//! - every value an instruction makes — a string, or a list or map counted with everything it
//!   holds (16 bytes an item, a string's bytes; shared parts counted each time they are
//!   reached, as displaying them would) — is at most `limit` bytes and nests at most
//!   [`MAX_DEPTH`] deep;
//! - every output (the rendering, a `{% set %}` or macro capture) is at most `limit` bytes;
//! - all new strings, the items of new lists and maps, and all output together are at most
//!   [`TOTAL_FACTOR`] × `limit`: so many values of the limit's size cannot pile up either;
//! - the operations that make much from little (`*`, `join`, `replace`, `indent`, displaying a
//!   value in `~`, `string`, `pprint`, …) check the size of their result before or while they
//!   build it, never after;
//! - a namespace cannot be made to hold itself (displaying it would never end).
//!
//! Crossing any of these is an `InvalidOperation` error naming the limit. Checking values takes
//! at most [`STEP_FACTOR`] × `limit` steps of walking them in one rendering (else an error too),
//! so the checks cannot be made to run for hours either. Outside [`with_limit`] nothing is
//! checked: minijinja behaves as it always has.

use std::cell::Cell;
use std::fmt;

use crate::error::{Error, ErrorKind};
use crate::value::{ObjectRepr, Value, ValueKind};

/// How deep lists and maps may nest (serde_json parses at most 128 levels of a context).
pub const MAX_DEPTH: usize = 256;
/// The total of all new values' bytes and output, as a multiple of the limit.
pub const TOTAL_FACTOR: usize = 16;
/// The steps spent walking values to check them, as a multiple of the limit.
pub const STEP_FACTOR: usize = 2;
/// What one item of a list or map counts (a `Value` and its share of the container).
pub const ITEM_BYTES: usize = 16;

/// What a rendering used of its budget.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// The limit it ran under (bytes).
    pub limit: usize,
    /// The largest value or output it made (bytes, counted as above).
    pub largest: usize,
    /// All new values' bytes and output together.
    pub total: usize,
    /// Steps spent walking values.
    pub steps: usize,
}

#[derive(Clone, Copy)]
enum Over {
    Value(usize),
    Output(usize),
    Total(usize),
    Depth,
    Steps,
    SelfHolding,
}

#[derive(Clone, Copy)]
struct Budget {
    usage: Usage,
    over: Option<Over>,
}

thread_local! {
    static BUDGET: Cell<Option<Budget>> = const { Cell::new(None) };
}

/// Runs `f` (renderings) with every rendering on this thread held to `limit` bytes as the
/// module says; returns its result and what it used. Nested calls keep the outer budget.
pub fn with_limit<R>(limit: usize, f: impl FnOnce() -> R) -> (R, Usage) {
    if let Some(outer) = BUDGET.with(Cell::get) {
        return (f(), outer.usage);
    }
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            BUDGET.with(|b| b.set(None));
        }
    }
    let usage = Usage { limit, ..Usage::default() };
    BUDGET.with(|b| b.set(Some(Budget { usage, over: None })));
    let _reset = Reset;
    let rv = f();
    let usage = BUDGET.with(Cell::get).map_or(usage, |b| b.usage);
    (rv, usage)
}

/// Whether a budget is in force on this thread.
#[inline]
pub(crate) fn active() -> bool {
    BUDGET.with(|b| b.get().is_some())
}

/// The limit in force, if any.
pub fn limit() -> Option<usize> {
    BUDGET.with(|b| b.get().map(|b| b.usage.limit))
}

fn update<R>(f: impl FnOnce(&mut Budget) -> R) -> Option<R> {
    BUDGET.with(|cell| {
        let mut b = cell.get()?;
        let rv = f(&mut b);
        cell.set(Some(b));
        Some(rv)
    })
}

fn error(over: Over, limit: usize) -> Error {
    let what = match over {
        Over::Value(n) => format!("a value of more than {n} bytes"),
        Over::Output(n) => format!("an output of more than {n} bytes"),
        Over::Total(n) => format!("{n} bytes of values and output in all ({TOTAL_FACTOR} × the limit)"),
        Over::Depth => format!("lists or maps nested more than {MAX_DEPTH} deep"),
        Over::Steps => format!(
            "more than {} steps checking its values ({STEP_FACTOR} × the limit)",
            STEP_FACTOR.saturating_mul(limit)
        ),
        Over::SelfHolding => "a namespace holding itself".to_string(),
    };
    Error::new(
        ErrorKind::InvalidOperation,
        format!("template memory limit of {limit} bytes: the template made {what}"),
    )
}

fn trip(over: Over) -> Error {
    let limit = update(|b| {
        b.over.get_or_insert(over);
        b.usage.limit
    })
    .unwrap_or(0);
    error(over, limit)
}

/// The error of the limit this rendering crossed, if it did (a write refused with
/// `fmt::Error` becomes this instead of a write failure).
pub(crate) fn tripped() -> Option<Error> {
    BUDGET.with(|b| b.get().and_then(|b| b.over.map(|o| error(o, b.usage.limit))))
}

/// Counts `bytes` of new values or output; an error when the total is over.
pub(crate) fn charge(bytes: usize) -> Result<(), Error> {
    let over = update(|b| {
        b.usage.total = b.usage.total.saturating_add(bytes);
        let total = b.usage.limit.saturating_mul(TOTAL_FACTOR);
        (b.usage.total > total).then_some(total)
    });
    match over.flatten() {
        Some(total) => Err(trip(Over::Total(total))),
        None => Ok(()),
    }
}

/// Whether a string or output of `len` bytes fits the limit (records the largest).
pub(crate) fn check_len(len: usize, output: bool) -> Result<(), Error> {
    let over = update(|b| {
        b.usage.largest = b.usage.largest.max(len);
        (len > b.usage.limit).then_some(b.usage.limit)
    });
    match over.flatten() {
        Some(l) if output => Err(trip(Over::Output(l))),
        Some(l) => Err(trip(Over::Value(l))),
        None => Ok(()),
    }
}

/// Checks a value an instruction just made: its size counted with all it holds, its depth;
/// charges its own new bytes (a string's, or its items' — `lazy`: a `+` or `*` of lists, which
/// holds its operands instead of copying them).
pub(crate) fn check_new(value: &Value, lazy: bool) -> Result<(), Error> {
    let Some(limit) = limit() else { return Ok(()) };
    let mut walk = Walk { bytes: 0, steps: 0, limit };
    let rv = walk.value(value, 0);
    let steps = walk.steps;
    let over_steps = update(|b| {
        b.usage.steps = b.usage.steps.saturating_add(steps);
        b.usage.steps > STEP_FACTOR.saturating_mul(limit)
    });
    if over_steps == Some(true) {
        return Err(trip(Over::Steps));
    }
    if let Err(over) = rv {
        return Err(trip(over));
    }
    ok!(check_len(walk.bytes, false));
    let own = match value.kind() {
        ValueKind::String | ValueKind::Bytes => walk.bytes,
        ValueKind::Seq | ValueKind::Map | ValueKind::Iterable if !lazy => {
            value.len().unwrap_or(0).saturating_mul(ITEM_BYTES)
        }
        _ => 0,
    };
    charge(own)
}

/// Refuses `value` as an attribute of namespace `target` when it holds `target` (a cycle).
pub(crate) fn check_set_attr(target: &Value, value: &Value) -> Result<(), Error> {
    if !active() {
        return Ok(());
    }
    ok!(check_new(value, true));
    if holds(value, target, 0) {
        return Err(trip(Over::SelfHolding));
    }
    Ok(())
}

fn holds(value: &Value, target: &Value, depth: usize) -> bool {
    let (Some(obj), Some(t)) = (value.as_object(), target.as_object()) else { return false };
    if obj.is_same_object(t) {
        return true;
    }
    if depth >= MAX_DEPTH || !matches!(obj.repr(), ObjectRepr::Map | ObjectRepr::Seq | ObjectRepr::Iterable) {
        return false;
    }
    match value.try_iter() {
        Ok(items) => items.take(ITEM_LIMIT).any(|k| {
            let v = if obj.repr() == ObjectRepr::Map { value.get_item(&k).unwrap_or_default() } else { k };
            holds(&v, target, depth + 1)
        }),
        Err(_) => false,
    }
}

/// At most this many items of one container are looked at when looking for a cycle.
const ITEM_LIMIT: usize = 1 << 20;

struct Walk {
    bytes: usize,
    steps: usize,
    limit: usize,
}

impl Walk {
    fn add(&mut self, bytes: usize) -> Result<(), Over> {
        self.bytes = self.bytes.saturating_add(bytes);
        self.steps += 1;
        if self.bytes > self.limit {
            Err(Over::Value(self.limit))
        } else if self.steps > self.limit {
            Err(Over::Steps)
        } else {
            Ok(())
        }
    }

    fn value(&mut self, value: &Value, depth: usize) -> Result<(), Over> {
        match value.kind() {
            ValueKind::String => self.add(value.as_str().map_or(0, str::len)),
            ValueKind::Bytes => self.add(value.as_bytes().map_or(0, <[u8]>::len)),
            ValueKind::Seq | ValueKind::Map | ValueKind::Iterable => {
                if depth >= MAX_DEPTH {
                    return Err(Over::Depth);
                }
                // A container's length is known before its items are looked at: a lazy
                // `[x] * 10**12` is refused without iterating it.
                if let Some(n) = value.len() {
                    if n.saturating_mul(ITEM_BYTES) > self.limit.saturating_sub(self.bytes) {
                        return Err(Over::Value(self.limit));
                    }
                }
                let is_map = value.kind() == ValueKind::Map;
                // Each item of a lazy concatenation `l + [x]` (built up to 32 deep before it is
                // materialised) is reached through one iterator per level: those are steps too,
                // so that a loop of `set ns.l = ns.l + [x]` is stopped by its real work.
                let levels = value
                    .downcast_object_ref::<crate::value::merge_object::MergeSeq>()
                    .map_or(0, |m| m.depth().saturating_sub(1));
                let Ok(items) = value.try_iter() else { return self.add(ITEM_BYTES) };
                for item in items {
                    self.steps = self.steps.saturating_add(levels);
                    ok!(self.add(ITEM_BYTES));
                    if is_map {
                        ok!(self.value(&item, depth + 1));
                        let v = value.get_item(&item).unwrap_or_default();
                        ok!(self.value(&v, depth + 1));
                    } else {
                        ok!(self.value(&item, depth + 1));
                    }
                }
                Ok(())
            }
            _ => self.add(0),
        }
    }
}

/// A string built by `f` that stops with the limit's error as soon as it would be longer than
/// the limit (no limit in force: as `f` writes it).
pub(crate) fn bounded_string(f: impl FnOnce(&mut dyn fmt::Write) -> fmt::Result) -> Result<String, Error> {
    struct Bounded {
        s: String,
        limit: usize,
        refused: bool,
    }
    impl fmt::Write for Bounded {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            if self.s.len().saturating_add(s.len()) > self.limit {
                self.refused = true;
                return Err(fmt::Error);
            }
            self.s.push_str(s);
            Ok(())
        }
    }
    let limit = limit();
    let mut w = Bounded { s: String::new(), limit: limit.unwrap_or(usize::MAX), refused: false };
    match f(&mut w) {
        Ok(()) => Ok(w.s),
        Err(_) if w.refused => Err(trip(Over::Value(w.limit))),
        Err(e) => Err(tripped().unwrap_or_else(|| Error::from(e))),
    }
}

/// `value` displayed, as [`bounded_string`] bounds it.
pub(crate) fn display(value: &Value) -> Result<String, Error> {
    if !active() {
        return Ok(value.to_string());
    }
    if let Some(s) = value.as_str() {
        return Ok(s.to_string());
    }
    bounded_string(|w| write!(w, "{value}"))
}

/// Refuses a result that would be `len` bytes before it is built.
pub fn check_result_len(len: usize) -> Result<(), Error> {
    check_len(len, false)
}
