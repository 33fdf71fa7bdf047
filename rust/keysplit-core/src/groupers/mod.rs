//! One module per grouper family. Each module names its paper (or the section of
//! `spec/baselines.md`) and documents every choice the paper leaves open.

use crate::grouper::GrouperInfo;

pub mod choices;
pub mod dagreedy;
pub mod dalton;
pub mod holistic;
pub mod key;
pub mod pdstream;
pub mod pkg;
pub mod pstream;
pub mod rivetti;
pub mod shuffle;
pub mod uhlb;

// In the order of the documentation: baselines, then the papers' groupers.
pub(crate) static REGISTRY: &[GrouperInfo] = &[
    shuffle::INFO,
    key::INFO,
    uhlb::INFO,
    pkg::INFO,
    choices::D_CHOICES,
    choices::W_CHOICES,
    choices::RR_HEAD,
    rivetti::INFO,
    pdstream::INFO,
    pstream::INFO,
    dagreedy::INFO,
    dalton::INFO,
    holistic::CM,
    holistic::AM,
    holistic::CAM,
    holistic::LM,
    holistic::CM_HLL,
    holistic::AM_HLL,
    holistic::CAM_HLL,
    holistic::LM_HLL,
];
