//! Routing digests: every grouper, on one seeded stream, in every key layout, must route
//! exactly as the digests recorded in `tests/data/groupers.json` say. The batch loops are
//! specialised for speed (per layout, per divisor, with loads kept in locals); this proves
//! the specialisations change no routing, bit for bit.
//!
//! Each grouper runs with its `digest_params` from that file: small windows and intervals,
//! so that every grouper's periodic logic runs on the stream. Only when a grouper's routing
//! is meant to change, or for a new grouper,
//! `KEYSPLIT_BLESS=1 cargo test -p keysplit-core --test routing_digests --test snapshot`
//! rewrites the recorded digests (and adds an entry for a grouper that has none).

use keysplit_core::grouper::route_batch;

use keysplit_core::params::Params;
use keysplit_core::registry::build;
use keysplit_core::streams::Zipf;
use keysplit_core::{KeyBatch, KeyValues, NullPolicy};
use xxhash_rust::xxh3::xxh3_64;

// `tests/common/grouper_data.rs` alone: the rest of `common` serves other tests.
mod common {
    pub mod grouper_data;
}
use common::grouper_data::{self, Digests};

const TUPLES: usize = 40_000;
const BATCH: usize = 8_000;

struct Stream {
    ranks: Vec<u64>,
    offsets: Vec<i32>,
    data: Vec<u8>,
    views: Vec<u128>,
}

/// Ranks of a Zipf stream and the same keys as strings: `user_<rank>`, and every 7th rank
/// longer than a view's 12 inline bytes, so that every string length path runs.
fn stream() -> Stream {
    let mut zipf = Zipf::new(20_000, 1.2, 7).unwrap();
    let mut ranks = vec![0u64; TUPLES];
    zipf.fill(&mut ranks);
    let mut offsets = vec![0i32];
    let mut data = Vec::new();
    for &rank in &ranks {
        let key = if rank % 7 == 3 { format!("a_longer_user_{rank}") } else { format!("u{rank}") };
        data.extend_from_slice(key.as_bytes());
        offsets.push(data.len() as i32);
    }
    let views = offsets
        .windows(2)
        .map(|pair| {
            let bytes = &data[pair[0] as usize..pair[1] as usize];
            let mut raw = [0u8; 16];
            raw[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
            if bytes.len() <= 12 {
                raw[4..4 + bytes.len()].copy_from_slice(bytes);
            } else {
                raw[4..8].copy_from_slice(&bytes[..4]);
                raw[12..16].copy_from_slice(&(pair[0] as u32).to_le_bytes());
            }
            u128::from_le_bytes(raw)
        })
        .collect();
    Stream { ranks, offsets, data, views }
}

fn batch_of<'a>(stream: &'a Stream, layout: &str, range: std::ops::Range<usize>) -> KeyBatch<'a> {
    let values = match layout {
        "uint64" => KeyValues::UInt64(&stream.ranks[range]),
        "offsets" => KeyValues::Offsets32 {
            offsets: &stream.offsets[range.start..range.end + 1],
            data: &stream.data,
        },
        "views" => KeyValues::Views { views: &stream.views[range], buffers: vec![&stream.data] },
        _ => unreachable!(),
    };
    KeyBatch::new(values).unwrap()
}

/// The digest of the ids and final loads of `name` (seed 3) on one layout.
fn digest(name: &str, params: &Params, stream: &Stream, layout: &str, workers: u64) -> u64 {
    let mut grouper = build(name, workers, 3, params, None).unwrap().grouper;
    let mut ids = vec![u32::MAX; TUPLES];
    for start in (0..TUPLES).step_by(BATCH) {
        let batch = batch_of(stream, layout, start..start + BATCH);
        route_batch(grouper.as_mut(), &batch, NullPolicy::Raise, &mut ids[start..start + BATCH])
            .unwrap();
        grouper.end_window();
    }
    assert_eq!(grouper.loads().total(), TUPLES as u64, "{name}");
    let mut bytes: Vec<u8> = ids.iter().flat_map(|id| id.to_le_bytes()).collect();
    bytes.extend(grouper.loads().snapshot().iter().flat_map(|l| l.to_le_bytes()));
    xxh3_64(&bytes)
}

const WORKER_COUNTS: [u64; 2] = [7, 32];

#[test]
fn every_grouper_routes_as_recorded() {
    let stream = stream();
    let mut digests = Digests::new();
    for info in keysplit_core::registry() {
        let name = info.name;
        let params = grouper_data::params(name, "digest_params");
        for workers in WORKER_COUNTS {
            let uint64 = digest(name, &params, &stream, "uint64", workers);
            let offsets = digest(name, &params, &stream, "offsets", workers);
            let views = digest(name, &params, &stream, "views", workers);
            assert_eq!(offsets, views, "{name}: string layouts disagree");
            // The string offsets and views layouts hold the same strings: one digest.
            let workers = workers.to_string();
            digests.check(name, &["routing_digests", &workers, "uint64"], uint64);
            digests.check(name, &["routing_digests", &workers, "string"], offsets);
        }
    }
    digests.finish("routing changed (bless only when a grouper's routing is meant to change)");
}
