//! The keys every Rust benchmark routes: Zipf(1.1) ranks over 10^6 keys, and the same
//! keys as the strings `user_<rank>` (6 to 11 bytes), the stream of
//! `benches/route_throughput.py`. Shared by `benches/route.rs` and `examples/route_once.rs`.

use keysplit_core::streams::Zipf;

pub struct Keys {
    pub ranks: Vec<u64>,
    pub offsets: Vec<i32>,
    pub data: Vec<u8>,
    /// The strings as Arrow views, every one inline (at most 12 bytes).
    pub views: Vec<u128>,
}

pub fn keys(rows: usize) -> Keys {
    let mut zipf = Zipf::new(1_000_000, 1.1, 0).expect("valid Zipf");
    let mut ranks = vec![0u64; rows];
    zipf.fill(&mut ranks);
    let mut offsets = vec![0i32];
    let mut data = Vec::new();
    let mut views = Vec::with_capacity(rows);
    for &rank in &ranks {
        let key = format!("user_{rank}");
        let mut raw = [0u8; 16];
        raw[..4].copy_from_slice(&(key.len() as u32).to_le_bytes());
        raw[4..4 + key.len()].copy_from_slice(key.as_bytes());
        views.push(u128::from_le_bytes(raw));
        data.extend_from_slice(key.as_bytes());
        offsets.push(data.len() as i32);
    }
    Keys { ranks, offsets, data, views }
}
