//! Routes one Zipf stream once with one grouper: the workload `docs/performance.md`
//! profiles with callgrind, whose instruction counts, unlike timings, repeat exactly on a
//! busy machine.
//!
//! ```sh
//! cargo build --release -p keysplit-bench --example route_once
//! valgrind --tool=callgrind --toggle-collect='keysplit_core::grouper::route_batch' \
//!     target/release/examples/route_once pkg uint64 8 1000000
//! ```
//!
//! Arguments: grouper, key layout (`uint64`, `string_view` or `string`), workers, keys.
//! `ROUTE_ONCE_REPEAT=5` routes the stream 5 times, each with a fresh grouper, and prints
//! the best rate.
//! The keys are those of the criterion benchmark: Zipf(1.1) ranks over 10^6 keys, and the
//! strings `user_<rank>`.

#[path = "../benches/common/mod.rs"]
mod common;

use keysplit_core::grouper::route_batch;

use keysplit_core::registry::build;
use keysplit_core::{KeyBatch, KeyValues, NullPolicy};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, name, layout, workers, rows] = args.as_slice() else {
        eprintln!("usage: route_once GROUPER uint64|string_view|string WORKERS KEYS");
        std::process::exit(2);
    };
    let workers: u64 = workers.parse().expect("WORKERS is a number");
    let rows: usize = rows.parse().expect("KEYS is a number");
    let common::Keys { ranks, offsets, data, views } = common::keys(rows);
    let values = match layout.as_str() {
        "uint64" => KeyValues::UInt64(&ranks),
        "string_view" => KeyValues::Views { views: &views, buffers: vec![] },
        "string" => KeyValues::Offsets32 { offsets: &offsets, data: &data },
        other => panic!("unknown layout {other}"),
    };
    let batch = KeyBatch::new(values).expect("valid keys");
    let repeat: usize =
        std::env::var("ROUTE_ONCE_REPEAT").map_or(1, |r| r.parse().expect("a number"));
    let mut out = vec![0u32; rows];
    let mut best = f64::INFINITY;
    for _ in 0..repeat {
        let mut grouper =
            build(name, workers, 1, &Default::default(), None).expect("valid grouper");
        let started = std::time::Instant::now();
        route_batch(grouper.grouper.as_mut(), &batch, NullPolicy::Raise, &mut out).expect("routed");
        best = best.min(started.elapsed().as_secs_f64());
    }
    let checksum = out.iter().fold(0u64, |acc, &w| acc.wrapping_mul(31).wrapping_add(u64::from(w)));
    let rate = rows as f64 / best / 1e6;
    println!(
        "{name} {layout} n={workers}: {rows} keys, {rate:.1} M keys/s (best of {repeat}), checksum {checksum:#x}"
    );
}
