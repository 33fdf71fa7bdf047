//! One module per grouper family. Each module names its paper (or the section of
//! `spec/baselines.md`) and documents every choice the paper leaves open.

use crate::grouper::GrouperInfo;

pub mod key;
pub mod pdstream;
pub mod pkg;
pub mod shuffle;

pub(crate) static REGISTRY: &[GrouperInfo] = &[shuffle::INFO, key::INFO, pkg::INFO, pdstream::INFO];
