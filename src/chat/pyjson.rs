//! `tojson` as Hugging Face's chat templates see it: transformers replaces Jinja's filter with
//! Python's `json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
//! sort_keys=sort_keys)` — `", "` and `": "` between items (`","` when indenting), non-ASCII
//! kept, floats as Python's `repr` (`1.0`, `1e-05`), dict keys in insertion order. Templates
//! print tool schemas with it, so the rendered prompt depends on every one of these details.

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind};

/// How to print: `indent` spaces per level (None: one line), the item and key separators.
pub(crate) struct Style {
    pub(crate) indent: Option<String>,
    pub(crate) item: String,
    pub(crate) key: String,
    pub(crate) sort_keys: bool,
}

impl Style {
    /// Python's defaults for `indent` (None: `", "`/`": "`; else `","`/`": "`).
    pub(crate) fn new(indent: Option<String>, separators: Option<(String, String)>, sort_keys: bool) -> Self {
        let (item, key) = separators
            .unwrap_or_else(|| (if indent.is_some() { "," } else { ", " }.to_string(), ": ".to_string()));
        Self { indent, item, key, sort_keys }
    }
}

/// `v` as Python's `json.dumps` prints it. Under a template memory limit
/// (`minijinja::memory`) the text stops with the limit's error as soon as it is longer.
pub(crate) fn dumps(v: &Value, style: &Style) -> Result<String, Error> {
    let mut out = String::new();
    write(v, style, 0, &mut out)?;
    Ok(out)
}

/// Whether `out` is still within the template memory limit.
fn within(out: &str) -> Result<(), Error> {
    match minijinja::memory::limit() {
        Some(limit) if out.len() > limit => minijinja::memory::check_result_len(out.len()),
        _ => Ok(()),
    }
}

fn newline(style: &Style, level: usize, out: &mut String) -> Result<(), Error> {
    if let Some(indent) = &style.indent {
        out.push('\n');
        for _ in 0..level {
            out.push_str(indent);
            within(out)?;
        }
    }
    Ok(())
}

fn write(v: &Value, style: &Style, level: usize, out: &mut String) -> Result<(), Error> {
    within(out)?;
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => out.push_str(&number(v)?),
        ValueKind::String => string(v.as_str().unwrap_or_default(), out),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = v.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item);
                }
                newline(style, level + 1, out)?;
                write(item, style, level + 1, out)?;
            }
            newline(style, level, out)?;
            out.push(']');
        }
        ValueKind::Map => {
            let mut keys: Vec<Value> = v.try_iter()?.collect();
            if keys.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            if style.sort_keys {
                keys.sort_by_key(|k| k.to_string());
            }
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item);
                }
                newline(style, level + 1, out)?;
                match key.kind() {
                    ValueKind::String => string(key.as_str().unwrap_or_default(), out),
                    // Python turns number, bool and None keys into strings.
                    ValueKind::Number => string(&number(key)?, out),
                    ValueKind::Bool => string(if key.is_true() { "true" } else { "false" }, out),
                    ValueKind::None => string("null", out),
                    _ => {
                        return Err(Error::new(
                            ErrorKind::InvalidOperation,
                            format!("tojson: keys must be str, int, float, bool or None, not {}", key.kind()),
                        ));
                    }
                }
                out.push_str(&style.key);
                write(&v.get_item(key)?, style, level + 1, out)?;
            }
            newline(style, level, out)?;
            out.push('}');
        }
        other => {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                format!("tojson: object of type {other} is not JSON serializable"),
            ));
        }
    }
    Ok(())
}

/// An integer as digits; a float as Python's `repr` (shortest round-trip digits, exponent form
/// below 1e-4 and from 1e16, `NaN`/`Infinity` as `json.dumps` writes them).
fn number(v: &Value) -> Result<String, Error> {
    if let Ok(i) = i128::try_from(v.clone())
        && v.is_integer()
    {
        return Ok(i.to_string());
    }
    let f = f64::try_from(v.clone())?;
    Ok(float_repr(f))
}

/// Python's `repr(float)`.
pub(crate) fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    // Rust's `{:e}` gives the shortest round-trip digits: "1.2345e-5".
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if negative { "-" } else { "" };
    if (-4..16).contains(&exp) {
        // Fixed notation with at least one digit after the point.
        let point = exp + 1; // digits before the point
        let body = if point <= 0 {
            format!("0.{}{digits}", "0".repeat((-point) as usize))
        } else if point as usize >= digits.len() {
            format!("{digits}{}.0", "0".repeat(point as usize - digits.len()))
        } else {
            format!("{}.{}", &digits[..point as usize], &digits[point as usize..])
        };
        format!("{sign}{body}")
    } else {
        let frac = if digits.len() > 1 { format!("{}.{}", &digits[..1], &digits[1..]) } else { digits };
        format!("{sign}{frac}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

/// A JSON string with `ensure_ascii=False`: `"` `\` and control characters escaped (the short
/// forms where JSON has them), everything else as is.
fn string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_python_repr() {
        // repr() of each, from CPython.
        for (f, want) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (123456789.0, "123456789.0"),
            (1e16, "1e+16"),
            (1.5e300, "1.5e+300"),
            (-2.5, "-2.5"),
            (9999999999999998.0, "9999999999999998.0"),
            (0.30000000000000004, "0.30000000000000004"),
        ] {
            assert_eq!(float_repr(f), want, "{f}");
        }
    }

    #[test]
    fn dumps_matches_python_json_dumps() {
        let v: Value = serde_json::from_str::<Value>(
            r#"{"name": "get_weather", "n": 3, "x": 1.0, "ok": true, "none": null, "list": [1, "é\n\"q\""], "empty": {}, "e": []}"#,
        )
        .unwrap();
        // json.dumps(v, ensure_ascii=False)
        assert_eq!(
            dumps(&v, &Style::new(None, None, false)).unwrap(),
            r#"{"name": "get_weather", "n": 3, "x": 1.0, "ok": true, "none": null, "list": [1, "é\n\"q\""], "empty": {}, "e": []}"#
        );
        // json.dumps(v, ensure_ascii=False, indent=2)
        assert_eq!(
            dumps(&v, &Style::new(Some("  ".into()), None, false)).unwrap(),
            "{\n  \"name\": \"get_weather\",\n  \"n\": 3,\n  \"x\": 1.0,\n  \"ok\": true,\n  \"none\": null,\n  \"list\": [\n    1,\n    \"é\\n\\\"q\\\"\"\n  ],\n  \"empty\": {},\n  \"e\": []\n}"
        );
    }
}
