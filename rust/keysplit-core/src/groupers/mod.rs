//! One module per grouper family. Each module cites its paper (authors, title, venue, year,
//! and DOI where there is one), names the section of the repository's `docs/baselines.md`
//! that specifies it when it is a baseline, and documents every choice the paper leaves
//! open.

use crate::grouper::GrouperInfo;

/// Declares each grouper module and lists its registry entries, in the order the
/// documentation lists them: the hashing baselines, the heavy-hitter baselines, the
/// key-splitting papers, the holistic paper, the rebalancing paper, the other baselines.
/// A new grouper is one line here and its own module.
macro_rules! groupers {
    ($($module:ident => [$($info:ident),+ $(,)?]),+ $(,)?) => {
        $(pub mod $module;)+

        pub(crate) static REGISTRY: &[GrouperInfo] = &[$($($module::$info),+),+];
    };
}

groupers! {
    shuffle => [INFO],
    key => [INFO],
    uhlb => [INFO],
    pkg => [INFO],
    choices => [D_CHOICES, W_CHOICES, RR_HEAD],
    rivetti => [INFO],
    dkg => [INFO],
    flexd => [INFO],
    pdstream => [INFO],
    holistic => [CM, AM, CAM, LM, CM_HLL, AM_HLL, CAM_HLL, LM_HLL],
    rebalancing => [ELB, CLB],
    pstream => [INFO],
    dagreedy => [INFO],
    dalton => [INFO],
    elastic => [INFO],
}
