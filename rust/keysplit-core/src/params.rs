//! Grouper parameters: typed values, documented defaults and strict validation.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::ConfigError;

/// A parameter value as it crosses the API.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ParamValue {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Cow<'static, str>),
}

impl ParamValue {
    pub fn type_name(&self) -> &'static str {
        match self {
            ParamValue::Bool(_) => "bool",
            ParamValue::Int(_) => "int",
            ParamValue::Float(_) => "float",
            ParamValue::Str(_) => "str",
        }
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Bool(v) => write!(f, "{v}"),
            ParamValue::Int(v) => write!(f, "{v}"),
            ParamValue::Float(v) => write!(f, "{v}"),
            ParamValue::Str(v) => write!(f, "{v:?}"),
        }
    }
}

/// Parameters by name, in name order.
pub type Params = BTreeMap<String, ParamValue>;

/// One documented parameter of a grouper, with the default its paper uses.
#[derive(Clone, Debug)]
pub struct ParamSpec {
    pub name: &'static str,
    pub default: ParamValue,
    pub doc: &'static str,
}

// Parameters several groupers declare with the same name, default and meaning, so that
// their documentation cannot drift apart. `window_tuples` is not among them: DKG, the
// holistic groupers and ELB/CLB give it different defaults (a 15-second cycle, 0 for
// "only end_window()", a 1-minute window), so each declares its own.

/// Whether the second hash candidate is moved off the first (two-choice groupers).
pub const DISTINCT_CANDIDATES: ParamSpec = ParamSpec {
    name: "distinct_candidates",
    default: ParamValue::Bool(true),
    doc: "force the second hash candidate apart from the first as Apache Storm does; false \
          lets them collide as in the PKG paper",
};

/// The interval of the windowed key-splitting groupers (DAGreedy, Dalton).
pub const INTERVAL_TUPLES: ParamSpec = ParamSpec {
    name: "interval_tuples",
    default: ParamValue::Int(100_000),
    doc: "tuples per interval (hot-key interval and load-window pane); end_window() closes an \
          interval early",
};

/// The load window of the windowed key-splitting groupers (DAGreedy, Dalton).
pub const WINDOW_PANES: ParamSpec = ParamSpec {
    name: "window_panes",
    default: ParamValue::Int(10),
    doc: "closed panes (intervals) kept in the load window besides the current one",
};

/// A parameter out of its range, named and explained, before the grouper it belongs to is
/// attached by [`ParamReader::refuse`]. Its constructors word every plain range the same
/// way, so that users meet one style whichever grouper they configure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamError {
    pub name: &'static str,
    pub reason: String,
}

impl ParamError {
    /// A reason the plain ranges below do not cover (one bound depending on another
    /// parameter, a special value such as 0 for "automatic").
    pub fn new(name: &'static str, reason: impl Into<String>) -> Self {
        Self { name, reason: reason.into() }
    }

    /// `must be in [lo, hi], got x`.
    pub fn not_in(
        name: &'static str,
        lo: impl fmt::Display,
        hi: impl fmt::Display,
        got: impl fmt::Display,
    ) -> Self {
        Self::new(name, format!("must be in [{lo}, {hi}], got {got}"))
    }

    /// `must be at least lo, got x`.
    pub fn below(name: &'static str, lo: impl fmt::Display, got: impl fmt::Display) -> Self {
        Self::new(name, format!("must be at least {lo}, got {got}"))
    }
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.name, self.reason)
    }
}

impl std::error::Error for ParamError {}

/// Reads a grouper's parameters against its specs, records the effective values and
/// rejects what the grouper does not know.
pub struct ParamReader<'a> {
    grouper: &'static str,
    specs: &'static [ParamSpec],
    given: &'a Params,
    effective: Params,
}

impl<'a> ParamReader<'a> {
    /// Fails on a parameter the grouper does not declare, before any value is read.
    pub fn new(
        grouper: &'static str,
        specs: &'static [ParamSpec],
        given: &'a Params,
    ) -> Result<Self, ConfigError> {
        if let Some(unknown) = given.keys().find(|k| !specs.iter().any(|s| s.name == *k)) {
            return Err(ConfigError::UnknownParam {
                grouper,
                param: unknown.clone(),
                known: specs.iter().map(|s| s.name).collect(),
            });
        }
        Ok(Self { grouper, specs, given, effective: Params::new() })
    }

    fn spec(&self, name: &str) -> &'static ParamSpec {
        self.specs
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("grouper {} reads undeclared parameter {name}", self.grouper))
    }

    fn value(&mut self, name: &str) -> ParamValue {
        let spec = self.spec(name);
        let value = self.given.get(name).cloned().unwrap_or_else(|| spec.default.clone());
        self.effective.insert(name.to_owned(), value.clone());
        value
    }

    fn wrong_type(&self, name: &str, expected: &'static str, got: &ParamValue) -> ConfigError {
        ConfigError::ParamType {
            grouper: self.grouper,
            param: name.to_owned(),
            expected,
            got: got.type_name(),
        }
    }

    /// Whether the caller gave `name`, rather than leaving it at its default. A range error
    /// between two parameters names the one the caller gave.
    pub fn given(&self, name: &str) -> bool {
        self.given.contains_key(name)
    }

    /// `error`, as this grouper's.
    pub fn refuse(&self, error: ParamError) -> ConfigError {
        ConfigError::ParamRange {
            grouper: self.grouper,
            param: error.name.to_owned(),
            reason: error.reason,
        }
    }

    /// A range error for parameter `name`.
    pub fn out_of_range(&self, name: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::ParamRange {
            grouper: self.grouper,
            param: name.to_owned(),
            reason: reason.into(),
        }
    }

    pub fn bool(&mut self, name: &str) -> Result<bool, ConfigError> {
        match self.value(name) {
            ParamValue::Bool(v) => Ok(v),
            other => Err(self.wrong_type(name, "bool", &other)),
        }
    }

    pub fn int(&mut self, name: &str) -> Result<i64, ConfigError> {
        match self.value(name) {
            ParamValue::Int(v) => Ok(v),
            other => Err(self.wrong_type(name, "int", &other)),
        }
    }

    /// A finite float; an int is accepted and widened.
    pub fn float(&mut self, name: &str) -> Result<f64, ConfigError> {
        let value = match self.value(name) {
            ParamValue::Float(v) => v,
            ParamValue::Int(v) => v as f64,
            other => return Err(self.wrong_type(name, "float", &other)),
        };
        if !value.is_finite() {
            return Err(self.out_of_range(name, format!("must be finite, got {value}")));
        }
        self.effective.insert(name.to_owned(), ParamValue::Float(value));
        Ok(value)
    }

    /// Every declared parameter with its effective value, defaults included.
    pub fn finish(mut self) -> Params {
        for spec in self.specs {
            if !self.effective.contains_key(spec.name) {
                self.effective.insert(spec.name.to_owned(), spec.default.clone());
            }
        }
        self.effective
    }
}
