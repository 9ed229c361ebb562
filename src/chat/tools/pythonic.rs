//! Pythonic calls (LFM2's): `<|tool_call_start|>[get_weather(city="Paris"), add(a=2, b=3)]
//! <|tool_call_end|>`, keyword arguments as Python literals: strings in either quote with
//! their escapes, integers, floats, `True`, `False`, `None`, lists, tuples and dicts (JSON's
//! `true`, `false`, `null` taken too). LFM2's template writes none of this itself: the model
//! writes it in its content, and the content is what goes back into the conversation.

use serde_json::{Map, Value};

use super::{Arguments, ToolCall, ToolSyntax, in_order, lit, properties, single_type, standalone};

/// LFM2's syntax.
pub(super) fn lfm2() -> ToolSyntax {
    ToolSyntax {
        block_open: "<|tool_call_start|>[".into(),
        before_name: String::new(),
        before_arguments: "(".into(),
        after: ")".into(),
        separator: ", ".into(),
        block_close: "]<|tool_call_end|>".into(),
        open: "<|tool_call_start|>".into(),
        close: "<|tool_call_end|>".into(),
        arguments: Arguments::Pythonic,
    }
}

/// The calls in `[f(a=1), g()]` (or one call without the brackets); `None` when it is not that.
pub(super) fn calls_in(body: &str) -> Option<Vec<ToolCall>> {
    let mut p = Reader { s: body, i: 0, depth: 0 };
    let listed = p.eat("[");
    let mut calls = Vec::new();
    loop {
        p.space();
        if listed && p.eat("]") {
            break;
        }
        calls.push(p.call()?);
        p.space();
        if !listed || p.eat("]") {
            break;
        }
        if !p.eat(",") {
            return None;
        }
    }
    p.space();
    (p.i == body.len() && !calls.is_empty()).then_some(calls)
}

/// `calls` as LFM2 writes them.
pub(super) fn write(s: &ToolSyntax, calls: &[ToolCall]) -> String {
    let one = |c: &ToolCall| {
        let args = match serde_json::from_str::<Value>(&c.arguments) {
            Ok(Value::Object(o)) => o.iter().map(|(k, v)| format!("{k}={}", literal(v))).collect::<Vec<_>>(),
            _ => Vec::new(),
        };
        format!("{}{}{}{}", c.name, s.before_arguments, args.join(", "), s.after)
    };
    let calls: Vec<String> = calls.iter().map(one).collect();
    format!("{}{}{}", s.block_open, calls.join(&s.separator), s.block_close)
}

/// A JSON value as a Python literal (`repr`'s, with double-quoted strings).
fn literal(v: &Value) -> String {
    match v {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => lit(s),
        Value::Array(a) => format!("[{}]", a.iter().map(literal).collect::<Vec<_>>().join(", ")),
        Value::Object(o) => {
            format!(
                "{{{}}}",
                o.iter().map(|(k, v)| format!("{}: {}", lit(k), literal(v))).collect::<Vec<_>>().join(", ")
            )
        }
    }
}

/// The Lark expression for tool `i`'s keyword arguments under `schema` (rules pushed onto
/// `rules`): its properties in order, each required one present, joined by `, `; a value is
/// `True`/`False` for a boolean, `None` for null, else JSON valid under the property's schema
/// (a JSON string is a Python string; lists and objects in JSON's spelling).
pub(super) fn arguments(schema: &Value, i: usize, rules: &mut String) -> String {
    let Some(props) = properties(schema) else {
        rules.push_str(&format!("args_{i}_any: %json {}\n", standalone(schema, &Value::Bool(true))));
        let one = format!("/[A-Za-z_][A-Za-z0-9_]*/ \"=\" args_{i}_any");
        return format!("[{one} (\", \" {one})*]");
    };
    let parts: Vec<(String, bool)> = props
        .iter()
        .enumerate()
        .map(|(k, (key, property, required))| {
            let value = match single_type(property) {
                Some("boolean") => "(\"True\" | \"False\")".to_string(),
                Some("null") => "\"None\"".to_string(),
                _ => {
                    rules.push_str(&format!("args_{i}_{k}: %json {}\n", standalone(schema, property)));
                    format!("args_{i}_{k}")
                }
            };
            (format!("{} {value}", lit(&format!("{key}="))), *required)
        })
        .collect();
    in_order(&parts, ", ")
}

/// A cursor over Python source.
struct Reader<'a> {
    s: &'a str,
    i: usize,
    /// Lists and dicts open around the value being read.
    depth: usize,
}

/// The deepest nesting read (a reply of ten thousand `[` is not a call, nor a stack overflow).
const MAX_DEPTH: usize = 64;

impl Reader<'_> {
    fn rest(&self) -> &str {
        &self.s[self.i..]
    }

    fn space(&mut self) {
        self.i = self.s.len() - self.rest().trim_start().len();
    }

    fn eat(&mut self, t: &str) -> bool {
        let ok = self.rest().starts_with(t);
        if ok {
            self.i += t.len();
        }
        ok
    }

    /// A name: letters, digits, `_`, `.`, `-`.
    fn name(&mut self) -> Option<String> {
        let n = self
            .rest()
            .find(|c: char| !(c.is_alphanumeric() || "_.-".contains(c)))
            .unwrap_or(self.rest().len());
        let name = self.rest()[..n].to_string();
        self.i += n;
        (!name.is_empty()).then_some(name)
    }

    /// `name(key=value, …)`.
    fn call(&mut self) -> Option<ToolCall> {
        let name = self.name()?;
        self.space();
        if !self.eat("(") {
            return None;
        }
        let mut arguments = Map::new();
        loop {
            self.space();
            if self.eat(")") {
                break;
            }
            let key = self.name()?;
            self.space();
            if !self.eat("=") {
                return None;
            }
            self.space();
            arguments.insert(key, self.value()?);
            self.space();
            if self.eat(")") {
                break;
            }
            if !self.eat(",") {
                return None;
            }
        }
        Some(ToolCall { name, arguments: serde_json::to_string(&Value::Object(arguments)).ok()? })
    }

    fn value(&mut self) -> Option<Value> {
        self.depth += 1;
        let v = if self.depth > MAX_DEPTH { None } else { self.value_here() };
        self.depth -= 1;
        v
    }

    fn value_here(&mut self) -> Option<Value> {
        self.space();
        let c = self.rest().chars().next()?;
        match c {
            '"' | '\'' => self.string().map(Value::String),
            '[' | '(' => {
                self.i += 1;
                let close = if c == '[' { "]" } else { ")" };
                let mut items = Vec::new();
                self.items(close, |r| {
                    items.push(r.value()?);
                    Some(())
                })?;
                Some(Value::Array(items))
            }
            '{' => {
                self.i += 1;
                let mut map = Map::new();
                self.items("}", |r| {
                    let key = match r.value()? {
                        Value::String(s) => s,
                        other => other.to_string(),
                    };
                    r.space();
                    if !r.eat(":") {
                        return None;
                    }
                    map.insert(key, r.value()?);
                    Some(())
                })?;
                Some(Value::Object(map))
            }
            _ => {
                let rest = &self.s[self.i..];
                let word = rest.split(|c: char| ",)]}:".contains(c) || c.is_whitespace()).next()?;
                self.i += word.len();
                match word {
                    "True" | "true" => Some(Value::Bool(true)),
                    "False" | "false" => Some(Value::Bool(false)),
                    "None" | "null" => Some(Value::Null),
                    w => number(w),
                }
            }
        }
    }

    /// Items up to `close`, comma-separated, a trailing comma allowed.
    fn items(&mut self, close: &str, mut item: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        loop {
            self.space();
            if self.eat(close) {
                return Some(());
            }
            item(self)?;
            self.space();
            if self.eat(close) {
                return Some(());
            }
            if !self.eat(",") {
                return None;
            }
        }
    }

    /// A quoted string (single, double or triple quotes; `r` prefixes not taken), its escapes.
    fn string(&mut self) -> Option<String> {
        let q = self.rest().chars().next()?;
        let triple: String = std::iter::repeat_n(q, 3).collect();
        let quote = if self.rest().starts_with(&triple) { triple } else { q.to_string() };
        self.i += quote.len();
        let mut out = String::new();
        loop {
            if self.eat(&quote) {
                return Some(out);
            }
            let c = self.rest().chars().next()?;
            self.i += c.len_utf8();
            if c != '\\' {
                out.push(c);
                continue;
            }
            let e = self.rest().chars().next()?;
            self.i += e.len_utf8();
            match e {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '0' => out.push('\0'),
                'a' => out.push('\x07'),
                'b' => out.push('\x08'),
                'f' => out.push('\x0c'),
                'v' => out.push('\x0b'),
                '\n' => {}
                '\\' | '\'' | '"' | '/' => out.push(e),
                'x' | 'u' | 'U' => out.push(self.code(match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                })?),
                other => {
                    out.push('\\');
                    out.push(other);
                }
            }
        }
    }

    /// The character of a `\x`, `\u` or `\U` escape's `digits` hex digits (a `\u` surrogate
    /// pair, JSON's spelling, taken whole).
    fn code(&mut self, digits: usize) -> Option<char> {
        let hex = |r: &mut Self| -> Option<u32> {
            let h = r.rest().get(..digits)?;
            let v = u32::from_str_radix(h, 16).ok()?;
            r.i += digits;
            Some(v)
        };
        let v = hex(self)?;
        if (0xD800..0xDC00).contains(&v) && digits == 4 && self.eat("\\u") {
            let low = hex(self)?;
            return char::from_u32(0x10000 + ((v - 0xD800) << 10) + (low.checked_sub(0xDC00)? & 0x3FF));
        }
        char::from_u32(v)
    }
}

/// A Python number literal (`1_000`, `2.`, `.5`, `1e3`, `-3`) as JSON.
fn number(word: &str) -> Option<Value> {
    let w = word.replace('_', "");
    let (sign, digits) = match w.strip_prefix(['-', '+']) {
        Some(d) => (if w.starts_with('-') { "-" } else { "" }, d),
        None => ("", w.as_str()),
    };
    let mut d = digits.to_string();
    if d.starts_with('.') {
        d.insert(0, '0');
    }
    if let Some(i) = d.find('.')
        && !d[i + 1..].starts_with(|c: char| c.is_ascii_digit())
    {
        d.insert(i + 1, '0');
    }
    if !d.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    // Python's integers have no bound: one past i64/u64 is kept as a float.
    match serde_json::from_str::<Value>(&format!("{sign}{d}")).ok()? {
        v @ Value::Number(_) => Some(v),
        _ => None,
    }
}
