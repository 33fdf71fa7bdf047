//! Checks shared by the grouper families' integration tests.

use keysplit_core::grouper::{Grouper, route_batch};
use keysplit_core::{Key, KeyBatch, KeyValues, NullPolicy, OwnedKey};
use proptest::prelude::*;

/// The invariants every grouper keeps on `keys`: ids below `workers`, the same routing from
/// two identically built groupers, batch routing equal to routing key by key, and every
/// tuple counted in the loads. `build` makes a fresh grouper each call.
pub fn check_routing<G: Grouper>(
    mut build: impl FnMut() -> G,
    keys: &[Vec<u8>],
    workers: u32,
) -> Result<(), TestCaseError> {
    let mut route_all = || {
        let mut grouper = build();
        keys.iter().map(|k| grouper.route(Key::Bytes(k))).collect::<Vec<u32>>()
    };
    let single = route_all();
    prop_assert!(single.iter().all(|&w| w < workers));
    prop_assert_eq!(&single, &route_all());

    let mut grouper = build();
    let owned: Vec<OwnedKey> = keys.iter().cloned().map(OwnedKey::Bytes).collect();
    let batch = KeyBatch::new(KeyValues::Owned(&owned)).unwrap();
    let mut out = vec![u32::MAX; keys.len()];
    route_batch(&mut grouper, &batch, NullPolicy::Raise, &mut out).unwrap();
    prop_assert_eq!(&out, &single);
    prop_assert_eq!(grouper.loads().total(), keys.len() as u64);
    Ok(())
}
