//! `GrouperCore`: one grouper instance, routed from Python with the GIL released.

use std::sync::{Mutex, MutexGuard};

use keysplit_core::grouper::{NULL_KEY, route_batch};

use keysplit_core::params::{ParamValue, Params};
use keysplit_core::registry::snapshot_grouper;
use keysplit_core::registry::{GrouperInstance, build};
use keysplit_core::sources::{SourceRouting, SourcesConfig, SourcesError};
use keysplit_core::worker_ids::worker_ids_buffer;
use keysplit_core::{ConfigError, Grouper, LoadScope, NullPolicy, RouteError};
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyString, PyTuple};

use crate::errors::{self, ConfigTypeError, KeyInputError, prefixed};
use crate::keys::{extract_keys, owned_key};
use crate::snapshot::{reduce_by_snapshot, snapshot_error};
use crate::worker_ids::WorkerIds;

pub fn config_error(e: ConfigError) -> PyErr {
    match e {
        ConfigError::ParamType { .. } => ConfigTypeError::new_err(e.to_string()),
        _ => errors::ConfigError::new_err(e.to_string()),
    }
}

fn route_error(e: RouteError) -> PyErr {
    KeyInputError::new_err(e.to_string())
}

pub fn param_value(name: &str, value: &Bound<'_, PyAny>) -> PyResult<ParamValue> {
    if let Ok(b) = value.cast::<PyBool>() {
        Ok(ParamValue::Bool(b.is_true()))
    } else if value.is_instance_of::<PyInt>() {
        value.extract::<i64>().map(ParamValue::Int).map_err(|_| {
            errors::ConfigError::new_err(format!(
                "parameter {name:?} = {value} does not fit in 64 bits"
            ))
        })
    } else if let Ok(f) = value.cast::<PyFloat>() {
        Ok(ParamValue::Float(f.value()))
    } else if let Ok(s) = value.cast::<PyString>() {
        Ok(ParamValue::Str(s.to_str()?.to_owned().into()))
    } else {
        let type_name = value.get_type().name()?;
        Err(ConfigTypeError::new_err(format!(
            "parameter {name:?} must be a bool, int, float or str, got {type_name}"
        )))
    }
}

pub fn params_to_dict<'py>(py: Python<'py>, params: &Params) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, value) in params {
        match value {
            ParamValue::Bool(v) => dict.set_item(name, v)?,
            ParamValue::Int(v) => dict.set_item(name, v)?,
            ParamValue::Float(v) => dict.set_item(name, v)?,
            ParamValue::Str(v) => dict.set_item(name, v.as_ref())?,
        }
    }
    Ok(dict)
}

pub fn null_policy(nulls: &str) -> PyResult<NullPolicy> {
    match nulls {
        "raise" => Ok(NullPolicy::Raise),
        "group" => Ok(NullPolicy::Group),
        other => Err(errors::ConfigError::new_err(format!(
            "nulls must be \"raise\" or \"group\", got {other:?}"
        ))),
    }
}

#[pyclass(module = "keysplit._core", name = "GrouperCore", frozen)]
pub struct GrouperCore {
    info: &'static keysplit_core::GrouperInfo,
    seed: u64,
    workers: u32,
    params: Params,
    state: Mutex<Box<dyn Grouper>>,
}

impl From<GrouperInstance> for GrouperCore {
    fn from(instance: GrouperInstance) -> Self {
        let GrouperInstance { info, seed, params, grouper } = instance;
        Self { info, seed, workers: grouper.workers(), params, state: Mutex::new(grouper) }
    }
}

impl GrouperCore {
    fn lock(&self) -> PyResult<MutexGuard<'_, Box<dyn Grouper>>> {
        self.state.lock().map_err(|_| {
            PyRuntimeError::new_err(
                "this grouper's state is unusable after an internal error; build a new grouper",
            )
        })
    }
}

#[pymethods]
impl GrouperCore {
    #[new]
    #[pyo3(signature = (name, workers, seed, params))]
    fn new(name: &str, workers: u64, seed: u64, params: &Bound<'_, PyDict>) -> PyResult<Self> {
        let mut given = Params::new();
        for (key, value) in params.iter() {
            let key: String = key.extract()?;
            let value = param_value(&key, &value)?;
            given.insert(key, value);
        }
        Ok(build(name, workers, seed, &given, None).map_err(config_error)?.into())
    }

    /// The configuration and whole routing state, as versioned, checksummed bytes.
    fn snapshot<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let grouper = self.lock()?;
        let bytes = snapshot_grouper(self.info, self.seed, &self.params, grouper.as_ref())
            .map_err(snapshot_error)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The grouper a snapshot holds, ready to route the next key.
    #[staticmethod]
    fn restore(snapshot: &[u8]) -> PyResult<Self> {
        Ok(GrouperInstance::restore(snapshot).map_err(snapshot_error)?.into())
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyTuple>> {
        reduce_by_snapshot(slf.as_any(), slf.get().snapshot(slf.py())?)
    }

    fn route(&self, py: Python<'_>, keys: &Bound<'_, PyAny>, nulls: &str) -> PyResult<WorkerIds> {
        let policy = null_policy(nulls)?;
        let keys = extract_keys(keys)?;
        let ids = py.detach(|| -> PyResult<Vec<u32>> {
            let batches = keys.batches()?;
            if policy == NullPolicy::Raise {
                let nulls: usize = batches.iter().map(|b| b.null_count()).sum();
                if nulls > 0 {
                    return Err(route_error(RouteError::NullKeys { nulls }));
                }
            }
            let mut ids = worker_ids_buffer(keys.len());
            let mut grouper = self.lock()?;
            let mut start = 0;
            for batch in &batches {
                let out = &mut ids[start..start + batch.len()];
                route_batch(grouper.as_mut(), batch, policy, out).map_err(route_error)?;
                start += batch.len();
            }
            Ok(ids)
        })?;
        Ok(WorkerIds::new(ids))
    }

    fn route_key(&self, key: &Bound<'_, PyAny>, nulls: &str) -> PyResult<u32> {
        let policy = null_policy(nulls)?;
        let key = owned_key(key)?;
        let key = match (&key, policy) {
            (Some(key), _) => key.as_key(),
            (None, NullPolicy::Group) => NULL_KEY,
            (None, NullPolicy::Raise) => {
                return Err(route_error(RouteError::NullKeys { nulls: 1 }));
            }
        };
        Ok(self.lock()?.route(key))
    }

    fn end_window(&self) -> PyResult<()> {
        self.lock()?.end_window();
        Ok(())
    }

    #[getter]
    fn name(&self) -> &'static str {
        self.info.name
    }

    #[getter]
    fn workers(&self) -> u32 {
        self.workers
    }

    #[getter]
    fn seed(&self) -> u64 {
        self.seed
    }

    #[getter]
    fn params<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        params_to_dict(py, &self.params)
    }

    #[getter]
    fn loads(&self) -> PyResult<Vec<u64>> {
        Ok(self.lock()?.loads().snapshot())
    }

    #[getter]
    fn state_bytes(&self) -> PyResult<usize> {
        Ok(self.lock()?.state_bytes())
    }
}

/// What `route_sources` returns: per source, its worker ids, its loads and its state size.
type RoutedSources = (Vec<WorkerIds>, Vec<Vec<u64>>, Vec<usize>);

/// Routes several sources in parallel, each with its own grouper, on Rust threads with the
/// GIL released (see `keysplit_core::sources`).
#[pyfunction]
#[pyo3(signature = (name, workers, sources, seed, params, shared_loads, nulls, threads))]
#[allow(clippy::too_many_arguments)]
pub fn route_sources(
    py: Python<'_>,
    name: &str,
    workers: u64,
    sources: Vec<Bound<'_, PyAny>>,
    seed: u64,
    params: &Bound<'_, PyDict>,
    shared_loads: bool,
    nulls: &str,
    threads: usize,
) -> PyResult<RoutedSources> {
    let policy = null_policy(nulls)?;
    let mut given = Params::new();
    for (key, value) in params.iter() {
        let key: String = key.extract()?;
        let value = param_value(&key, &value)?;
        given.insert(key, value);
    }
    let keys = sources
        .iter()
        .enumerate()
        .map(|(i, source)| {
            extract_keys(source).map_err(|e| prefixed(py, e, &format!("source {i}: ")))
        })
        .collect::<PyResult<Vec<_>>>()?;
    let scope = if shared_loads { LoadScope::Shared } else { LoadScope::Private };
    let routed = py.detach(|| -> PyResult<Vec<SourceRouting>> {
        let batches =
            keys.iter().map(|k| k.batches().map_err(PyErr::from)).collect::<PyResult<Vec<_>>>()?;
        let views: Vec<&[_]> = batches.iter().map(Vec::as_slice).collect();
        let config =
            SourcesConfig { name, workers, seed, params: &given, scope, nulls: policy, threads };
        keysplit_core::sources::route_sources(&config, &views).map_err(|e| match e {
            SourcesError::Config(e) => config_error(e),
            SourcesError::Route { .. } => KeyInputError::new_err(e.to_string()),
        })
    })?;
    let mut ids = Vec::with_capacity(routed.len());
    let mut loads = Vec::with_capacity(routed.len());
    let mut state_bytes = Vec::with_capacity(routed.len());
    for routing in routed {
        ids.push(WorkerIds::new(routing.ids));
        loads.push(routing.loads);
        state_bytes.push(routing.state_bytes);
    }
    Ok((ids, loads, state_bytes))
}
