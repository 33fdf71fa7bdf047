//! Snapshot and restore: a restored grouper routes on exactly as if never interrupted, and
//! no byte string makes reading a snapshot panic.

use keysplit_core::hash::fingerprint;
use keysplit_core::params::{ParamValue, Params};
use keysplit_core::registry::{GrouperInstance, build, registry};
use keysplit_core::sketches::count_min::CountMin;
use keysplit_core::sketches::hyperloglog::HyperLogLog;
use keysplit_core::sketches::keyed_space_saving::KeyedSpaceSaving;
use keysplit_core::sketches::sliding_window::SlidingWindowCounter;
use keysplit_core::sketches::space_saving::SpaceSaving;
use keysplit_core::snapshot::FORMAT_VERSION;
use keysplit_core::{Key, KeyLabel, LoadVector, SketchSnapshot, Snapshot, SnapshotError};
use proptest::prelude::*;

// `tests/common/grouper_data.rs` alone: the rest of `common` serves other tests.
mod common {
    pub mod grouper_data;
}
use common::grouper_data::{self, Digests};

/// Parameters that make every windowed grouper close windows, rebuild tables and clean up
/// within a few hundred tuples, so that a snapshot lands amid all of its state: the
/// grouper's `busy_params` in `tests/data/groupers.json`, which the Python tests use too.
fn busy_params(name: &str) -> Params {
    grouper_data::params(name, "busy_params")
}

fn route(instance: &mut GrouperInstance, keys: &[Vec<u8>]) -> Vec<u32> {
    keys.iter().map(|k| instance.grouper.route(Key::Bytes(k))).collect()
}

fn keys_strategy() -> impl Strategy<Value = Vec<Vec<u8>>> {
    prop::collection::vec(prop::collection::vec(0u8..6, 0..3), 0..300)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_grouper_restored_mid_stream_routes_on_as_if_uninterrupted(
        a in keys_strategy(), b in keys_strategy(), workers in 1u64..12, seed in any::<u64>(),
        window_ends in prop::collection::vec(0usize..300, 0..3),
    ) {
        for info in registry() {
            let params = busy_params(info.name);
            let mut whole = build(info.name, workers, seed, &params, None).unwrap();
            let mut first = build(info.name, workers, seed, &params, None).unwrap();
            let mut expected = Vec::new();
            let mut routed_a = Vec::new();
            for (i, key) in a.iter().enumerate() {
                if window_ends.contains(&i) {
                    whole.grouper.end_window();
                    first.grouper.end_window();
                }
                expected.push(whole.grouper.route(Key::Bytes(key)));
                routed_a.push(first.grouper.route(Key::Bytes(key)));
            }
            let bytes = first.snapshot().unwrap();
            // The same configuration and history give the same bytes.
            prop_assert_eq!(&whole.snapshot().unwrap(), &bytes, "grouper {}", info.name);
            expected.extend(route(&mut whole, &b));

            let mut restored = GrouperInstance::restore(&bytes).unwrap();
            // Tables are written in key order, so a restored grouper's snapshot is the same
            // bytes whatever order its rebuilt tables iterate in.
            prop_assert_eq!(&restored.snapshot().unwrap(), &bytes, "grouper {}", info.name);
            prop_assert_eq!(restored.info.name, info.name);
            prop_assert_eq!(&restored.params, &first.params);
            prop_assert_eq!(restored.grouper.loads().snapshot(), first.grouper.loads().snapshot());
            routed_a.extend(route(&mut restored, &b));
            prop_assert_eq!(&routed_a, &expected, "grouper {}", info.name);
        }
    }

    #[test]
    fn no_byte_string_makes_restore_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = GrouperInstance::restore(&bytes);
        let _ = SpaceSaving::restore(&bytes);
        let _ = KeyedSpaceSaving::restore_either(&bytes);
    }

    #[test]
    fn every_single_byte_corruption_is_detected(position in any::<prop::sample::Index>(), flip in 1u8..=255) {
        let mut instance = build("pdstream", 8, 3, &Params::new(), None).unwrap();
        route(&mut instance, &(0u8..50).map(|k| vec![k % 7]).collect::<Vec<_>>());
        let mut bytes = instance.snapshot().unwrap();
        let i = position.index(bytes.len());
        bytes[i] ^= flip;
        prop_assert!(GrouperInstance::restore(&bytes).is_err());
    }

    #[test]
    fn sketches_restore_to_equal_sketches_and_their_states_validate(
        items in prop::collection::vec(0u64..40, 0..400), capacity in 1usize..12,
    ) {
        let mut summary = SpaceSaving::new(capacity).unwrap();
        let mut count_min = CountMin::new(16, 3, 9).unwrap();
        let mut hll = HyperLogLog::new(6).unwrap();
        let mut window = SlidingWindowCounter::new(capacity).unwrap();
        for &item in &items {
            summary.insert(item);
            count_min.insert(item, 1);
            hll.insert(item);
            window.push(item);
        }
        let summary2 = SpaceSaving::restore(&summary.snapshot().unwrap()).unwrap();
        prop_assert_eq!(
            summary2.iter_by_count().collect::<Vec<_>>(),
            summary.iter_by_count().collect::<Vec<_>>()
        );
        let count_min2 = CountMin::restore(&count_min.snapshot().unwrap()).unwrap();
        for item in 0u64..40 {
            prop_assert_eq!(count_min2.estimate(item), count_min.estimate(item));
            prop_assert_eq!(
                window.clone().push(item),
                SlidingWindowCounter::restore(&window.snapshot().unwrap()).unwrap().push(item)
            );
        }
        prop_assert_eq!(HyperLogLog::restore(&hll.snapshot().unwrap()).unwrap(), hll);
        let fingerprints: Vec<u64> = items.iter().map(|&k| fingerprint(Key::Int(k))).collect();
        let mut keyed = KeyedSpaceSaving::new(capacity).unwrap();
        keyed.update(&fingerprints, |row| Some(KeyLabel::Unsigned(items[row])));
        let keyed2 = KeyedSpaceSaving::restore(&keyed.snapshot().unwrap()).unwrap();
        for (item, counter) in keyed.summary().iter_by_count() {
            let key = keyed2.key(item).expect("a monitored item keeps its key");
            prop_assert_eq!(key.fingerprint(), item);
            prop_assert_eq!(keyed2.summary().estimate(item), Some(counter));
        }
    }
}

fn pkg_snapshot() -> Vec<u8> {
    let mut instance = build("pkg", 4, 1, &Params::new(), None).unwrap();
    route(&mut instance, &[b"a".to_vec(), b"b".to_vec(), b"a".to_vec()]);
    instance.snapshot().unwrap()
}

fn restore_error(bytes: &[u8]) -> SnapshotError {
    match GrouperInstance::restore(bytes) {
        Ok(_) => panic!("restored a bad snapshot"),
        Err(e) => e,
    }
}

#[test]
fn the_frame_is_magic_version_length_body_checksum() {
    let bytes = pkg_snapshot();
    assert_eq!(&bytes[..8], b"KSPLSNAP");
    assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), FORMAT_VERSION);
    let body = u64::from_le_bytes(bytes[10..18].try_into().unwrap()) as usize;
    assert_eq!(bytes.len(), 18 + body + 8);
    let checksum = u64::from_le_bytes(bytes[18 + body..].try_into().unwrap());
    assert_eq!(checksum, xxhash_rust::xxh3::xxh3_64(&bytes[..18 + body]));
}

#[test]
fn bad_snapshots_are_refused_with_the_reason() {
    let bytes = pkg_snapshot();
    for cut in [0, 3, 17, 20, bytes.len() - 1] {
        let error = restore_error(&bytes[..cut]);
        assert!(matches!(error, SnapshotError::Truncated { .. }), "cut {cut}: {error}");
        assert!(error.to_string().contains("truncated"));
    }
    assert_eq!(restore_error(b"not a snapshot at all"), SnapshotError::NotASnapshot);

    let mut newer = bytes.clone();
    newer[8..10].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let error = restore_error(&newer);
    assert_eq!(error, SnapshotError::UnsupportedVersion { found: FORMAT_VERSION + 1 });
    assert!(error.to_string().contains("this release reads version 1"));

    let mut corrupt = bytes.clone();
    corrupt[25] ^= 0x10;
    assert!(matches!(restore_error(&corrupt), SnapshotError::Checksum { .. }));

    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(restore_error(&longer), SnapshotError::TrailingBytes { extra: 1 });
}

#[test]
fn sketch_and_grouper_snapshots_cannot_be_swapped() {
    let sketch = HyperLogLog::new(4).unwrap().snapshot().unwrap();
    let error = restore_error(&sketch);
    assert!(error.to_string().contains("\"sketch:hyperloglog\", not a grouper"), "{error}");
    let error = match SpaceSaving::restore(&pkg_snapshot()) {
        Ok(_) => panic!("a grouper restored as a sketch"),
        Err(e) => e,
    };
    assert!(error.to_string().contains("snapshot holds \"pkg\", not \"sketch:space_saving\""));
    let error = match SpaceSaving::restore(&sketch) {
        Ok(_) => panic!("one sketch restored as another"),
        Err(e) => e,
    };
    assert!(matches!(error, SnapshotError::WrongKind { .. }));
}

#[test]
fn a_shared_load_vector_restores_as_private_counts() {
    let shared = LoadVector::shared(3);
    let mut instance = build("pkg", 3, 0, &Params::new(), Some(shared.share().unwrap())).unwrap();
    route(&mut instance, &[b"x".to_vec(), b"y".to_vec()]);
    let restored = GrouperInstance::restore(&instance.snapshot().unwrap()).unwrap();
    assert_eq!(restored.grouper.loads().snapshot(), shared.snapshot());
    assert!(restored.grouper.loads().share().is_some(), "the scope is kept");
    assert_eq!(restored.grouper.loads().total(), 2);
}

/// The XXH3 of each grouper's snapshot `state` after a fixed history, with its busy
/// parameters, must equal its `state_digest` in `tests/data/groupers.json`: the fields of
/// format version 1 are frozen. A change to any grouper's fields changes its digest and must
/// come with a new `FORMAT_VERSION` (and a reader for version 1), not a new digest in the
/// file. Bless mode,
/// `KEYSPLIT_BLESS=1 cargo test -p keysplit-core --test routing_digests --test snapshot`,
/// records the digests instead of checking them: for a new grouper, which it adds to the
/// file, or with that new format version.
#[test]
fn state_layouts_are_frozen_for_format_version_1() {
    assert_eq!(FORMAT_VERSION, 1, "a new format version needs its own state digests");
    let keys: Vec<Vec<u8>> =
        (0u32..600).map(|i| format!("k{}", (i * i) % 37).into_bytes()).collect();
    let mut digests = Digests::new();
    for info in registry() {
        let mut instance = build(info.name, 7, 5, &busy_params(info.name), None).unwrap();
        for (i, key) in keys.iter().enumerate() {
            if i % 170 == 169 {
                instance.grouper.end_window();
            }
            instance.grouper.route(Key::Bytes(key));
        }
        let snapshot = keysplit_core::Snapshot::decode(&instance.snapshot().unwrap()).unwrap();
        digests.check(info.name, &["state_digest"], xxhash_rust::xxh3::xxh3_64(&snapshot.state));
    }
    digests.finish(
        "the snapshot state of format version 1 changed (a change to a grouper's fields needs \
         a new FORMAT_VERSION and a reader for version 1, not a new digest)",
    );
}

/// The keyed summary's state after a fixed history, every kind of key among them, frozen
/// as the groupers' states are.
#[test]
fn keyed_space_saving_layout_is_frozen_for_format_version_1() {
    let keys = [
        KeyLabel::Text("hot".into()),
        KeyLabel::Bytes(vec![0, 1]),
        KeyLabel::Signed(-3),
        KeyLabel::Unsigned(u64::MAX),
        KeyLabel::Null,
    ];
    let rows: Vec<usize> = (0..200).map(|i: usize| (i * i) % 7 % keys.len()).collect();
    let items: Vec<u64> = rows.iter().map(|&r| keys[r].fingerprint()).collect();
    let mut sketch = KeyedSpaceSaving::new(4).unwrap();
    sketch.update(&items, |row| Some(keys[rows[row]].clone()));
    let snapshot = keysplit_core::Snapshot::decode(&sketch.snapshot().unwrap()).unwrap();
    assert_eq!(snapshot.kind, "sketch:keyed_space_saving");
    let digest = xxhash_rust::xxh3::xxh3_64(&snapshot.state);
    assert_eq!(
        digest, 0xbf1ad686d9f92899,
        "the keyed summary's snapshot state of format version 1 changed"
    );
}

/// What routing a restored grouper did: returned ids in range, returned an id out of
/// range, or panicked (with the message).
fn route_restored(mut instance: GrouperInstance, keys: &[Vec<u8>]) -> Result<(), String> {
    let workers = instance.grouper.workers();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut ids = route(&mut instance, &keys[..keys.len() / 2]);
        instance.grouper.end_window();
        ids.extend(route(&mut instance, &keys[keys.len() / 2..]));
        ids
    }));
    match outcome {
        Ok(ids) => match ids.iter().find(|&&w| w >= workers) {
            Some(w) => Err(format!("routed to worker {w} of {workers}")),
            None => Ok(()),
        },
        Err(payload) => Err(format!(
            "panicked: {}",
            payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

/// The state bytes a forging test changes: all of the first 512 and the last 256, where
/// every grouper keeps its scalars and the ends of its vectors, and 512 evenly spaced
/// between, through the tables and registers that repeat one layout.
fn forged_positions(len: usize) -> Vec<usize> {
    let mut positions: Vec<usize> = (0..len.min(512)).collect();
    let middle = 512..len.saturating_sub(256);
    if !middle.is_empty() {
        let step = middle.len().div_ceil(512);
        positions.extend(middle.step_by(step));
    }
    positions.extend(len.saturating_sub(256).max(512)..len);
    positions
}

/// A snapshot is operator state read back from storage: one changed byte of a grouper's
/// state, under a checksum recomputed to match, must give a `SnapshotError` or a grouper
/// that routes within its invariants, never a panic or a hang.
#[test]
fn forged_states_are_refused_or_route_within_bounds() {
    let keys: Vec<Vec<u8>> =
        (0u32..400).map(|i| format!("k{}", (i * i) % 37).into_bytes()).collect();
    let mut report = Vec::new();
    for info in registry() {
        let mut instance = build(info.name, 7, 5, &busy_params(info.name), None).unwrap();
        route(&mut instance, &keys);
        let snapshot = keysplit_core::Snapshot::decode(&instance.snapshot().unwrap()).unwrap();
        let (keys, name) = (keys.clone(), info.name);
        let (sender, outcomes) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for position in forged_positions(snapshot.state.len()) {
                for flip in [0x01u8, 0x80, 0xff] {
                    let mut forged = snapshot.clone();
                    forged.state[position] ^= flip;
                    let outcome = match GrouperInstance::restore(&forged.encode().unwrap()) {
                        Err(_) => None,
                        Ok(restored) => {
                            Some(route_restored(restored, &keys).map_err(|reason| {
                                format!("byte {position} ^ {flip:#04x}: {reason}")
                            }))
                        }
                    };
                    if sender.send(outcome).is_err() {
                        return;
                    }
                }
            }
        });
        let (mut forged, mut restored, mut failures) = (0, 0, Vec::new());
        loop {
            // Routing 400 keys takes milliseconds: seconds without an answer is a hang.
            match outcomes.recv_timeout(std::time::Duration::from_secs(10)) {
                Ok(outcome) => {
                    forged += 1;
                    if let Some(result) = outcome {
                        restored += 1;
                        failures.extend(result.err());
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    failures.push(format!("hung after {forged} forged states"));
                    break;
                }
            }
        }
        if !failures.is_empty() {
            report.push(format!(
                "{name}: {} of {forged} forged states ({restored} restored) broke routing, e.g. {}",
                failures.len(),
                failures[0]
            ));
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}

/// In-range values besides `default` that a parameter may take, to try in turn.
fn other_values(default: &ParamValue) -> Vec<ParamValue> {
    match *default {
        ParamValue::Bool(b) => vec![ParamValue::Bool(!b)],
        ParamValue::Int(d) => [d * 2, d + 1, d - 1, d / 2, 1, 2, 100]
            .into_iter()
            .filter(|&v| v != d)
            .map(ParamValue::Int)
            .collect(),
        ParamValue::Float(f) => [f / 2.0, f * 2.0, (f + 1.0) / 2.0, 0.25, 0.75]
            .into_iter()
            .filter(|&v| v != f)
            .map(ParamValue::Float)
            .collect(),
        ParamValue::Str(_) => Vec::new(),
    }
}

fn fresh_state(name: &str, seed: u64, params: &Params) -> Option<Vec<u8>> {
    let instance = build(name, 7, seed, params, None).ok()?;
    Some(instance.grouper.save_state().unwrap())
}

/// A header is checked against the state it frames: a state restored under a seed or a
/// parameter other than the one it was built with is refused, whenever the two would build
/// different groupers. Every parameter of every grouper is tried with an in-range value.
#[test]
fn a_header_that_disagrees_with_its_state_is_refused() {
    let keys: Vec<Vec<u8>> =
        (0u32..400).map(|i| format!("k{}", (i * i) % 37).into_bytes()).collect();
    let mut report = Vec::new();
    for info in registry() {
        let mut instance = build(info.name, 7, 5, &Params::new(), None).unwrap();
        route(&mut instance, &keys);
        let snapshot = keysplit_core::Snapshot::decode(&instance.snapshot().unwrap()).unwrap();
        let mut forgeries = vec![("seed".to_owned(), Snapshot { seed: 6, ..snapshot.clone() })];
        for spec in info.params {
            let mut tried = 0;
            for value in other_values(&spec.default) {
                let mut params = snapshot.params.clone();
                params.insert(spec.name.to_owned(), value.clone());
                match fresh_state(info.name, 5, &params) {
                    Some(state)
                        if state != fresh_state(info.name, 5, &snapshot.params).unwrap() =>
                    {
                        let header = Snapshot { params, ..snapshot.clone() };
                        forgeries.push((format!("{} = {value}", spec.name), header));
                        tried += 1;
                        break;
                    }
                    _ => {}
                }
            }
            if tried == 0 {
                report.push(format!("{}: no other value of {} was tried", info.name, spec.name));
            }
        }
        for (change, forged) in forgeries {
            let same_grouper = fresh_state(info.name, forged.seed, &forged.params)
                == fresh_state(info.name, snapshot.seed, &snapshot.params);
            match GrouperInstance::restore(&forged.encode().unwrap()) {
                Err(SnapshotError::Mismatch { .. }) => {}
                Ok(_) if same_grouper => {}
                Ok(_) => report.push(format!("{}: restored under {change}", info.name)),
                Err(other) => report.push(format!("{}: {change} gave {other}", info.name)),
            }
        }
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}
