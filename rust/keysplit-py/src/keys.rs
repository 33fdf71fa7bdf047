//! Python key containers to zero-copy `KeyBatch` views.

use crate::errors::{KeyInputError, KeyTypeError, prefixed};
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int8Type, Int16Type, Int32Type, Int64Type, UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, new_null_array};
use arrow_schema::DataType;
use keysplit_core::grouper::NULL_KEY;
use keysplit_core::hash::fingerprint;
use keysplit_core::{KeyBatch, KeyLabel, KeyValues, NullPolicy, OwnedKey, RouteError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyByteArray, PyBytes, PyCapsule, PyInt, PyList, PyString, PyTuple};
use pyo3_arrow::PyArrayReader;
use pyo3_arrow::input::AnyArray;

/// The key types `route` reads, for error messages.
pub const SUPPORTED_KEY_TYPES: &str = "string, large_string, string_view, binary, large_binary, \
     binary_view, int8/16/32/64, uint8/16/32/64, dictionary of these, null";

/// Keys received from Python, owned or borrowed from the caller's Arrow buffers.
pub enum Keys {
    /// Arrow chunks in order; their buffers belong to the caller's arrays.
    Arrow(Vec<ArrayRef>),
    /// Keys converted from a Python list or tuple, with `None` for nulls.
    Owned { keys: Vec<OwnedKey>, validity: Option<Vec<u8>> },
}

impl Keys {
    pub fn len(&self) -> usize {
        match self {
            Keys::Arrow(chunks) => chunks.iter().map(|c| c.len()).sum(),
            Keys::Owned { keys, .. } => keys.len(),
        }
    }

    /// One validated batch per chunk, in order: every chunk is checked before any is routed.
    pub fn batches(&self) -> Result<Vec<KeyBatch<'_>>, KeyError> {
        match self {
            Keys::Arrow(chunks) => chunks.iter().map(|chunk| arrow_batch(chunk.as_ref())).collect(),
            Keys::Owned { keys, validity } => {
                let batch = KeyBatch::new(KeyValues::Owned(keys)).map_err(KeyError::Invalid)?;
                Ok(vec![match validity {
                    Some(bits) => batch.with_validity(bits, 0).map_err(KeyError::Invalid)?,
                    None => batch,
                }])
            }
        }
    }
}

/// Why keys cannot be read.
#[derive(Debug)]
pub enum KeyError {
    UnsupportedType(DataType),
    Invalid(keysplit_core::keys::InvalidKeys),
}

impl From<KeyError> for PyErr {
    fn from(e: KeyError) -> PyErr {
        match e {
            KeyError::UnsupportedType(dt) => KeyTypeError::new_err(format!(
                "unsupported key type {dt}; supported key types: {SUPPORTED_KEY_TYPES}. \
                 Floats have no stable key identity (0.0 == -0.0, NaN != NaN): cast them first"
            )),
            KeyError::Invalid(e) => KeyInputError::new_err(e.to_string()),
        }
    }
}

fn arrow_batch(array: &dyn Array) -> Result<KeyBatch<'_>, KeyError> {
    let values = match array.data_type() {
        DataType::Int8 => KeyValues::Int8(array.as_primitive::<Int8Type>().values()),
        DataType::Int16 => KeyValues::Int16(array.as_primitive::<Int16Type>().values()),
        DataType::Int32 => KeyValues::Int32(array.as_primitive::<Int32Type>().values()),
        DataType::Int64 => KeyValues::Int64(array.as_primitive::<Int64Type>().values()),
        DataType::UInt8 => KeyValues::UInt8(array.as_primitive::<UInt8Type>().values()),
        DataType::UInt16 => KeyValues::UInt16(array.as_primitive::<UInt16Type>().values()),
        DataType::UInt32 => KeyValues::UInt32(array.as_primitive::<UInt32Type>().values()),
        DataType::UInt64 => KeyValues::UInt64(array.as_primitive::<UInt64Type>().values()),
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            KeyValues::Offsets32 { offsets: a.offsets(), data: a.values() }
        }
        DataType::Binary => {
            let a = array.as_binary::<i32>();
            KeyValues::Offsets32 { offsets: a.offsets(), data: a.values() }
        }
        DataType::LargeUtf8 => {
            let a = array.as_string::<i64>();
            KeyValues::Offsets64 { offsets: a.offsets(), data: a.values() }
        }
        DataType::LargeBinary => {
            let a = array.as_binary::<i64>();
            KeyValues::Offsets64 { offsets: a.offsets(), data: a.values() }
        }
        DataType::Utf8View => {
            let a = array.as_string_view();
            let buffers = a.data_buffers().iter().map(|b| b.as_slice()).collect();
            KeyValues::Views { views: a.views(), buffers }
        }
        DataType::BinaryView => {
            let a = array.as_binary_view();
            let buffers = a.data_buffers().iter().map(|b| b.as_slice()).collect();
            KeyValues::Views { views: a.views(), buffers }
        }
        other => return Err(KeyError::UnsupportedType(other.clone())),
    };
    let batch = KeyBatch::new(values).map_err(KeyError::Invalid)?;
    match array.nulls() {
        Some(nulls) => {
            let bits = nulls.inner();
            batch.with_validity(bits.values(), bits.offset()).map_err(KeyError::Invalid)
        }
        None => Ok(batch),
    }
}

/// Brings chunks to a layout `arrow_batch` reads. Dictionary-encoded keys are decoded to
/// their value type, which copies them: their routing must equal that of the decoded
/// values. A null-typed chunk (all nulls, no buffers) becomes an all-null binary chunk.
fn normalize_chunks(chunks: Vec<ArrayRef>) -> PyResult<Vec<ArrayRef>> {
    chunks
        .into_iter()
        .map(|chunk| match chunk.data_type() {
            DataType::Dictionary(_, value_type) => arrow_cast::cast(&chunk, value_type)
                .map_err(|e| KeyInputError::new_err(format!("cannot decode dictionary keys: {e}"))),
            DataType::Null => Ok(new_null_array(&DataType::Binary, chunk.len())),
            _ => Ok(chunk),
        })
        .collect()
}

/// Reads keys from an Arrow array or stream, a buffer-protocol integer array, or a list.
pub fn extract_keys(obj: &Bound<'_, PyAny>) -> PyResult<Keys> {
    if obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>() {
        return owned_keys(obj);
    }
    if obj.is_instance_of::<PyString>() || obj.is_instance_of::<PyBytes>() {
        return Err(KeyTypeError::new_err(
            "route() takes a column of keys; use route_key() for a single key",
        ));
    }
    // Polars' Series answers a missing attribute through a Python `__getattr__` that costs
    // about 10 µs, and the generic extraction below probes `__arrow_c_array__` on the
    // instance first. Looking the stream method up on the type skips that probe.
    if obj.get_type().hasattr(intern!(obj.py(), "__arrow_c_stream__"))? {
        let capsule =
            obj.call_method1(intern!(obj.py(), "__arrow_c_stream__"), (obj.py().None(),))?;
        let capsule = capsule.cast::<PyCapsule>().map_err(|_| {
            KeyTypeError::new_err(format!(
                "{}.__arrow_c_stream__() did not return a PyCapsule",
                type_name(obj)
            ))
        })?;
        let chunks = PyArrayReader::from_arrow_pycapsule(capsule)?
            .into_reader()?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| KeyInputError::new_err(format!("cannot read the key stream: {e}")))?;
        return Ok(Keys::Arrow(normalize_chunks(chunks)?));
    }
    let any: AnyArray = obj.extract().map_err(|e| {
        KeyTypeError::new_err(format!(
            "keys must be an Arrow array or stream (a Polars Series, a PyArrow Array or \
             ChunkedArray), a NumPy integer array or a list, got {}: {e}",
            type_name(obj)
        ))
    })?;
    let chunks = match any {
        AnyArray::Array(array) => vec![array.array().clone()],
        AnyArray::Stream(stream) => stream
            .into_reader()?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| KeyInputError::new_err(format!("cannot read the key stream: {e}")))?,
    };
    Ok(Keys::Arrow(normalize_chunks(chunks)?))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type().name().map(|n| n.to_string()).unwrap_or_else(|_| "?".into())
}

/// One Python key, `None` for `None`.
pub fn owned_key(item: &Bound<'_, PyAny>) -> PyResult<Option<OwnedKey>> {
    if item.is_none() {
        Ok(None)
    } else if let Ok(s) = item.cast::<PyString>() {
        Ok(Some(OwnedKey::Bytes(s.to_str()?.as_bytes().to_vec())))
    } else if let Ok(b) = item.cast::<PyBytes>() {
        Ok(Some(OwnedKey::Bytes(b.as_bytes().to_vec())))
    } else if let Ok(b) = item.cast::<PyByteArray>() {
        Ok(Some(OwnedKey::Bytes(b.to_vec())))
    } else if item.is_instance_of::<PyInt>() && !item.is_instance_of::<PyBool>() {
        if let Ok(v) = item.extract::<i64>() {
            Ok(Some(OwnedKey::Int(v as u64)))
        } else if let Ok(v) = item.extract::<u64>() {
            Ok(Some(OwnedKey::Int(v)))
        } else {
            Err(KeyInputError::new_err(format!("integer key {item} does not fit in 64 bits")))
        }
    } else {
        Err(KeyTypeError::new_err(format!(
            "a key must be str, bytes, int or None, got {}",
            type_name(item)
        )))
    }
}

fn owned_keys(seq: &Bound<'_, PyAny>) -> PyResult<Keys> {
    let len = seq.len()?;
    let mut keys = Vec::with_capacity(len);
    let mut validity: Option<Vec<u8>> = None;
    for (row, item) in seq.try_iter()?.enumerate() {
        let item = item?;
        match owned_key(&item)
            .map_err(|e| prefixed(seq.py(), e, &format!("key at index {row}: ")))?
        {
            Some(key) => keys.push(key),
            None => {
                let bits = validity.get_or_insert_with(|| vec![0xff; len.div_ceil(8)]);
                bits[row / 8] &= !(1 << (row % 8));
                keys.push(OwnedKey::Bytes(Vec::new()));
            }
        }
    }
    Ok(Keys::Owned { keys, validity })
}

/// The fingerprints of a column of keys, in order, read as `route` reads keys. Nulls follow
/// `policy`: refused before anything is read, or fingerprinted as the null key.
pub fn key_fingerprints(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    policy: NullPolicy,
) -> PyResult<Vec<u64>> {
    Ok(keys_with_fingerprints(py, obj, policy)?.1)
}

/// The keys of a column and the fingerprint of each, nulls as [`NULL_KEY`].
pub fn keys_with_fingerprints(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    policy: NullPolicy,
) -> PyResult<(Keys, Vec<u64>)> {
    let keys = extract_keys(obj)?;
    let fingerprints = py.detach(|| {
        let batches = keys.batches()?;
        if policy == NullPolicy::Raise {
            let nulls: usize = batches.iter().map(|b| b.null_count()).sum();
            if nulls > 0 {
                return Err(KeyInputError::new_err(RouteError::NullKeys { nulls }.to_string()));
            }
        }
        let mut out = Vec::with_capacity(keys.len());
        for batch in &batches {
            batch.for_each(|_, key| out.push(fingerprint(key.unwrap_or(NULL_KEY))));
        }
        Ok(out)
    })?;
    Ok((keys, fingerprints))
}

/// The key at `row` of a column `extract_keys(obj)` read, with its type: a string stays a
/// string and a signed integer signed.
pub fn key_label(obj: &Bound<'_, PyAny>, keys: &Keys, row: usize) -> PyResult<KeyLabel> {
    let chunks = match keys {
        Keys::Owned { .. } => return python_key_label(&obj.get_item(row)?),
        Keys::Arrow(chunks) => chunks,
    };
    let mut row = row;
    let chunk = chunks
        .iter()
        .find(|chunk| {
            let here = row < chunk.len();
            if !here {
                row -= chunk.len();
            }
            here
        })
        .ok_or_else(|| KeyInputError::new_err("key row out of range"))?;
    if chunk.is_null(row) {
        return Ok(KeyLabel::Null);
    }
    macro_rules! integer {
        ($type:ty, $variant:ident, $wide:ty) => {
            KeyLabel::$variant(<$wide>::from(chunk.as_primitive::<$type>().value(row)))
        };
    }
    Ok(match chunk.data_type() {
        DataType::Int8 => integer!(Int8Type, Signed, i64),
        DataType::Int16 => integer!(Int16Type, Signed, i64),
        DataType::Int32 => integer!(Int32Type, Signed, i64),
        DataType::Int64 => integer!(Int64Type, Signed, i64),
        DataType::UInt8 => integer!(UInt8Type, Unsigned, u64),
        DataType::UInt16 => integer!(UInt16Type, Unsigned, u64),
        DataType::UInt32 => integer!(UInt32Type, Unsigned, u64),
        DataType::UInt64 => integer!(UInt64Type, Unsigned, u64),
        DataType::Utf8 => KeyLabel::Text(chunk.as_string::<i32>().value(row).to_owned()),
        DataType::LargeUtf8 => KeyLabel::Text(chunk.as_string::<i64>().value(row).to_owned()),
        DataType::Utf8View => KeyLabel::Text(chunk.as_string_view().value(row).to_owned()),
        DataType::Binary => KeyLabel::Bytes(chunk.as_binary::<i32>().value(row).to_vec()),
        DataType::LargeBinary => KeyLabel::Bytes(chunk.as_binary::<i64>().value(row).to_vec()),
        DataType::BinaryView => KeyLabel::Bytes(chunk.as_binary_view().value(row).to_vec()),
        other => return Err(KeyError::UnsupportedType(other.clone()).into()),
    })
}

fn python_key_label(item: &Bound<'_, PyAny>) -> PyResult<KeyLabel> {
    if item.is_none() {
        return Ok(KeyLabel::Null);
    }
    if let Ok(s) = item.cast::<PyString>() {
        return Ok(KeyLabel::Text(s.to_str()?.to_owned()));
    }
    if item.is_instance_of::<PyInt>() {
        if let Ok(v) = item.extract::<i64>() {
            return Ok(KeyLabel::Signed(v));
        }
        return Ok(KeyLabel::Unsigned(item.extract()?));
    }
    match owned_key(item)? {
        Some(OwnedKey::Bytes(bytes)) => Ok(KeyLabel::Bytes(bytes)),
        _ => Err(KeyTypeError::new_err(format!("cannot read {} as a key", type_name(item)))),
    }
}

/// A key as Python gives it back: `str`, `bytes`, `int` or `None`.
pub fn key_label_object<'py>(py: Python<'py>, key: &KeyLabel) -> PyResult<Bound<'py, PyAny>> {
    Ok(match key {
        KeyLabel::Null => py.None().into_bound(py),
        KeyLabel::Signed(v) => v.into_pyobject(py)?.into_any(),
        KeyLabel::Unsigned(v) => v.into_pyobject(py)?.into_any(),
        KeyLabel::Text(s) => PyString::new(py, s).into_any(),
        KeyLabel::Bytes(b) => PyBytes::new(py, b).into_any(),
    })
}

/// The fingerprint of one key; `None` is refused.
pub fn key_fingerprint(obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    let key = owned_key(obj)?.ok_or_else(|| KeyTypeError::new_err("a key is needed, got None"))?;
    Ok(fingerprint(key.as_key()))
}
