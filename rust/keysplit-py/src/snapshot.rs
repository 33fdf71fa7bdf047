//! Snapshots from Python: bytes out, bytes in, and pickling through them.

use crate::errors::SnapshotError;
use keysplit_core::SketchSnapshot;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

pub fn snapshot_error(e: keysplit_core::SnapshotError) -> PyErr {
    SnapshotError::new_err(e.to_string())
}

pub fn sketch_snapshot<'py, S: SketchSnapshot>(
    py: Python<'py>,
    sketch: &S,
) -> PyResult<Bound<'py, PyBytes>> {
    Ok(PyBytes::new(py, &sketch.snapshot().map_err(snapshot_error)?))
}

pub fn sketch_restore<S: SketchSnapshot>(bytes: &[u8]) -> PyResult<S> {
    S::restore(bytes).map_err(snapshot_error)
}

/// `(type(obj).restore, (snapshot,))`: pickle stores the snapshot and calls `restore`.
pub fn reduce_by_snapshot<'py>(
    obj: &Bound<'py, PyAny>,
    snapshot: Bound<'py, PyBytes>,
) -> PyResult<Bound<'py, PyTuple>> {
    let restore = obj.get_type().getattr("restore")?;
    PyTuple::new(obj.py(), [restore, PyTuple::new(obj.py(), [snapshot])?.into_any()])
}
