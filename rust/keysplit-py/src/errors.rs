//! The Python exception classes the bindings raise, defined in `keysplit._errors` so that
//! each is both a `keysplit.KeysplitError` and the built-in `ValueError` or `TypeError`
//! it replaces (a class made here could have only one base).

use pyo3::prelude::*;

pyo3::import_exception!(keysplit._errors, ConfigError);
pyo3::import_exception!(keysplit._errors, ConfigTypeError);
pyo3::import_exception!(keysplit._errors, KeyInputError);
pyo3::import_exception!(keysplit._errors, KeyTypeError);
pyo3::import_exception!(keysplit._errors, SnapshotError);

/// `error` with `prefix` before its message, of the same class.
pub fn prefixed(py: Python<'_>, error: PyErr, prefix: &str) -> PyErr {
    PyErr::from_type(error.get_type(py), format!("{prefix}{}", error.value(py)))
}
