//! The sketches of keysplit-core, over keys as `route` reads them (each key enters as its
//! 64-bit fingerprint).

use crate::errors::ConfigError;
use keysplit_core::sketches::{
    CountMin, HyperLogLog, KeyedSpaceSaving, SketchError, SlidingWindowCounter,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use crate::grouper::null_policy;
use crate::keys::{
    key_fingerprint, key_fingerprints, key_label, key_label_object, keys_with_fingerprints,
};
use crate::snapshot::{reduce_by_snapshot, sketch_restore, sketch_snapshot, snapshot_error};

fn sketch_error(e: SketchError) -> PyErr {
    ConfigError::new_err(e.to_string())
}

/// Count-Min sketch (Cormode and Muthukrishnan 2005): a frequency upper bound for every
/// key, optionally with conservative update (Estan and Varghese 2002).
#[pyclass(module = "keysplit._core", name = "CountMin")]
pub struct PyCountMin {
    inner: CountMin,
}

#[pymethods]
impl PyCountMin {
    /// The whole sketch as versioned, checksummed bytes.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        sketch_snapshot(py, &self.inner)
    }

    /// The sketch a snapshot holds.
    #[staticmethod]
    fn restore(snapshot: &[u8]) -> PyResult<Self> {
        Ok(Self { inner: sketch_restore::<CountMin>(snapshot)? })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        reduce_by_snapshot(slf.as_any(), slf.borrow().snapshot(slf.py())?)
    }

    #[new]
    #[pyo3(signature = (width, depth, seed=0, conservative_update=false))]
    fn new(width: usize, depth: usize, seed: u64, conservative_update: bool) -> PyResult<Self> {
        let inner = CountMin::new(width, depth, seed).map_err(sketch_error)?;
        Ok(Self { inner: inner.with_conservative_update(conservative_update) })
    }

    /// A sketch whose overestimate is at most `epsilon · total` with probability
    /// `1 - delta`: `width = ceil(e / epsilon)`, `depth = ceil(ln(1 / delta))`.
    #[staticmethod]
    #[pyo3(signature = (epsilon, delta, seed=0, conservative_update=false))]
    fn with_error(
        epsilon: f64,
        delta: f64,
        seed: u64,
        conservative_update: bool,
    ) -> PyResult<Self> {
        let inner = CountMin::with_error(epsilon, delta, seed).map_err(sketch_error)?;
        Ok(Self { inner: inner.with_conservative_update(conservative_update) })
    }

    /// Counts every key of a column once.
    #[pyo3(signature = (keys, nulls="raise"))]
    fn update(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>, nulls: &str) -> PyResult<()> {
        let items = key_fingerprints(py, keys, null_policy(nulls)?)?;
        py.detach(|| items.iter().for_each(|&item| self.inner.insert(item, 1)));
        Ok(())
    }

    /// An upper bound of the key's count.
    fn estimate(&self, key: &Bound<'_, PyAny>) -> PyResult<u64> {
        Ok(self.inner.estimate(key_fingerprint(key)?))
    }

    /// Adds another sketch of the same width, depth and seed.
    fn merge(&mut self, other: PyRef<'_, Self>) -> PyResult<()> {
        self.inner.merge(&other.inner).map_err(sketch_error)
    }

    #[getter]
    fn width(&self) -> usize {
        self.inner.width()
    }

    #[getter]
    fn depth(&self) -> usize {
        self.inner.depth()
    }

    #[getter]
    fn seed(&self) -> u64 {
        self.inner.seed()
    }

    #[getter]
    fn conservative_update(&self) -> bool {
        self.inner.conservative_update()
    }

    fn __repr__(&self) -> String {
        format!(
            "CountMin(width={}, depth={}, seed={}, conservative_update={}, total={})",
            self.inner.width(),
            self.inner.depth(),
            self.inner.seed(),
            if self.inner.conservative_update() { "True" } else { "False" },
            self.inner.total()
        )
    }

    #[getter]
    fn total(&self) -> u64 {
        self.inner.total()
    }

    #[getter]
    fn state_bytes(&self) -> usize {
        self.inner.state_bytes()
    }
}

/// Space-Saving (Metwally et al., ICDT 2005): the heaviest keys, each with
/// `count - error <= true count <= count`; every key heavier than `total / capacity` is
/// monitored. Each monitored key is kept as given, so `top()` lists keys.
#[pyclass(module = "keysplit._core", name = "SpaceSaving")]
pub struct PySpaceSaving {
    inner: KeyedSpaceSaving,
}

#[pymethods]
impl PySpaceSaving {
    /// The whole sketch as versioned, checksummed bytes.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        sketch_snapshot(py, &self.inner)
    }

    /// The sketch a snapshot holds. A fingerprint-only `sketch:space_saving` snapshot
    /// restores too, with its keys unknown until they are seen again.
    #[staticmethod]
    fn restore(snapshot: &[u8]) -> PyResult<Self> {
        Ok(Self { inner: KeyedSpaceSaving::restore_either(snapshot).map_err(snapshot_error)? })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        reduce_by_snapshot(slf.as_any(), slf.borrow().snapshot(slf.py())?)
    }

    #[new]
    fn new(capacity: usize) -> PyResult<Self> {
        Ok(Self { inner: KeyedSpaceSaving::new(capacity).map_err(sketch_error)? })
    }

    /// Counts every key of a column once.
    #[pyo3(signature = (keys, nulls="raise"))]
    fn update(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>, nulls: &str) -> PyResult<()> {
        let (column, items) = keys_with_fingerprints(py, keys, null_policy(nulls)?)?;
        // Reading a key back cannot fail for a column that was just read whole; were it to,
        // the key stays unknown (top() gives None) and the counts stand.
        self.inner.update(&items, |row| key_label(keys, &column, row).ok());
        Ok(())
    }

    /// `(count, error)` of a monitored key, None for a key that is not.
    fn estimate(&self, key: &Bound<'_, PyAny>) -> PyResult<Option<(u64, u64)>> {
        let counter = self.inner.summary().estimate(key_fingerprint(key)?);
        Ok(counter.map(|c| (c.count, c.error)))
    }

    /// The monitored keys as `(key, count, error)`, largest count first, then earliest
    /// to reach it. A null key (`nulls="group"`) is `None`, as is a key a fingerprint-only
    /// snapshot did not record.
    #[pyo3(signature = (k=None))]
    fn top<'py>(
        &self,
        py: Python<'py>,
        k: Option<usize>,
    ) -> PyResult<Vec<(Bound<'py, PyAny>, u64, u64)>> {
        let counters = self.inner.summary().iter_by_count().take(k.unwrap_or(usize::MAX));
        counters
            .map(|(item, c)| {
                let key = match self.inner.key(item) {
                    Some(key) => key_label_object(py, key)?,
                    None => py.None().into_bound(py),
                };
                Ok((key, c.count, c.error))
            })
            .collect()
    }

    #[getter]
    fn total(&self) -> u64 {
        self.inner.summary().total()
    }

    #[getter]
    fn capacity(&self) -> usize {
        self.inner.summary().capacity()
    }

    fn __len__(&self) -> usize {
        self.inner.summary().len()
    }

    #[getter]
    fn state_bytes(&self) -> usize {
        self.inner.state_bytes()
    }

    fn __repr__(&self) -> String {
        let summary = self.inner.summary();
        format!(
            "SpaceSaving(capacity={}, monitored={}, total={})",
            summary.capacity(),
            summary.len(),
            summary.total()
        )
    }
}

/// HyperLogLog (Flajolet et al. 2007) with `2^precision` registers of 5 bits, as the
/// holistic partitioning paper uses it, and its "maybe seen" probe.
#[pyclass(module = "keysplit._core", name = "HyperLogLog")]
pub struct PyHyperLogLog {
    inner: HyperLogLog,
}

#[pymethods]
impl PyHyperLogLog {
    /// The whole sketch as versioned, checksummed bytes.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        sketch_snapshot(py, &self.inner)
    }

    /// The sketch a snapshot holds.
    #[staticmethod]
    fn restore(snapshot: &[u8]) -> PyResult<Self> {
        Ok(Self { inner: sketch_restore::<HyperLogLog>(snapshot)? })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        reduce_by_snapshot(slf.as_any(), slf.borrow().snapshot(slf.py())?)
    }

    #[new]
    #[pyo3(signature = (precision=12))]
    fn new(precision: u8) -> PyResult<Self> {
        Ok(Self { inner: HyperLogLog::new(precision).map_err(sketch_error)? })
    }

    /// Adds every key of a column.
    #[pyo3(signature = (keys, nulls="raise"))]
    fn update(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>, nulls: &str) -> PyResult<()> {
        let items = key_fingerprints(py, keys, null_policy(nulls)?)?;
        py.detach(|| items.iter().for_each(|&item| self.inner.insert(item)));
        Ok(())
    }

    /// The estimated number of distinct keys.
    fn estimate(&self) -> f64 {
        self.inner.estimate()
    }

    /// False only for a key never added; true may be a false positive.
    fn maybe_contains(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.inner.maybe_contains(key_fingerprint(key)?))
    }

    /// Adds the keys of another sketch of the same precision.
    fn merge(&mut self, other: PyRef<'_, Self>) -> PyResult<()> {
        self.inner.merge(&other.inner).map_err(sketch_error)
    }

    #[getter]
    fn precision(&self) -> u8 {
        self.inner.precision()
    }

    fn __repr__(&self) -> String {
        format!(
            "HyperLogLog(precision={}, estimate={:.0})",
            self.inner.precision(),
            self.inner.estimate()
        )
    }

    #[getter]
    fn state_bytes(&self) -> usize {
        self.inner.state_bytes()
    }
}

/// The exact count of each key among the last `window` keys, kept in O(1) per key
/// (Pd-Stream's sampling window).
#[pyclass(module = "keysplit._core", name = "SlidingWindowCounter")]
pub struct PySlidingWindowCounter {
    inner: SlidingWindowCounter,
}

#[pymethods]
impl PySlidingWindowCounter {
    /// The whole sketch as versioned, checksummed bytes.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        sketch_snapshot(py, &self.inner)
    }

    /// The sketch a snapshot holds.
    #[staticmethod]
    fn restore(snapshot: &[u8]) -> PyResult<Self> {
        Ok(Self { inner: sketch_restore::<SlidingWindowCounter>(snapshot)? })
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        reduce_by_snapshot(slf.as_any(), slf.borrow().snapshot(slf.py())?)
    }

    #[new]
    fn new(window: usize) -> PyResult<Self> {
        Ok(Self { inner: SlidingWindowCounter::new(window).map_err(sketch_error)? })
    }

    /// Slides every key of a column into the window, in order.
    #[pyo3(signature = (keys, nulls="raise"))]
    fn update(&mut self, py: Python<'_>, keys: &Bound<'_, PyAny>, nulls: &str) -> PyResult<()> {
        let items = key_fingerprints(py, keys, null_policy(nulls)?)?;
        py.detach(|| items.iter().for_each(|&item| _ = self.inner.push(item)));
        Ok(())
    }

    /// Slides one key in and returns its count in the window, itself included.
    fn push(&mut self, key: &Bound<'_, PyAny>) -> PyResult<u32> {
        Ok(self.inner.push(key_fingerprint(key)?).count)
    }

    /// The key's count in the window.
    fn count(&self, key: &Bound<'_, PyAny>) -> PyResult<u32> {
        Ok(self.inner.count(key_fingerprint(key)?))
    }

    #[getter]
    fn window(&self) -> usize {
        self.inner.window()
    }

    fn __repr__(&self) -> String {
        format!("SlidingWindowCounter(window={}, held={})", self.inner.window(), self.inner.len())
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    #[getter]
    fn state_bytes(&self) -> usize {
        self.inner.state_bytes()
    }
}

/// The 64-bit fingerprint under which sketches and routing tables store `key`.
#[pyfunction]
pub fn fingerprint(key: &Bound<'_, PyAny>) -> PyResult<u64> {
    key_fingerprint(key)
}
