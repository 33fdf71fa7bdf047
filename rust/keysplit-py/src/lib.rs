//! Python bindings of keysplit-core: only conversion and error mapping live here.

use std::sync::Arc;

use arrow_array::UInt64Array;
use keysplit_core::grouper::MAX_WORKERS;
use keysplit_core::hash;
use keysplit_core::registry::registry;
use keysplit_core::streams::Zipf;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use pyo3_arrow::PyArray;

mod errors;
mod grouper;
mod keys;
mod sketches;
mod snapshot;
mod tables;
mod worker_ids;

use grouper::{GrouperCore, params_to_dict};
use worker_ids::WorkerIds;

/// Every registered grouper: name, title, paper, default parameters and their docs.
#[pyfunction]
fn groupers(py: Python<'_>) -> PyResult<Bound<'_, PyList>> {
    let entries = PyList::empty(py);
    for info in registry() {
        let entry = PyDict::new(py);
        entry.set_item("name", info.name)?;
        entry.set_item("title", info.title)?;
        entry.set_item("paper", info.paper)?;
        let defaults = info.params.iter().map(|p| (p.name.to_owned(), p.default.clone())).collect();
        entry.set_item("defaults", params_to_dict(py, &defaults)?)?;
        let docs = PyDict::new(py);
        for p in info.params {
            docs.set_item(p.name, p.doc)?;
        }
        entry.set_item("param_docs", docs)?;
        entries.append(entry)?;
    }
    Ok(entries)
}

/// `h_index(key)` for a grouper seeded with `seed`: the hash every routing starts from.
#[pyfunction]
#[pyo3(signature = (key, seed=0, index=0))]
fn hash_key(key: &Bound<'_, PyAny>, seed: u64, index: u64) -> PyResult<u64> {
    let key = keys::owned_key(key)?
        .ok_or_else(|| errors::KeyTypeError::new_err("hash_key() needs a key, got None"))?;
    Ok(key.as_key().hash(hash::candidate_seed(seed, index)))
}

/// Key ranks drawn from a Zipf law, in batches: the seeded synthetic stream.
#[pyclass(module = "keysplit._core", name = "ZipfStream")]
struct ZipfStream {
    zipf: Zipf,
}

#[pymethods]
impl ZipfStream {
    #[new]
    fn new(keys: u64, z: f64, seed: u64) -> PyResult<Self> {
        let zipf =
            Zipf::new(keys, z, seed).map_err(|e| errors::ConfigError::new_err(e.to_string()))?;
        Ok(Self { zipf })
    }

    /// The next `rows` key ranks, as a uint64 Arrow array.
    fn next_batch(&mut self, py: Python<'_>, rows: usize) -> PyArray {
        let values = py.detach(|| {
            let mut values = vec![0u64; rows];
            self.zipf.fill(&mut values);
            values
        });
        PyArray::from_array_ref(Arc::new(UInt64Array::from(values)))
    }

    /// The probability of key rank `rank`.
    fn probability(&self, rank: u64) -> PyResult<f64> {
        if rank >= self.zipf.keys() {
            return Err(errors::ConfigError::new_err(format!(
                "rank {rank} is out of range for {} keys",
                self.zipf.keys()
            )));
        }
        Ok(self.zipf.probability(rank))
    }
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("MAX_WORKERS", MAX_WORKERS)?;
    m.add("SUPPORTED_KEY_TYPES", keys::SUPPORTED_KEY_TYPES)?;
    m.add_class::<GrouperCore>()?;
    m.add("SNAPSHOT_FORMAT_VERSION", keysplit_core::snapshot::FORMAT_VERSION)?;
    m.add_class::<WorkerIds>()?;
    m.add_function(wrap_pyfunction!(groupers, m)?)?;
    m.add_function(wrap_pyfunction!(hash_key, m)?)?;
    m.add_function(wrap_pyfunction!(grouper::route_sources, m)?)?;
    m.add_class::<ZipfStream>()?;
    m.add_class::<sketches::PyCountMin>()?;
    m.add_class::<sketches::PySpaceSaving>()?;
    m.add_class::<sketches::PyHyperLogLog>()?;
    m.add_class::<sketches::PySlidingWindowCounter>()?;
    m.add_function(wrap_pyfunction!(sketches::fingerprint, m)?)?;
    m.add_function(wrap_pyfunction!(tables::pdstream_probability_table, m)?)?;
    m.add_function(wrap_pyfunction!(tables::dkg_threshold_table, m)?)?;
    Ok(())
}
