//! Fuzzes snapshot decoding, the one input keysplit reads back from storage.
//!
//! Two kinds of input: raw bytes (any corruption, truncation or garbage must come back as
//! an `Err`, never a panic), and genuine snapshots of every grouper after an arbitrary key
//! sequence, edited at arbitrary positions and then re-framed with a valid checksum, so that
//! the edits reach the state decoder and the sketches' validation instead of stopping at
//! the checksum. An unedited snapshot must restore to a grouper that routes the rest of the
//! stream exactly as the original does; an edited one that restores must route the rest and
//! close windows without a panic, a hang or a worker out of range.

#![no_main]

use arbitrary::Arbitrary;
use keysplit_core::registry::{GrouperInstance, build, registry};
use keysplit_core::params::Params;
use keysplit_core::sketches::{
    CountMin, HyperLogLog, KeyedSpaceSaving, SlidingWindowCounter, SpaceSaving,
};
use keysplit_core::{Key, SketchSnapshot};
use libfuzzer_sys::fuzz_target;

const MAX_KEYS: usize = 200;

#[derive(Arbitrary, Debug)]
enum Input {
    Raw(Vec<u8>),
    Edited {
        grouper: u8,
        workers: u8,
        seed: u64,
        keys: Vec<u8>,
        rest: Vec<u8>,
        edits: Vec<(u16, u8)>,
    },
}

fn restore_raw(bytes: &[u8]) {
    let _ = GrouperInstance::restore(bytes);
    let _ = CountMin::restore(bytes);
    let _ = SpaceSaving::restore(bytes);
    if let Ok(mut keyed) = KeyedSpaceSaving::restore_either(bytes) {
        // A restored summary must take updates, whatever keys it was restored with.
        keyed.update(&[1, 2, 1], |_| None);
    }
    let _ = HyperLogLog::restore(bytes);
    let _ = SlidingWindowCounter::restore(bytes);
}

/// Recomputes the trailing checksum of a frame whose body was edited (format version 1).
fn reframe(bytes: &mut [u8]) {
    if bytes.len() >= 26 {
        let end = bytes.len() - 8;
        let checksum = xxhash_rust::xxh3::xxh3_64(&bytes[..end]);
        bytes[end..].copy_from_slice(&checksum.to_le_bytes());
    }
}

fn keys(bytes: &[u8]) -> Vec<Vec<u8>> {
    bytes.iter().take(MAX_KEYS).map(|b| vec![b % 13]).collect()
}

fuzz_target!(|input: Input| {
    match input {
        Input::Raw(bytes) => restore_raw(&bytes),
        Input::Edited { grouper, workers, seed, keys: first, rest, edits } => {
            let info = &registry()[usize::from(grouper) % registry().len()];
            let workers = u64::from(workers % 16) + 1;
            let mut original = build(info.name, workers, seed, &Params::new(), None).unwrap();
            for key in keys(&first) {
                original.grouper.route(Key::Bytes(&key));
            }
            let mut bytes = original.snapshot().unwrap();
            if edits.is_empty() {
                let mut restored = GrouperInstance::restore(&bytes).unwrap();
                for key in keys(&rest) {
                    let expected = original.grouper.route(Key::Bytes(&key));
                    assert_eq!(restored.grouper.route(Key::Bytes(&key)), expected, "{}", info.name);
                }
                return;
            }
            for (position, value) in edits {
                let len = bytes.len();
                bytes[usize::from(position) % len] = value;
            }
            reframe(&mut bytes);
            restore_raw(&bytes);
            // A forged state that restores must route and close windows within bounds.
            if let Ok(mut forged) = GrouperInstance::restore(&bytes) {
                let workers = forged.grouper.workers();
                for (i, key) in keys(&rest).iter().enumerate() {
                    if i % 50 == 49 {
                        forged.grouper.end_window();
                    }
                    assert!(forged.grouper.route(Key::Bytes(key)) < workers, "{}", info.name);
                }
                forged.grouper.end_window();
            }
        }
    }
});
