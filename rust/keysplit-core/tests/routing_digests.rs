//! Routing digests: every grouper, on one seeded stream, in every key layout, must route
//! exactly as the recorded digests say. The batch loops are specialised for speed (per
//! layout, per divisor, with loads kept in locals); this proves the specialisations change
//! no routing, bit for bit.
//!
//! `KEYSPLIT_PRINT_DIGESTS=1 cargo test -p keysplit-core --test routing_digests -- --nocapture`
//! prints the table. Regenerate it only when a grouper's routing is meant to change.

use keysplit_core::grouper::route_batch;

use keysplit_core::params::{ParamValue, Params};
use keysplit_core::registry::build;
use keysplit_core::streams::Zipf;
use keysplit_core::{KeyBatch, KeyValues, NullPolicy};
use xxhash_rust::xxh3::xxh3_64;

const TUPLES: usize = 40_000;
const BATCH: usize = 8_000;

/// Small windows and intervals, so that every grouper's periodic logic runs on the stream.
fn params(name: &str) -> Params {
    let int = |pairs: &[(&str, i64)]| -> Params {
        pairs.iter().map(|&(k, v)| (k.to_owned(), ParamValue::Int(v))).collect()
    };
    match name {
        "dkg_rivetti" => int(&[("learning_tuples", 5_000)]),
        "dkg" => int(&[("window_tuples", 3_000)]),
        "flexd" => int(&[("segment_tuples", 6_000), ("batch_tuples", 500)]),
        "elb" | "clb" => int(&[("window_tuples", 4_000)]),
        "dagreedy" | "dalton" => int(&[("interval_tuples", 5_000)]),
        "cm" | "am" | "cam" | "lm" | "cm_hll" | "am_hll" | "cam_hll" | "lm_hll" => {
            int(&[("window_tuples", 5_000)])
        }
        _ => Params::new(),
    }
}

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

/// The digest of the ids and final loads of `name` (32 workers, seed 3) on one layout.
fn digest(name: &str, stream: &Stream, layout: &str, workers: u64) -> u64 {
    let mut grouper = build(name, workers, 3, &params(name), None).unwrap().grouper;
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

/// (grouper, workers, digest on uint64 keys, digest on strings). The string offsets and
/// views layouts hold the same strings, so they share a digest.
const DIGESTS: &[(&str, u64, u64, u64)] = &[
    ("shuffle", 7, 0x9e8669426d7a711f, 0x9e8669426d7a711f),
    ("shuffle", 32, 0x84bf80d5505a81fb, 0x84bf80d5505a81fb),
    ("key", 7, 0x06858cdc0ee7eea2, 0x84d7374ec6316425),
    ("key", 32, 0x1314f9b92da87531, 0xeffdf01d03e39ec3),
    ("uhlb", 7, 0x1ea7ba09fc264ef6, 0xb61bd631c1e68143),
    ("uhlb", 32, 0xc5135cf86eabd1df, 0xd838cc628af9b699),
    ("pkg", 7, 0x7cde71bca99aca97, 0x179621252b2a8480),
    ("pkg", 32, 0x5b1301f8454b59da, 0x507e10d117db40bf),
    ("d_choices", 7, 0xb123867042ac29c3, 0x9e29997aeb909ccd),
    ("d_choices", 32, 0x05896a64012bf94b, 0x16359e3cd4d50641),
    ("w_choices", 7, 0x872a65c29cd42710, 0x5a5ace78e85866fc),
    ("w_choices", 32, 0xd8f5205e27247946, 0x1c4c198fa7b6627f),
    ("rr_head", 7, 0x538dcf0ff95519a3, 0x850ce211cd88211a),
    ("rr_head", 32, 0xfe4306008c7a7779, 0x2220bf9f2c34b62d),
    ("dkg_rivetti", 7, 0x26f1f61e13fc78d8, 0x71a854563501c653),
    ("dkg_rivetti", 32, 0xbbcac184bb437dc5, 0x78d82d111fa85bf6),
    ("dkg", 7, 0x6946d1b789176345, 0x69aefd42a31abab1),
    ("dkg", 32, 0x8c61f95d8e853ad3, 0xe538434ff0b7a9e8),
    ("flexd", 7, 0x2cf99a1c1216baa0, 0xd87e377b13990495),
    ("flexd", 32, 0x639a4af67976ff82, 0x94ce07f8f294cdd0),
    ("pdstream", 7, 0x2041cb09a9b78424, 0x960556b167fc7c47),
    ("pdstream", 32, 0x329ac98ce76642e7, 0xdb60bd874a37eeba),
    ("cm", 7, 0x994fd5c7fdf09c2d, 0x2d6c18e39b4d85a3),
    ("cm", 32, 0x4de4928ac3f1dc45, 0x58bb8f98bb690b78),
    ("am", 7, 0xf7d80875b78dc058, 0xab2349147d5b6862),
    ("am", 32, 0xec33f97b181289c4, 0xf2c48a8377200d6b),
    ("cam", 7, 0x7f1171f466097766, 0x63fb8cb7a8ddfb7a),
    ("cam", 32, 0x79febcbb5898baea, 0xf62e73e48c7c8064),
    ("lm", 7, 0x8a33ee0e88a144e4, 0xc562352a8796c4ed),
    ("lm", 32, 0x6eeafa9e4eeb5fc5, 0x97a39fbeb41065b0),
    ("cm_hll", 7, 0x2a44778c9b794f15, 0xded5a67a881286c9),
    ("cm_hll", 32, 0x76e2100b2e1c52f6, 0x2560d4f20b17af5a),
    ("am_hll", 7, 0x28070505e0d1f8a5, 0xd2b9637edf9a2400),
    ("am_hll", 32, 0x8cfa948c31a20214, 0xc65d83d4d86bf814),
    ("cam_hll", 7, 0xcf4595ef4a0b4ae2, 0x8c4f980df290bd7d),
    ("cam_hll", 32, 0x2e7d83535e3014c3, 0x26cb49eae4d88bf9),
    ("lm_hll", 7, 0xb045f06cd7a27f6c, 0x9830671c7c943634),
    ("lm_hll", 32, 0x8641dd1822dbd0d2, 0x9292ad354235ba5c),
    ("elb", 7, 0xf6b3c67572766be1, 0xc0befca3846d1c6a),
    ("elb", 32, 0x8fbd498c5a1e8cf0, 0x6a5c1ec92a011bc5),
    ("clb", 7, 0x06858cdc0ee7eea2, 0x84d7374ec6316425),
    ("clb", 32, 0x1314f9b92da87531, 0xeffdf01d03e39ec3),
    ("pstream", 7, 0x59b9928a87c3084a, 0xe7887a2f27fdb118),
    ("pstream", 32, 0x0d297298a5c1b004, 0xc9951629afe39b16),
    ("dagreedy", 7, 0x1526fc365119b05c, 0xf925be05c90cd385),
    ("dagreedy", 32, 0x22e2fd6c1e771a5c, 0x15c1e11225158216),
    ("dalton", 7, 0x12e7d5150cb0e3c9, 0xe374167a78bdbb94),
    ("dalton", 32, 0xf4654585ecdd2d88, 0x3ec56e185575c983),
];

#[test]
fn every_grouper_routes_as_recorded() {
    let stream = stream();
    let print = std::env::var_os("KEYSPLIT_PRINT_DIGESTS").is_some();
    for info in keysplit_core::registry() {
        let name = info.name;
        for workers in WORKER_COUNTS {
            let uint64 = digest(name, &stream, "uint64", workers);
            let offsets = digest(name, &stream, "offsets", workers);
            let views = digest(name, &stream, "views", workers);
            assert_eq!(offsets, views, "{name}: string layouts disagree");
            if print {
                println!("    (\"{name}\", {workers}, {uint64:#018x}, {offsets:#018x}),");
                continue;
            }
            let recorded = DIGESTS
                .iter()
                .find(|&&(n, w, _, _)| n == name && w == workers)
                .unwrap_or_else(|| panic!("no digest recorded for {name} on {workers} workers"));
            assert_eq!((uint64, offsets), (recorded.2, recorded.3), "{name} on {workers} workers");
        }
    }
}
