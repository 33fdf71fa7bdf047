//! Fuzzes the path a binding takes: raw Arrow-like buffers -> `KeyBatch` -> every grouper.
//!
//! The buffers come from callers the core does not trust, so `KeyBatch::new` and
//! `with_validity` must turn any corruption into an `Err`, and a batch they accept must
//! never be read out of bounds. Routing a batch must be exactly routing its keys one at a
//! time, in order (the `Grouper` contract), whatever the layout, nulls, worker count, seed
//! and parameters. Every expectation is computed here from the Arrow layout rules and the
//! key-bytes specification of `hash.rs`, independently of `keys.rs`; the one-at-a-time
//! twin gets every key as `Key::Bytes`, so integer keys (which batches yield as
//! `Key::Int`, hashed by a separate path) must also route as their 8 little-endian bytes.

#![no_main]

use arbitrary::Arbitrary;
use keysplit_core::grouper::{GrouperInfo, MAX_WORKERS, NULL_KEY};
use keysplit_core::params::{ParamValue, Params};
use keysplit_core::{
    ConfigError, GrouperInstance, Key, KeyBatch, KeyValues, LoadScope, LoadVector, NullPolicy,
    OwnedKey, RouteError, build, registry, route_batch,
};
use libfuzzer_sys::fuzz_target;

/// Rows per batch: enough for every grouper's state to evolve, small enough to stay fast.
const MAX_KEYS: usize = 256;
/// Largest worker count that is also routed and compared. Larger valid counts are only
/// built: each worker costs a 128-byte counter, so `MAX_WORKERS` itself is built once, in
/// the target's `init`.
const MAX_ROUTED_WORKERS: u64 = 4096;
const MAX_PARAMS: usize = 4;
const MAX_DATA_BUFFERS: usize = 8;

#[derive(Arbitrary, Debug)]
struct Input {
    layout: Layout,
    validity: Option<ValidityArb>,
    /// One build per registry entry, in registry order; when there are fewer, the last one
    /// is reused (so one short build drives every grouper), and with none every grouper
    /// gets a valid default.
    builds: Vec<BuildArb>,
}

/// One variant per `KeyValues` layout.
#[derive(Arbitrary, Debug)]
enum Layout {
    Int8(Vec<i8>),
    Int16(Vec<i16>),
    Int32(Vec<i32>),
    Int64(Vec<i64>),
    UInt8(Vec<u8>),
    UInt16(Vec<u16>),
    UInt32(Vec<u32>),
    UInt64(Vec<u64>),
    Offsets32 { offsets: OffsetsArb<i32>, data: Vec<u8> },
    Offsets64 { offsets: OffsetsArb<i64>, data: Vec<u8> },
    Views { views: Vec<ViewArb>, buffers: Vec<Vec<u8>>, fit: Fit },
    Owned(Vec<OwnedArb>),
}

#[derive(Arbitrary, Debug)]
enum OwnedArb {
    Int(u64),
    Bytes(Vec<u8>),
}

/// Raw offsets are almost always corrupt; offsets built from row lengths are valid until
/// the data is cut short or `poke` overwrites one, so both sides of each check are reached.
#[derive(Arbitrary, Debug)]
enum OffsetsArb<O> {
    Raw(Vec<O>),
    Lengths { start: u8, lengths: Vec<u8>, fit: Fit, poke: Option<(u16, O)> },
}

/// How data buffers are sized against what the offsets or views reach: as the fuzzer
/// wrote them, exactly to the furthest byte read, or one byte short of it (the off-by-one
/// a bounds check must catch, which random lengths almost never hit).
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
enum Fit {
    Loose,
    Exact,
    OneShort,
}

/// Random 128-bit views are nearly always long and out of bounds, so the inline and the
/// in-bounds buffer shapes get variants of their own.
#[derive(Arbitrary, Debug)]
enum ViewArb {
    /// At most 12 bytes stored in the view; the bytes past the length are arbitrary.
    Inline {
        len: u8,
        rest: u128,
    },
    /// A view of `13 + extra` bytes into buffer `buffer` at `offset`.
    Buffer {
        extra: u8,
        buffer: u8,
        offset: u8,
        prefix: u32,
    },
    Raw(u128),
}

/// `fit` (the fill byte) extends the bitmap to the bits the batch needs, so that a valid
/// bitmap with real nulls is common; `Any` reaches the overflowing offsets.
#[derive(Arbitrary, Debug)]
struct ValidityArb {
    bits: Vec<u8>,
    offset: BitOffset,
    fit: Option<u8>,
}

#[derive(Arbitrary, Debug)]
enum BitOffset {
    Small(u8),
    Any(usize),
}

#[derive(Arbitrary, Debug)]
struct BuildArb {
    /// Picks the class of worker count; see [`workers`].
    workers_class: u8,
    workers_value: u64,
    seed: u64,
    loads: LoadsArb,
    /// Well-typed values for the grouper's declared parameters, in declaration order, so
    /// that non-default configurations are built and routed often.
    declared: Vec<Option<u64>>,
    /// Then anything, which may override those or add unknown names.
    params: Vec<(NameArb, ValueArb)>,
    /// Call `end_window` on both groupers between the two passes over the batch.
    end_window: bool,
    /// Also offer an output slice of the wrong length, which must be refused untouched.
    wrong_out_len: bool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum LoadsArb {
    Private,
    Shared,
    /// A shared vector sized independently of the worker count, usually mismatched.
    SharedSized(u8),
}

/// `Known` indexes the parameter names the registry declares (known to some groupers,
/// unknown to others); `Other` is anything.
#[derive(Arbitrary, Debug)]
enum NameArb {
    Known(u8),
    Other(String),
}

#[derive(Arbitrary, Debug)]
enum ValueArb {
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
}

/// An integer parameter of at most a million in magnitude, sign kept. A valid size is a
/// request for that much state (a `capacity` of 342 million counters is a gigabyte, as its
/// user asked), so beyond this the fuzzer's 2 GB RSS limit, not keysplit, would fail; the
/// range checks at the large end are unit-tested.
fn bounded(value: i64) -> i64 {
    value % (1 << 20)
}

/// Valid counts most of the time (small ones most of all, as they collide the most), plus
/// the invalid boundaries: 0, just above `MAX_WORKERS`, further above, and anything.
fn workers(class: u8, value: u64) -> u64 {
    let above = u64::from(MAX_WORKERS) + 1;
    match class {
        0..=191 => 1 + value % 8,
        192..=239 => 1 + value % MAX_ROUTED_WORKERS,
        240..=251 => value,
        252 => 0,
        253 => above,
        _ => above.saturating_add(value),
    }
}

/// The owned buffers of one batch, as a binding would hand them over.
enum Buffers {
    Int8(Vec<i8>),
    Int16(Vec<i16>),
    Int32(Vec<i32>),
    Int64(Vec<i64>),
    UInt8(Vec<u8>),
    UInt16(Vec<u16>),
    UInt32(Vec<u32>),
    UInt64(Vec<u64>),
    Offsets32 { offsets: Vec<i32>, data: Vec<u8> },
    Offsets64 { offsets: Vec<i64>, data: Vec<u8> },
    Views { views: Vec<u128>, buffers: Vec<Vec<u8>> },
    Owned(Vec<OwnedKey>),
}

fn capped<T: Clone>(v: &[T], cap: usize) -> Vec<T> {
    v[..v.len().min(cap)].to_vec()
}

/// Sizes `buf` by `how` for a furthest read ending at byte `end`, extending it with a
/// non-constant pattern.
fn fit(buf: &mut Vec<u8>, end: usize, how: Fit) {
    let len = match how {
        Fit::Loose => return,
        Fit::Exact => end,
        Fit::OneShort => end.saturating_sub(1),
    };
    while buf.len() < len {
        buf.push((buf.len() as u8) ^ 0x5A);
    }
    buf.truncate(len);
}

fn offsets<O>(arb: &OffsetsArb<O>, data: &mut Vec<u8>) -> Vec<O>
where
    O: Copy + TryFrom<usize>,
    <O as TryFrom<usize>>::Error: std::fmt::Debug,
{
    match arb {
        OffsetsArb::Raw(raw) => capped(raw, MAX_KEYS + 1),
        OffsetsArb::Lengths { start, lengths, fit: how, poke } => {
            let mut position = usize::from(*start);
            let mut out = vec![O::try_from(position).unwrap()];
            for &length in lengths.iter().take(MAX_KEYS) {
                position += usize::from(length);
                out.push(O::try_from(position).unwrap());
            }
            fit(data, position, *how);
            if let Some((index, value)) = poke {
                let n = out.len();
                out[usize::from(*index) % n] = *value;
            }
            out
        }
    }
}

/// Unless `how` is `Loose`, buffer views name existing buffers, and each buffer they name
/// is sized by `how` to the furthest byte they read.
fn views(arb: &[ViewArb], buffers: &mut Vec<Vec<u8>>, how: Fit) -> Vec<u128> {
    buffers.truncate(MAX_DATA_BUFFERS);
    let fit_views = how != Fit::Loose;
    if fit_views && buffers.is_empty() {
        buffers.push(Vec::new());
    }
    let mut ends: Vec<Option<usize>> = vec![None; buffers.len()];
    let views = arb
        .iter()
        .take(MAX_KEYS)
        .map(|view| match *view {
            ViewArb::Inline { len, rest } => {
                (rest & !u128::from(u32::MAX)) | u128::from(u32::from(len) % 13)
            }
            ViewArb::Buffer { extra, buffer, offset, prefix } => {
                let length = 13 + u32::from(extra);
                let mut buffer = usize::from(buffer);
                if fit_views {
                    buffer %= buffers.len();
                    let end = usize::from(offset) + length as usize;
                    ends[buffer] = ends[buffer].max(Some(end));
                }
                u128::from(length)
                    | u128::from(prefix) << 32
                    | (buffer as u128) << 64
                    | u128::from(offset) << 96
            }
            ViewArb::Raw(raw) => raw,
        })
        .collect();
    for (buffer, end) in buffers.iter_mut().zip(ends) {
        if let Some(end) = end {
            fit(buffer, end, how);
        }
    }
    views
}

impl Buffers {
    fn new(layout: &Layout) -> Self {
        match layout {
            Layout::Int8(v) => Buffers::Int8(capped(v, MAX_KEYS)),
            Layout::Int16(v) => Buffers::Int16(capped(v, MAX_KEYS)),
            Layout::Int32(v) => Buffers::Int32(capped(v, MAX_KEYS)),
            Layout::Int64(v) => Buffers::Int64(capped(v, MAX_KEYS)),
            Layout::UInt8(v) => Buffers::UInt8(capped(v, MAX_KEYS)),
            Layout::UInt16(v) => Buffers::UInt16(capped(v, MAX_KEYS)),
            Layout::UInt32(v) => Buffers::UInt32(capped(v, MAX_KEYS)),
            Layout::UInt64(v) => Buffers::UInt64(capped(v, MAX_KEYS)),
            Layout::Offsets32 { offsets: o, data } => {
                let mut data = data.clone();
                Buffers::Offsets32 { offsets: offsets(o, &mut data), data }
            }
            Layout::Offsets64 { offsets: o, data } => {
                let mut data = data.clone();
                Buffers::Offsets64 { offsets: offsets(o, &mut data), data }
            }
            Layout::Views { views: v, buffers, fit } => {
                let mut buffers = buffers.clone();
                Buffers::Views { views: views(v, &mut buffers, *fit), buffers }
            }
            Layout::Owned(v) => Buffers::Owned(
                v.iter()
                    .take(MAX_KEYS)
                    .map(|key| match key {
                        OwnedArb::Int(v) => OwnedKey::Int(*v),
                        OwnedArb::Bytes(b) => OwnedKey::Bytes(b.clone()),
                    })
                    .collect(),
            ),
        }
    }

    fn values(&self) -> KeyValues<'_> {
        match self {
            Buffers::Int8(v) => KeyValues::Int8(v),
            Buffers::Int16(v) => KeyValues::Int16(v),
            Buffers::Int32(v) => KeyValues::Int32(v),
            Buffers::Int64(v) => KeyValues::Int64(v),
            Buffers::UInt8(v) => KeyValues::UInt8(v),
            Buffers::UInt16(v) => KeyValues::UInt16(v),
            Buffers::UInt32(v) => KeyValues::UInt32(v),
            Buffers::UInt64(v) => KeyValues::UInt64(v),
            Buffers::Offsets32 { offsets, data } => KeyValues::Offsets32 { offsets, data },
            Buffers::Offsets64 { offsets, data } => KeyValues::Offsets64 { offsets, data },
            Buffers::Views { views, buffers } => {
                KeyValues::Views { views, buffers: buffers.iter().map(Vec::as_slice).collect() }
            }
            Buffers::Owned(v) => KeyValues::Owned(v),
        }
    }

    /// The key bytes of every row by the Arrow rules and the widening rule of `hash.rs`,
    /// or `None` when the buffers break a rule and must be refused.
    fn reference(&self) -> Option<Vec<Vec<u8>>> {
        fn signed<T: Copy + Into<i64>>(v: &[T]) -> Option<Vec<Vec<u8>>> {
            Some(v.iter().map(|&x| x.into().to_le_bytes().to_vec()).collect())
        }
        fn unsigned<T: Copy + Into<u64>>(v: &[T]) -> Option<Vec<Vec<u8>>> {
            Some(v.iter().map(|&x| x.into().to_le_bytes().to_vec()).collect())
        }
        /// Arrow offsets: none at all for no rows, else non-negative, non-decreasing and
        /// within the data (the first need not be 0: sliced arrays).
        fn offset_keys<O: Copy + TryInto<usize>>(
            offsets: &[O],
            data: &[u8],
        ) -> Option<Vec<Vec<u8>>> {
            let positions = offsets
                .iter()
                .map(|&o| o.try_into().ok().filter(|&p| p <= data.len()))
                .collect::<Option<Vec<usize>>>()?;
            if positions.windows(2).any(|w| w[1] < w[0]) {
                return None;
            }
            Some(positions.windows(2).map(|w| data[w[0]..w[1]].to_vec()).collect())
        }
        match self {
            Buffers::Int8(v) => signed(v),
            Buffers::Int16(v) => signed(v),
            Buffers::Int32(v) => signed(v),
            Buffers::Int64(v) => signed(v),
            Buffers::UInt8(v) => unsigned(v),
            Buffers::UInt16(v) => unsigned(v),
            Buffers::UInt32(v) => unsigned(v),
            Buffers::UInt64(v) => unsigned(v),
            Buffers::Offsets32 { offsets, data } => offset_keys(offsets, data),
            Buffers::Offsets64 { offsets, data } => offset_keys(offsets, data),
            // Arrow view: length in bits 0..32; up to 12 bytes inline from byte 4, else
            // buffer index in bits 64..96 and offset in bits 96..128.
            Buffers::Views { views, buffers } => views
                .iter()
                .map(|&view| {
                    let length = view as u32 as usize;
                    if length <= 12 {
                        return Some(view.to_le_bytes()[4..4 + length].to_vec());
                    }
                    let buffer = (view >> 64) as u32 as usize;
                    let offset = (view >> 96) as u32 as usize;
                    buffers.get(buffer)?.get(offset..offset + length).map(<[u8]>::to_vec)
                })
                .collect(),
            Buffers::Owned(v) => Some(v.iter().map(|key| key.as_key().to_bytes()).collect()),
        }
    }
}

/// Bitmap bytes and bit offset, or `None` for no validity bitmap.
fn validity(arb: &Option<ValidityArb>, rows: usize) -> Option<(Vec<u8>, usize)> {
    let arb = arb.as_ref()?;
    let offset = match arb.offset {
        BitOffset::Small(o) => usize::from(o),
        BitOffset::Any(o) => o,
    };
    let mut bits = arb.bits.clone();
    if let (Some(fill), Some(needed)) = (arb.fit, offset.checked_add(rows)) {
        let bytes = needed.div_ceil(8);
        if bytes <= 1 << 16 && bits.len() < bytes {
            bits.resize(bytes, fill);
        }
    }
    Some((bits, offset))
}

/// What a build must give, checked in the order `build` documents: workers, shared
/// loads, unknown parameters, then each parameter's type.
#[derive(Debug)]
enum Expected {
    Built,
    Refused(ConfigError),
    /// A wrong-typed (or non-finite float) parameter: refused, naming one of these.
    BadParams(Vec<String>),
}

/// The effective value of a parameter whose default is `default`, or `None` if `given`
/// must be refused: types must match, except that an int widens to a (finite) float.
fn effective(default: &ParamValue, given: &ParamValue) -> Option<ParamValue> {
    match (default, given) {
        (ParamValue::Bool(_), ParamValue::Bool(_))
        | (ParamValue::Int(_), ParamValue::Int(_))
        | (ParamValue::Str(_), ParamValue::Str(_)) => Some(given.clone()),
        (ParamValue::Float(_), ParamValue::Float(v)) if v.is_finite() => Some(given.clone()),
        (ParamValue::Float(_), ParamValue::Int(v)) => Some(ParamValue::Float(*v as f64)),
        _ => None,
    }
}

struct Plan {
    workers: u64,
    seed: u64,
    loads: LoadsArb,
    params: Params,
    end_window: bool,
    wrong_out_len: bool,
}

impl Plan {
    fn new(
        arb: Option<&BuildArb>,
        info: &GrouperInfo,
        index: usize,
        known: &[&'static str],
    ) -> Self {
        let Some(arb) = arb else {
            return Plan {
                workers: 3 + index as u64,
                seed: index as u64,
                loads: LoadsArb::Private,
                params: Params::new(),
                end_window: false,
                wrong_out_len: false,
            };
        };
        let mut params = Params::new();
        for (spec, raw) in info.params.iter().zip(&arb.declared) {
            let Some(raw) = *raw else { continue };
            let value = match spec.default {
                ParamValue::Bool(_) => ParamValue::Bool(raw & 1 == 1),
                ParamValue::Int(_) => ParamValue::Int(bounded(raw as i64)),
                ParamValue::Float(_) => ParamValue::Float(raw as i64 as f64 / 65536.0),
                ParamValue::Str(_) => ParamValue::Str(raw.to_string().into()),
            };
            params.insert(spec.name.to_owned(), value);
        }
        for (name, value) in arb.params.iter().take(MAX_PARAMS) {
            let name = match name {
                NameArb::Known(i) if !known.is_empty() => {
                    known[usize::from(*i) % known.len()].to_owned()
                }
                NameArb::Known(i) => format!("param{i}"),
                NameArb::Other(s) => s.clone(),
            };
            let value = match value {
                ValueArb::Bool(v) => ParamValue::Bool(*v),
                ValueArb::Int(v) => ParamValue::Int(bounded(*v)),
                ValueArb::Float(v) => ParamValue::Float(*v),
                ValueArb::Str(v) => ParamValue::Str(v.clone().into()),
            };
            params.insert(name, value);
        }
        Plan {
            workers: workers(arb.workers_class, arb.workers_value),
            seed: arb.seed,
            loads: arb.loads,
            params,
            end_window: arb.end_window,
            wrong_out_len: arb.wrong_out_len,
        }
    }

    fn valid_workers(&self) -> Option<u32> {
        u32::try_from(self.workers).ok().filter(|w| (1..=MAX_WORKERS).contains(w))
    }

    /// The size of the shared load vector handed to `build`, if any.
    fn shared_workers(&self) -> Option<u32> {
        match self.loads {
            LoadsArb::Private => None,
            LoadsArb::Shared => Some(self.valid_workers().unwrap_or(1)),
            LoadsArb::SharedSized(n) => Some(u32::from(n)),
        }
    }

    /// A fresh load vector for one build; two builds never share one.
    fn load_vector(&self) -> Option<LoadVector> {
        self.shared_workers().map(LoadVector::shared)
    }

    fn build(&self, info: &GrouperInfo) -> Result<GrouperInstance, ConfigError> {
        build(info.name, self.workers, self.seed, &self.params, self.load_vector())
    }

    fn expected(&self, info: &GrouperInfo) -> Expected {
        let Some(workers) = self.valid_workers() else {
            return Expected::Refused(ConfigError::Workers {
                workers: self.workers,
                max: MAX_WORKERS,
            });
        };
        if let Some(loads) = self.shared_workers().filter(|&l| l != workers) {
            return Expected::Refused(ConfigError::SharedLoads { loads, workers });
        }
        let spec = |name: &str| info.params.iter().find(|s| s.name == name);
        if let Some(unknown) = self.params.keys().find(|k| spec(k).is_none()) {
            return Expected::Refused(ConfigError::UnknownParam {
                grouper: info.name,
                param: unknown.clone(),
                known: info.params.iter().map(|s| s.name).collect(),
            });
        }
        let bad: Vec<String> = self
            .params
            .iter()
            .filter(|(name, value)| effective(&spec(name).unwrap().default, value).is_none())
            .map(|(name, _)| name.clone())
            .collect();
        if bad.is_empty() { Expected::Built } else { Expected::BadParams(bad) }
    }
}

/// Builds `info` by `plan`, checks the outcome against the expectation and returns the
/// grouper when it was built.
fn build_checked(info: &GrouperInfo, plan: &Plan) -> Option<GrouperInstance> {
    let result = plan.build(info);
    match (plan.expected(info), result) {
        (Expected::Built, Ok(instance)) => {
            check_instance(info, plan, &instance);
            Some(instance)
        }
        // A grouper may restrict a well-typed value's range; only the given ones.
        (Expected::Built, Err(ConfigError::ParamRange { grouper, param, .. })) => {
            assert_eq!(grouper, info.name);
            assert!(plan.params.contains_key(&param), "range error on default {param:?}");
            None
        }
        (Expected::Refused(expected), Err(got)) => {
            assert_eq!(got, expected);
            None
        }
        (Expected::BadParams(bad), Err(ConfigError::ParamType { grouper, param, .. })) => {
            assert_eq!(grouper, info.name);
            assert!(bad.contains(&param), "{param:?} refused, but only {bad:?} are wrong");
            None
        }
        // A grouper may check a well-typed given value's range before it reads the
        // wrong-typed one (pstream checks `l` before it reads `r`).
        (Expected::BadParams(bad), Err(ConfigError::ParamRange { grouper, param, .. })) => {
            assert_eq!(grouper, info.name);
            assert!(
                bad.contains(&param) || plan.params.contains_key(&param),
                "range error on {param:?}, which was not given; wrong: {bad:?}"
            );
            None
        }
        (expected, got) => panic!(
            "grouper {:?}, workers {}, params {:?}: expected {expected:?}, got {:?}",
            info.name,
            plan.workers,
            plan.params,
            got.map(|i| i.params)
        ),
    }
}

fn check_instance(info: &GrouperInfo, plan: &Plan, instance: &GrouperInstance) {
    assert_eq!(instance.info.name, info.name);
    assert_eq!(instance.seed, plan.seed);
    let grouper = &instance.grouper;
    assert_eq!(grouper.name(), info.name);
    assert_eq!(u64::from(grouper.workers()), plan.workers);
    assert_eq!(grouper.loads().total(), 0);
    let scope = match plan.loads {
        LoadsArb::Private => LoadScope::Private,
        _ => LoadScope::Shared,
    };
    assert_eq!(grouper.loads().scope(), scope);
    // Effective parameters: every declared one, given values (widened) over defaults.
    assert_eq!(instance.params.len(), info.params.len(), "{:?}", instance.params);
    for spec in info.params {
        let expected = match plan.params.get(spec.name) {
            Some(given) => effective(&spec.default, given).unwrap(),
            None => spec.default.clone(),
        };
        assert_eq!(instance.params.get(spec.name), Some(&expected), "param {}", spec.name);
    }
}

/// Routes `batch` twice (under `Raise`, then `Group`) through `batched` with
/// `route_batch`, and key by key through `single`, an identically built twin.
fn route_and_compare(
    plan: &Plan,
    batch: &KeyBatch<'_>,
    keys: &[Option<Vec<u8>>],
    batched: &mut GrouperInstance,
    single: &mut GrouperInstance,
) {
    let workers = batched.grouper.workers();
    let nulls = keys.iter().filter(|k| k.is_none()).count();
    let mut per_worker = vec![0u64; workers as usize];
    for (step, policy) in [NullPolicy::Raise, NullPolicy::Group].into_iter().enumerate() {
        if step == 1 && plan.end_window {
            batched.grouper.end_window();
            single.grouper.end_window();
        }
        let before = batched.grouper.loads().snapshot();
        if plan.wrong_out_len {
            let mut out = vec![u32::MAX; keys.len() + 1];
            let got = route_batch(batched.grouper.as_mut(), batch, policy, &mut out);
            let expected = RouteError::OutputLength { keys: keys.len(), out: keys.len() + 1 };
            assert_eq!(got, Err(expected));
            assert_eq!(batched.grouper.loads().snapshot(), before);
        }
        let mut out = vec![u32::MAX; keys.len()];
        let got = route_batch(batched.grouper.as_mut(), batch, policy, &mut out);
        if policy == NullPolicy::Raise && nulls > 0 {
            // Refused before routing anything: the twin comparison on the next step also
            // catches state outside the load counters (e.g. a round-robin cursor).
            assert_eq!(got, Err(RouteError::NullKeys { nulls }));
            assert_eq!(batched.grouper.loads().snapshot(), before);
            continue;
        }
        assert_eq!(got, Ok(()));
        for (row, key) in keys.iter().enumerate() {
            let expected = single.grouper.route(key.as_deref().map_or(NULL_KEY, Key::Bytes));
            assert!(out[row] < workers, "row {row}: worker {} of {workers}", out[row]);
            assert_eq!(out[row], expected, "row {row} of {keys:?}, {policy:?}");
            per_worker[out[row] as usize] += 1;
        }
    }
    let loads = batched.grouper.loads();
    assert_eq!(loads.total(), per_worker.iter().sum::<u64>());
    assert_eq!(loads.snapshot(), per_worker);
    assert_eq!(single.grouper.loads().snapshot(), per_worker);
    assert!(batched.grouper.state_bytes() >= loads.state_bytes());
}

/// The largest valid count must build for every grouper; checked once, as a build at
/// that size allocates over 100 MB of counters.
fn check_max_workers() {
    for info in registry() {
        let instance = build(info.name, u64::from(MAX_WORKERS), 0, &Params::new(), None)
            .unwrap_or_else(|e| panic!("{} refuses MAX_WORKERS: {e}", info.name));
        assert_eq!(instance.grouper.workers(), MAX_WORKERS);
    }
}

fuzz_target!(init: check_max_workers(), |input: Input| {
    let buffers = Buffers::new(&input.layout);
    let reference = buffers.reference();
    let (mut batch, rows) = match (KeyBatch::new(buffers.values()), reference) {
        (Ok(batch), Some(rows)) => (batch, rows),
        (Err(_), None) => return,
        (Ok(_), None) => panic!("corrupt buffers accepted"),
        (Err(e), Some(rows)) => panic!("valid buffers refused: {e} (keys {rows:?})"),
    };
    assert_eq!(batch.len(), rows.len());
    assert_eq!(batch.is_empty(), rows.is_empty());

    let mut keys: Vec<Option<Vec<u8>>> = rows.into_iter().map(Some).collect();
    let bitmap = validity(&input.validity, keys.len());
    if let Some((bits, offset)) = &bitmap {
        let fits = offset
            .checked_add(keys.len())
            .is_some_and(|needed| bits.len() as u128 * 8 >= needed as u128);
        match (batch.clone().with_validity(bits, *offset), fits) {
            (Ok(with_nulls), true) => batch = with_nulls,
            (Err(_), false) => return,
            (Ok(_), false) => panic!("short bitmap accepted: {} bytes, offset {offset}", bits.len()),
            (Err(e), true) => panic!("fitting bitmap refused: {e}"),
        }
        // Arrow's LSB bit order: bit `offset + row` clear means row `row` is null.
        for (row, key) in keys.iter_mut().enumerate() {
            let bit = offset + row;
            if bits[bit / 8] & (1 << (bit % 8)) == 0 {
                *key = None;
            }
        }
    }
    assert_eq!(batch.null_count(), keys.iter().filter(|k| k.is_none()).count());
    let mut seen = Vec::with_capacity(keys.len());
    batch.for_each(|row, key| {
        assert_eq!(row, seen.len(), "rows out of order");
        seen.push(key.map(Key::to_bytes));
    });
    assert_eq!(seen, keys);

    let known: Vec<&'static str> = {
        let mut names: Vec<_> =
            registry().iter().flat_map(|info| info.params.iter().map(|s| s.name)).collect();
        names.sort_unstable();
        names.dedup();
        names
    };
    for (index, info) in registry().iter().enumerate() {
        let plan = Plan::new(input.builds.get(index).or(input.builds.last()), info, index, &known);
        let Some(mut batched) = build_checked(info, &plan) else { continue };
        if plan.workers > MAX_ROUTED_WORKERS {
            continue;
        }
        let mut single = plan.build(info).expect("an identical build failed");
        route_and_compare(&plan, &batch, &keys, &mut batched, &mut single);
    }
});
