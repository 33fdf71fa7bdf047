//! Buffers for routed worker ids, recycled from one routing call to the next.
//!
//! Routing 10^7 keys writes 40 MB of ids. A fresh block that size comes from the kernel:
//! glibc and jemalloc both map it anew (or purge a block they could reuse), and each of
//! its 10,000 pages then costs a page fault and a page clear on first write, which is
//! most of what routing 10^7 integer keys costs. A block the previous call released,
//! handed back through [`recycle_worker_ids`], is already mapped and in the cache.
//!
//! The pool keeps at most [`POOL_BUFFERS`] buffers and [`POOL_BYTES`] in all, each at
//! least [`MIN_POOLED_IDS`] ids long (small buffers are cheap to allocate). What it does
//! not keep goes back to the allocator.

use std::collections::VecDeque;
use std::sync::Mutex;

/// The most buffers the pool keeps.
pub const POOL_BUFFERS: usize = 4;
/// The most bytes the pool keeps, over all its buffers.
pub const POOL_BYTES: usize = 256 << 20;
/// Buffers shorter than this (1 MiB of ids) are not pooled.
pub const MIN_POOLED_IDS: usize = 1 << 18;

static POOL: Mutex<VecDeque<Vec<u32>>> = Mutex::new(VecDeque::new());

fn bytes(ids: &Vec<u32>) -> usize {
    ids.capacity() * std::mem::size_of::<u32>()
}

/// A buffer of `len` worker ids to route into.
///
/// A recycled buffer still holds the ids of its last routing, not zeros: every routing
/// writes each row of its output (`Grouper::route_batch`'s contract), so nothing stale is
/// ever read. The pool gives out the smallest buffer that fits and is at most twice `len`,
/// so that a small batch does not pin a large block.
pub fn worker_ids_buffer(len: usize) -> Vec<u32> {
    if len >= MIN_POOLED_IDS {
        let mut pool = POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let fitting = pool
            .iter()
            .enumerate()
            .filter(|(_, ids)| (len..=len.saturating_mul(2)).contains(&ids.capacity()))
            .min_by_key(|(_, ids)| ids.capacity())
            .map(|(index, _)| index);
        if let Some(mut ids) = fitting.and_then(|index| pool.remove(index)) {
            drop(pool);
            ids.truncate(len);
            ids.resize(len, 0);
            return ids;
        }
    }
    vec![0; len]
}

/// Hands a buffer from [`worker_ids_buffer`] back for a later routing, once nothing reads
/// it any more. The oldest buffers leave the pool first when it is full.
pub fn recycle_worker_ids(ids: Vec<u32>) {
    if ids.capacity() < MIN_POOLED_IDS || bytes(&ids) > POOL_BYTES {
        return;
    }
    let mut pool = POOL.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    pool.push_back(ids);
    while pool.len() > POOL_BUFFERS || pool.iter().map(bytes).sum::<usize>() > POOL_BYTES {
        pool.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test touches the process-wide pool, so that no other test races it.
    #[test]
    fn buffers_are_reused_within_bounds() {
        let len = 4 * MIN_POOLED_IDS;
        let ids = worker_ids_buffer(len);
        assert_eq!(ids.len(), len);
        let address = ids.as_ptr();
        recycle_worker_ids(ids);
        let again = worker_ids_buffer(len);
        assert_eq!(again.as_ptr(), address, "a recycled buffer is given out again");
        assert_eq!(again.len(), len);

        // A buffer more than twice the request stays in the pool, and a request too short
        // for the pool is not served from it.
        recycle_worker_ids(again);
        for short in [MIN_POOLED_IDS - 1, len / 2 - 1] {
            let small = worker_ids_buffer(short);
            assert_ne!(small.as_ptr(), address);
            assert!(small.iter().all(|&id| id == 0));
        }
        // A shorter request within a factor two gets it, cut to length.
        let shorter = worker_ids_buffer(len * 3 / 4);
        assert_eq!((shorter.as_ptr(), shorter.len()), (address, len * 3 / 4));

        // Small buffers are not kept; the pool holds at most POOL_BUFFERS.
        recycle_worker_ids(vec![7; 10]);
        for _ in 0..POOL_BUFFERS + 2 {
            recycle_worker_ids(vec![0; MIN_POOLED_IDS]);
        }
        let pool = POOL.lock().unwrap();
        assert_eq!(pool.len(), POOL_BUFFERS);
        assert!(pool.iter().all(|ids| ids.capacity() >= MIN_POOLED_IDS));
    }
}
