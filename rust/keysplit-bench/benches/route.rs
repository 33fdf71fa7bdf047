//! Criterion benchmarks of the routing core: the key hash, and `route_batch` of every
//! grouper on uint64 keys and on short strings (Arrow string views, as Polars exports them,
//! and 32-bit offsets, as PyArrow's `string`).
//!
//! `cargo bench -p keysplit-bench --bench route` runs them all; a filter narrows them, e.g.
//! `cargo bench -p keysplit-bench --bench route -- 'route/(key|pkg)/'`. Throughput is
//! reported in keys (elements) per second.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use keysplit_core::grouper::route_batch;
use keysplit_core::hash::{HashFamily, hash_int_key, hash_key};
use keysplit_core::registry::{build, registry};
use keysplit_core::{Key, KeyBatch, KeyValues, NullPolicy};

const ROWS: usize = 1 << 20;

mod common;

use common::Keys;

fn keys() -> Keys {
    common::keys(ROWS)
}

fn layouts(keys: &Keys) -> [(&'static str, KeyBatch<'_>); 3] {
    let batch = |values| KeyBatch::new(values).expect("valid keys");
    [
        ("uint64", batch(KeyValues::UInt64(&keys.ranks))),
        ("string_view", batch(KeyValues::Views { views: &keys.views, buffers: vec![] })),
        ("string", batch(KeyValues::Offsets32 { offsets: &keys.offsets, data: &keys.data })),
    ]
}

fn hashes(c: &mut Criterion, keys: &Keys) {
    let mut group = c.benchmark_group("hash");
    group.throughput(Throughput::Elements(ROWS as u64));
    group.bench_function("int_key", |b| {
        b.iter(|| keys.ranks.iter().fold(0u64, |acc, &k| acc ^ hash_int_key(k, black_box(7))))
    });
    group.bench_function("short_string", |b| {
        b.iter(|| {
            keys.offsets.windows(2).fold(0u64, |acc, pair| {
                acc ^ hash_key(&keys.data[pair[0] as usize..pair[1] as usize], black_box(7))
            })
        })
    });
    let family = HashFamily::new(1, 1000);
    group.bench_function("candidate_int_key", |b| {
        b.iter(|| keys.ranks.iter().fold(0u32, |acc, &k| acc ^ family.candidate(0, Key::Int(k))))
    });
    group.finish();
}

/// Every grouper at n = 32; `key`, `pkg` and `shuffle` also at 8 and 1024 workers,
/// `elastic` at 128.
fn routes(c: &mut Criterion, keys: &Keys) {
    let mut group = c.benchmark_group("route");
    group.throughput(Throughput::Elements(ROWS as u64));
    let mut out = vec![0u32; ROWS];
    for info in registry() {
        let worker_counts: &[u64] = match info.name {
            "key" | "pkg" | "shuffle" => &[8, 32, 1024],
            // Its speed target is set at 128 workers.
            "elastic" => &[32, 128],
            _ => &[32],
        };
        for &workers in worker_counts {
            for (layout, batch) in layouts(keys) {
                let id = BenchmarkId::new(info.name, format!("{layout}/n={workers}"));
                group.bench_function(id, |b| {
                    // A fresh grouper per iteration: each routes the same stream from the
                    // same state; building one is negligible next to 2^20 keys.
                    b.iter(|| {
                        let mut grouper =
                            build(info.name, workers, 1, &Default::default(), None).unwrap();
                        route_batch(grouper.grouper.as_mut(), &batch, NullPolicy::Raise, &mut out)
                            .unwrap();
                    })
                });
            }
        }
    }
    group.finish();
}

fn benches(c: &mut Criterion) {
    let keys = keys();
    hashes(c, &keys);
    routes(c, &keys);
}

criterion_group! {
    name = core;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(std::time::Duration::from_millis(300))
        .measurement_time(std::time::Duration::from_secs(1));
    targets = benches
}
criterion_main!(core);
