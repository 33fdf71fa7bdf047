//! Errors of the core, each naming what is wrong so a binding can pass it on verbatim.

use std::fmt;

use crate::keys::InvalidKeys;

/// A grouper could not be built from the given name, worker count and parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigError {
    UnknownGrouper { name: String, known: Vec<&'static str> },
    Workers { workers: u64, max: u32 },
    SharedLoads { loads: u32, workers: u32 },
    UnknownParam { grouper: &'static str, param: String, known: Vec<&'static str> },
    ParamType { grouper: &'static str, param: String, expected: &'static str, got: &'static str },
    ParamRange { grouper: &'static str, param: String, reason: String },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::UnknownGrouper { name, known } => {
                write!(f, "unknown grouper {name:?}; known groupers: {}", known.join(", "))
            }
            ConfigError::Workers { workers, max } => {
                write!(f, "workers must be in [1, {max}], got {workers}")
            }
            ConfigError::SharedLoads { loads, workers } => write!(
                f,
                "the shared load vector counts {loads} workers, but the grouper has {workers}"
            ),
            ConfigError::UnknownParam { grouper, param, known } if known.is_empty() => {
                write!(f, "grouper {grouper:?} takes no parameter, got {param:?}")
            }
            ConfigError::UnknownParam { grouper, param, known } => write!(
                f,
                "grouper {grouper:?} has no parameter {param:?}; its parameters: {}",
                known.join(", ")
            ),
            ConfigError::ParamType { grouper, param, expected, got } => {
                write!(
                    f,
                    "parameter {param:?} of grouper {grouper:?} must be {expected}, got {got}"
                )
            }
            ConfigError::ParamRange { grouper, param, reason } => {
                write!(f, "parameter {param:?} of grouper {grouper:?} {reason}")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

/// A batch could not be routed. Nothing was routed and no state changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RouteError {
    InvalidKeys(InvalidKeys),
    NullKeys { nulls: usize },
    OutputLength { keys: usize, out: usize },
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteError::InvalidKeys(e) => e.fmt(f),
            RouteError::NullKeys { nulls } => write!(
                f,
                "the keys hold {nulls} null(s); nulls are refused by default: \
                 pass nulls=\"group\" to route every null as one key"
            ),
            RouteError::OutputLength { keys, out } => {
                write!(f, "output has room for {out} worker ids, but there are {keys} keys")
            }
        }
    }
}

impl std::error::Error for RouteError {}

impl From<InvalidKeys> for RouteError {
    fn from(e: InvalidKeys) -> Self {
        RouteError::InvalidKeys(e)
    }
}
