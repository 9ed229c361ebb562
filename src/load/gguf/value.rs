//! A GGUF file's metadata: typed values by key (`general.architecture`, `mamba.ssm.d_state`,
//! `tokenizer.ggml.tokens`, …), with accessors that turn a missing or mistyped key into a typed
//! [`Error::Gguf`] naming the key.

use std::collections::BTreeMap;

use crate::error::{Error, Result};

/// One metadata value, as stored (GGUF value types 0–12).
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// uint8, uint16, uint32, uint64.
    Uint(u64),
    /// int8, int16, int32, int64.
    Int(i64),
    /// float32.
    F32(f32),
    /// float64.
    F64(f64),
    /// bool.
    Bool(bool),
    /// string (UTF-8; invalid bytes are replaced).
    Str(String),
    /// array of values of one type (nested at most [`super::header::MAX_ARRAY_DEPTH`] deep).
    Array(Vec<Value>),
}

impl Value {
    /// The value as an integer, if it is one (of either sign) that fits i64.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Uint(u) => i64::try_from(u).ok(),
            Value::Int(i) => Some(i),
            _ => None,
        }
    }

    /// The value as a float (ints are exact up to 2^53).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::F32(f) => Some(f as f64),
            Value::F64(f) => Some(f),
            Value::Uint(u) => Some(u as f64),
            Value::Int(i) => Some(i as f64),
            _ => None,
        }
    }

    /// The value as a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The value as an array.
    pub fn as_array(&self) -> Option<&[Value]> {
        match self {
            Value::Array(a) => Some(a),
            _ => None,
        }
    }
}

/// Every metadata key of one file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    /// The file's name (for errors).
    pub file: String,
    /// Values by key.
    pub values: BTreeMap<String, Value>,
}

impl Metadata {
    /// A `Gguf` error about this file.
    pub(crate) fn fail(&self, reason: String) -> Error {
        Error::Gguf { file: self.file.clone(), reason }
    }

    /// A string key, if present.
    pub(crate) fn opt_str(&self, key: &str) -> Result<Option<&str>> {
        self.get(key).map(|_| self.str(key)).transpose()
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    /// A string key that must be present.
    pub fn str(&self, key: &str) -> Result<&str> {
        match self.get(key) {
            Some(v) => v.as_str().ok_or_else(|| self.fail(format!("metadata {key} is not a string"))),
            None => Err(self.fail(format!("metadata {key} is missing"))),
        }
    }

    /// An optional non-negative integer key, checked to be at most `max`.
    pub fn opt_uint(&self, key: &str, max: u64) -> Result<Option<u64>> {
        let Some(v) = self.get(key) else { return Ok(None) };
        match v.as_i64() {
            Some(i) if i >= 0 && i as u64 <= max => Ok(Some(i as u64)),
            Some(i) => Err(self.fail(format!("metadata {key} = {i} is outside 0..={max}"))),
            None => Err(self.fail(format!("metadata {key} is not an integer"))),
        }
    }

    /// A non-negative integer key that must be present, at most `max`.
    pub fn uint(&self, key: &str, max: u64) -> Result<u64> {
        self.opt_uint(key, max)?.ok_or_else(|| self.fail(format!("metadata {key} is missing")))
    }

    /// An optional finite float key.
    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>> {
        let Some(v) = self.get(key) else { return Ok(None) };
        match v.as_f64() {
            Some(f) if f.is_finite() => Ok(Some(f)),
            _ => Err(self.fail(format!("metadata {key} is not a finite number"))),
        }
    }

    /// An optional array key.
    pub fn opt_array(&self, key: &str) -> Result<Option<&[Value]>> {
        let Some(v) = self.get(key) else { return Ok(None) };
        v.as_array().map(Some).ok_or_else(|| self.fail(format!("metadata {key} is not an array")))
    }

    /// An integer key that is either one value for every layer or an array of `n` (llama.cpp's
    /// per-layer head counts, where 0 marks a layer without attention).
    pub fn per_layer(&self, key: &str, n: usize, max: u64) -> Result<Option<Vec<u64>>> {
        let Some(v) = self.get(key) else { return Ok(None) };
        let one = |v: &Value| match v.as_i64() {
            Some(i) if i >= 0 && i as u64 <= max => Ok(i as u64),
            _ => Err(self.fail(format!("metadata {key} holds a value outside 0..={max}"))),
        };
        match v {
            Value::Array(a) if a.len() == n => a.iter().map(one).collect::<Result<_>>().map(Some),
            Value::Array(a) => {
                Err(self.fail(format!("metadata {key} has {} values for {n} layers", a.len())))
            }
            v => Ok(Some(vec![one(v)?; n])),
        }
    }
}
