//! How many threads one large batch may use, for the groupers whose routing of a key does
//! not depend on the keys before it (KG: `h(k) mod n`), so that a batch can be cut into
//! parts routed at the same time with the same result.
//!
//! A batch of fewer than [`MIN_KEYS_PER_THREAD`] keys per thread stays on the caller's
//! thread: starting a thread costs tens of microseconds. At most
//! `std::thread::available_parallelism()` threads are used (it follows CPU affinity and
//! cgroup quotas), or `KEYSPLIT_MAX_THREADS` when set, as `POLARS_MAX_THREADS` caps
//! Polars. Inside [`route_sources`](crate::sources::route_sources), whose sources already
//! run on their own threads, every batch stays on its source's thread.

use std::cell::Cell;
use std::sync::OnceLock;

/// The fewest keys worth a thread of their own.
pub const MIN_KEYS_PER_THREAD: usize = 1 << 19;

/// The environment variable that caps the threads of one batch.
pub const MAX_THREADS_VAR: &str = "KEYSPLIT_MAX_THREADS";

thread_local! {
    static SINGLE_THREADED: Cell<bool> = const { Cell::new(false) };
}

fn max_threads() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        let available = std::thread::available_parallelism().map_or(1, usize::from);
        std::env::var(MAX_THREADS_VAR)
            .ok()
            .and_then(|value| value.trim().parse::<usize>().ok())
            .filter(|&cap| cap > 0)
            .unwrap_or(available)
    })
}

/// The threads a batch of `keys` keys gets: at least 1.
pub fn batch_threads(keys: usize) -> usize {
    if SINGLE_THREADED.get() {
        return 1;
    }
    (keys / MIN_KEYS_PER_THREAD).clamp(1, max_threads())
}

/// Runs `f` with every batch it routes on this thread alone.
pub fn single_threaded<T>(f: impl FnOnce() -> T) -> T {
    let before = SINGLE_THREADED.replace(true);
    let result = f();
    SINGLE_THREADED.set(before);
    result
}

/// Cuts `keys` rows into `parts` nearly equal, consecutive ranges, as `(start, len)`.
pub fn row_ranges(keys: usize, parts: usize) -> impl Iterator<Item = (usize, usize)> {
    let parts = parts.max(1);
    (0..parts).map(move |part| {
        let start = keys * part / parts;
        (start, keys * (part + 1) / parts - start)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_batches_and_source_threads_stay_on_one_thread() {
        assert_eq!(batch_threads(0), 1);
        assert_eq!(batch_threads(MIN_KEYS_PER_THREAD - 1), 1);
        assert!(batch_threads(usize::MAX) >= 1);
        assert!(batch_threads(usize::MAX) <= max_threads());
        assert_eq!(single_threaded(|| batch_threads(usize::MAX)), 1);
        assert_eq!(batch_threads(2 * MIN_KEYS_PER_THREAD), 2.min(max_threads()));
    }

    #[test]
    fn row_ranges_cover_every_row_once_in_order() {
        for (keys, parts) in [(0, 3), (10, 3), (7, 7), (5, 1), (1 << 20, 2)] {
            let ranges: Vec<_> = row_ranges(keys, parts).collect();
            assert_eq!(ranges.len(), parts);
            let mut next = 0;
            for (start, len) in ranges {
                assert_eq!(start, next);
                next += len;
            }
            assert_eq!(next, keys);
        }
    }
}
