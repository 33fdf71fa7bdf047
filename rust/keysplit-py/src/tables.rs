//! The papers' tables, computed by the library's own functions.

use crate::errors::ConfigError;
use keysplit_core::groupers::{dkg, pdstream};
use pyo3::prelude::*;

/// The largest sampling window the probability table is computed for here: each entry is
/// a bisection over binomial tails of `window` terms.
const MAX_TABLE_WINDOW: u32 = 1 << 14;

/// Pd-Stream's probability table (Algorithm 1, Table III): entry `i` is `p̂` for a key
/// seen `i + 1` times in a window of `window` keys.
#[pyfunction]
#[pyo3(signature = (window, expected_probability=0.99, epsilon=1e-4))]
pub fn pdstream_probability_table(
    py: Python<'_>,
    window: u32,
    expected_probability: f64,
    epsilon: f64,
) -> PyResult<Vec<f64>> {
    if !(1..=MAX_TABLE_WINDOW).contains(&window) {
        return Err(ConfigError::new_err(format!(
            "window must be in [1, {MAX_TABLE_WINDOW}], got {window}"
        )));
    }
    if !(expected_probability > 0.0 && expected_probability < 1.0) {
        return Err(ConfigError::new_err(format!(
            "expected_probability must be in (0, 1), got {expected_probability}"
        )));
    }
    if !(epsilon > 0.0 && epsilon < 1.0) {
        return Err(ConfigError::new_err(format!("epsilon must be in (0, 1), got {epsilon}")));
    }
    Ok(py.detach(|| pdstream::probability_table(window, expected_probability, epsilon)))
}

/// Dynamic Key Grouping's Table 1, one row per worker count: `(machines, ideal load %,
/// threshold load % = Li + √Li, maximum machines of a key)`.
#[pyfunction]
pub fn dkg_threshold_table(machines: Vec<u32>) -> PyResult<Vec<(u32, f64, f64, u32)>> {
    if let Some(&bad) = machines.iter().find(|&&m| m == 0) {
        return Err(ConfigError::new_err(format!("machines must be at least 1, got {bad}")));
    }
    Ok(dkg::threshold_table(&machines)
        .into_iter()
        .map(|row| (row.machines, row.ideal_load, row.threshold_load, row.max_machines))
        .collect())
}
