//! One module per grouper family. Each module names its paper (or the section of
//! `spec/baselines.md`) and documents every choice the paper leaves open.

use crate::grouper::GrouperInfo;

pub mod choices;
pub mod key;
pub mod pkg;
pub mod shuffle;
pub mod uhlb;

pub(crate) static REGISTRY: &[GrouperInfo] = &[
    shuffle::INFO,
    key::INFO,
    pkg::INFO,
    uhlb::INFO,
    choices::D_CHOICES,
    choices::W_CHOICES,
    choices::RR_HEAD,
];
