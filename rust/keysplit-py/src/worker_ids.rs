//! `WorkerIds`: the uint32 result of routing, shared with Arrow and NumPy without a copy.

use std::ffi::{c_int, c_void};
use std::ptr::{NonNull, null_mut};
use std::sync::Arc;

use arrow_array::{Array, UInt32Array};
use arrow_buffer::alloc::Allocation;
use arrow_buffer::{Buffer, ScalarBuffer};
use arrow_schema::{DataType, Field, FieldRef};
use keysplit_core::worker_ids::recycle_worker_ids;
use pyo3::exceptions::{PyBufferError, PyIndexError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyTuple};
use pyo3_arrow::ffi::{
    ArrayIterator, to_array_pycapsules, to_schema_pycapsule, to_stream_pycapsule,
};

/// Worker ids, one per key, in key order.
///
/// Implements the Arrow PyCapsule interface (`pl.Series(ids)`, `pa.array(ids)`) and the
/// buffer protocol (`np.asarray(ids)`, `memoryview(ids)`); none of them copies.
#[pyclass(module = "keysplit._core", name = "WorkerIds", frozen, sequence)]
pub struct WorkerIds {
    array: UInt32Array,
    /// The buffer protocol's shape and strides must outlive the exported view.
    shape: [ffi::Py_ssize_t; 1],
    strides: [ffi::Py_ssize_t; 1],
}

const ITEM_SIZE: ffi::Py_ssize_t = std::mem::size_of::<u32>() as ffi::Py_ssize_t;

fn field() -> FieldRef {
    Arc::new(Field::new("worker", DataType::UInt32, false))
}

/// The memory of a routing's ids, handed back to keysplit-core's pool when the last Arrow
/// array, NumPy view or memoryview of it is gone, for the next routing to write into.
struct RecycledIds(Vec<u32>);

impl Drop for RecycledIds {
    fn drop(&mut self) {
        recycle_worker_ids(std::mem::take(&mut self.0));
    }
}

impl WorkerIds {
    /// Takes `ids`, from `keysplit_core::worker_ids::worker_ids_buffer`, without a copy.
    pub fn new(ids: Vec<u32>) -> Self {
        let len = ids.len();
        let data = NonNull::from(ids.as_slice()).cast::<u8>();
        let owner: Arc<dyn Allocation> = Arc::new(RecycledIds(ids));
        // SAFETY: `data` points at `len` initialised u32s owned by the Vec inside `owner`.
        // Moving the Vec into the Arc does not move its heap block, and the Buffer keeps
        // `owner` alive for as long as any array of it exists.
        let buffer =
            unsafe { Buffer::from_custom_allocation(data, len * ITEM_SIZE as usize, owner) };
        let array = UInt32Array::new(ScalarBuffer::new(buffer, 0, len), None);
        Self { array, shape: [len as ffi::Py_ssize_t], strides: [ITEM_SIZE] }
    }
}

#[pymethods]
impl WorkerIds {
    fn __len__(&self) -> usize {
        self.array.len()
    }

    fn __getitem__(&self, index: isize) -> PyResult<u32> {
        let len = self.array.len() as isize;
        let position = if index < 0 { index + len } else { index };
        if !(0..len).contains(&position) {
            return Err(PyIndexError::new_err(format!(
                "index {index} is out of range for {len} worker ids"
            )));
        }
        Ok(self.array.value(position as usize))
    }

    /// The worker ids as a list of ints.
    fn to_list(&self) -> Vec<u32> {
        self.array.values().to_vec()
    }

    fn __repr__(&self) -> String {
        const SHOWN: usize = 8;
        let values = self.array.values();
        let head: Vec<String> = values.iter().take(SHOWN).map(u32::to_string).collect();
        let more = if values.len() > SHOWN { ", ..." } else { "" };
        format!("WorkerIds(len={}, [{}{more}])", values.len(), head.join(", "))
    }

    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyCapsule>>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        Ok(to_array_pycapsules(py, field(), &self.array, requested_schema)?)
    }

    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_stream__<'py>(
        &self,
        py: Python<'py>,
        requested_schema: Option<Bound<'py, PyCapsule>>,
    ) -> PyResult<Bound<'py, PyCapsule>> {
        let chunk: Arc<dyn Array> = Arc::new(self.array.clone());
        let reader = Box::new(ArrayIterator::new(vec![Ok(chunk)], field()));
        Ok(to_stream_pycapsule(py, reader, requested_schema)?)
    }

    fn __arrow_c_schema__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyCapsule>> {
        Ok(to_schema_pycapsule(py, field().as_ref())?)
    }

    /// Exports the ids read-only, as native-endian `uint32` (format `"I"`).
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("no buffer view to fill"));
        }
        if flags & ffi::PyBUF_WRITABLE != 0 {
            return Err(PyBufferError::new_err("worker ids are read-only"));
        }
        let this = slf.get();
        // SAFETY: `view` is non-null and CPython hands it to us to fill. The pointers we
        // store point into `this`, which `view.obj` keeps alive until the view is released.
        unsafe {
            (*view).buf = this.array.values().as_ptr() as *mut c_void;
            (*view).len = this.shape[0] * ITEM_SIZE;
            (*view).readonly = 1;
            (*view).itemsize = ITEM_SIZE;
            (*view).format =
                if flags & ffi::PyBUF_FORMAT != 0 { c"I".as_ptr() as *mut _ } else { null_mut() };
            (*view).ndim = 1;
            (*view).shape =
                if flags & ffi::PyBUF_ND != 0 { this.shape.as_ptr() as *mut _ } else { null_mut() };
            (*view).strides = if flags & ffi::PyBUF_STRIDES == ffi::PyBUF_STRIDES {
                this.strides.as_ptr() as *mut _
            } else {
                null_mut()
            };
            (*view).suboffsets = null_mut();
            (*view).internal = null_mut();
            (*view).obj = slf.into_any().into_ptr();
        }
        Ok(())
    }
}
