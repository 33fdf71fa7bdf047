//! keysplit-core: key groupers that split hot keys of a skewed stream over several workers,
//! trading load imbalance against the cost of merging partial results.
//!
//! Pure Rust, no Python. The groupers route key bytes (see [`hash`] for how a key becomes
//! bytes and a hash, frozen across releases); [`keys::KeyBatch`] reads Arrow buffers without
//! copying them; [`loads::LoadVector`] holds lock-free per-worker load counters.
//!
//! ```
//! use keysplit_core::registry::build;
//! let mut pkg = build("pkg", 8, 1, &Default::default(), None).unwrap().grouper;
//! let worker = pkg.route(keysplit_core::Key::Bytes(b"apple"));
//! assert!(worker < 8);
//! ```

pub mod error;
pub mod grouper;
pub mod groupers;
pub mod hash;
pub mod keys;
pub mod loads;
pub mod min_tree;
pub mod parallel;
pub mod params;
pub mod registry;
pub mod rng;
pub mod sketches;
pub mod snapshot;
pub mod sources;
pub mod streams;
pub mod worker_ids;

pub use error::{ConfigError, RouteError};
pub use grouper::{Grouper, GrouperInfo, NullPolicy, route_batch};
pub use hash::Key;
pub use keys::{KeyBatch, KeyLabel, KeyValues, OwnedKey};
pub use loads::{LoadScope, LoadVector};
pub use registry::{GrouperInstance, build, registry};
pub use snapshot::{SketchSnapshot, Snapshot, SnapshotError};
