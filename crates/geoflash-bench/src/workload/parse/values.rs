//! Reading typed values out of TOML: [`Ctx`] turns a value's span into a
//! located error (`FILE: line N, key `KEY`: …`) and reads strings,
//! integers, numbers, per-scale counts and lists; the `as_*` converters
//! read one list item (their errors are located by [`Ctx::list`] or
//! [`Ctx::at`]).
use std::ops::Range;
use std::path::Path;

use geoflash::{Error, Result};
use toml::Spanned;

use crate::windows::parse_selectivity;
use crate::workload::model::Scale;

/// Turns spans into "line N" messages.
pub(super) struct Ctx<'a> {
    /// The workload file's path, for messages.
    pub(super) path: &'a Path,
    /// The file's text, for line numbers.
    pub(super) text: &'a str,
    /// The scale per-scale values are picked at.
    pub(super) scale: Scale,
}

impl Ctx<'_> {
    /// The line of the file where `span` starts (from 1).
    pub(super) fn line(&self, span: &Range<usize>) -> usize {
        let end = span.start.min(self.text.len());
        self.text
            .get(..end)
            .map(|t| t.matches('\n').count() + 1)
            .unwrap_or(1)
    }

    /// An error at `span` on key `key`.
    pub(super) fn err(&self, span: &Range<usize>, key: &str, msg: impl std::fmt::Display) -> Error {
        Error::invalid(format!(
            "{}: line {}, key `{key}`: {msg}",
            self.path.display(),
            self.line(span)
        ))
    }

    /// Maps a library error on a value to a located one.
    pub(super) fn at<T>(&self, span: &Range<usize>, key: &str, r: Result<T>) -> Result<T> {
        r.map_err(|e| self.err(span, key, strip_invalid(&e)))
    }

    /// A string value.
    pub(super) fn string(&self, v: &Spanned<toml::Value>, key: &str) -> Result<String> {
        match v.get_ref() {
            toml::Value::String(s) => Ok(s.clone()),
            other => Err(self.err(
                &v.span(),
                key,
                format!("expected a string, found {}", other.type_str()),
            )),
        }
    }

    /// A non-negative integer.
    pub(super) fn int(&self, span: &Range<usize>, v: &toml::Value, key: &str) -> Result<u64> {
        match v {
            toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
            toml::Value::Integer(i) => Err(self.err(span, key, format!("{i} is negative"))),
            other => Err(self.err(
                span,
                key,
                format!("expected an integer, found {}", other.type_str()),
            )),
        }
    }

    /// A finite number (an integer counts).
    pub(super) fn float(&self, span: &Range<usize>, v: &toml::Value, key: &str) -> Result<f64> {
        match v {
            toml::Value::Float(f) if f.is_finite() => Ok(*f),
            toml::Value::Integer(i) => Ok(*i as f64),
            other => Err(self.err(
                span,
                key,
                format!("expected a number, found {}", other.type_str()),
            )),
        }
    }

    /// An integer, or a table `{ smoke = .., small = .., full = .. }` picked by the scale.
    pub(super) fn scaled(&self, v: &Spanned<toml::Value>, key: &str) -> Result<u64> {
        let span = v.span();
        match v.get_ref() {
            toml::Value::Table(t) => {
                for k in t.keys() {
                    if k.parse::<Scale>().is_err() {
                        return Err(self.err(
                            &span,
                            key,
                            format!("unknown scale {k:?} (use smoke, small and full)"),
                        ));
                    }
                }
                let chosen = t.get(self.scale.name()).ok_or_else(|| {
                    self.err(
                        &span,
                        key,
                        format!("no value for scale {}", self.scale.name()),
                    )
                })?;
                self.int(&span, chosen, &format!("{key}.{}", self.scale.name()))
            }
            other => self.int(&span, other, key),
        }
    }

    /// A value or a list of values (each converted by `f`).
    pub(super) fn list<T>(
        &self,
        v: &Spanned<toml::Value>,
        key: &str,
        f: impl Fn(&toml::Value) -> Result<T>,
    ) -> Result<Vec<T>> {
        let span = v.span();
        let items: Vec<&toml::Value> = match v.get_ref() {
            toml::Value::Array(a) if a.is_empty() => {
                return Err(self.err(&span, key, "empty list"));
            }
            toml::Value::Array(a) => a.iter().collect(),
            other => vec![other],
        };
        if let Some(d) = duplicate(items.iter().copied()) {
            return Err(self.err(&span, key, d));
        }
        items
            .into_iter()
            .map(|x| f(x).map_err(|e| self.err(&span, key, strip_invalid(&e))))
            .collect()
    }
}

/// The message refusing a value that a list gives twice, `None` when its
/// values are distinct. Each value of a list is a configuration (or a
/// row) of its own: a repeated one would run the same configuration again
/// under the same key (the first run leaving the copy "already complete",
/// `--force` replacing it) or record two rows with the same parameter
/// (the second on a warm buffer) that a report pools as repetitions.
pub(super) fn duplicate<'a>(values: impl IntoIterator<Item = &'a toml::Value>) -> Option<String> {
    let values: Vec<&toml::Value> = values.into_iter().collect();
    values
        .iter()
        .enumerate()
        .find(|(i, v)| values.iter().skip(i + 1).any(|w| w == *v))
        .map(|(_, v)| format!("{v} is listed twice: give each value once"))
}

/// The message of an error without its "invalid argument" prefix.
pub(super) fn strip_invalid(e: &Error) -> String {
    match e {
        Error::InvalidInput(m) => m.clone(),
        other => other.to_string(),
    }
}

/// A string.
pub(super) fn as_str(v: &toml::Value) -> Result<String> {
    match v {
        toml::Value::String(s) => Ok(s.clone()),
        other => Err(Error::invalid(format!(
            "expected a string, found {}",
            other.type_str()
        ))),
    }
}

/// A non-negative integer.
pub(super) fn as_uint(v: &toml::Value) -> Result<u64> {
    match v {
        toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
        other => Err(Error::invalid(format!(
            "expected a non-negative integer, found {other}"
        ))),
    }
}

/// A selectivity (a percentage string or a fraction) with its text, for labels.
pub(super) fn as_selectivity(v: &toml::Value) -> Result<(f64, String)> {
    match v {
        toml::Value::String(s) => Ok((parse_selectivity(s)?, s.clone())),
        toml::Value::Float(f) => Ok((parse_selectivity(&f.to_string())?, f.to_string())),
        other => Err(Error::invalid(format!(
            "expected a selectivity such as \"0.01%\" or 0.0001, found {other}"
        ))),
    }
}
