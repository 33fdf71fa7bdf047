//! Snapshots: the whole state of a grouper or a sketch as bytes, restorable in another
//! process or by another release that reads the same format version.
//!
//! A grouper's routing table *is* operator state: a restarted operator whose grouper forgot
//! its table would send keys elsewhere and split their partial results. Restoring a
//! snapshot taken after routing a stream `a` and then routing `b` routes `b` exactly as
//! routing `a` then `b` without interruption would.
//!
//! # Format, version 1
//!
//! All integers little-endian.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `b"KSPLSNAP"` |
//! | 8 | 2 | format version, `1` |
//! | 10 | 8 | body length `len` |
//! | 18 | `len` | body: a [`Snapshot`] in the postcard wire format (postcard 1.x, whose format is specified and stable) |
//! | 18 + `len` | 8 | XXH3-64 (seed 0) of bytes `0 .. 18 + len` |
//!
//! The body names what it holds (`kind`: a grouper's registry name, or `sketch:<name>`),
//! the worker count, seed and effective parameters a grouper was built with, the version of
//! keysplit that wrote it (for messages only), and `state`, the postcard encoding of the
//! grouper's or sketch's own fields. Restoring rebuilds the grouper from its name, workers,
//! seed and parameters first, so a snapshot whose configuration is invalid is refused the
//! way an invalid constructor call is; then it decodes `state` into that grouper type.
//!
//! A change to any grouper's fields changes `state` and must come with a new format
//! version; a reader refuses versions it does not know rather than guess.

use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::error::ConfigError;
use crate::params::Params;

/// The format this release writes and reads.
pub const FORMAT_VERSION: u16 = 1;

const MAGIC: &[u8; 8] = b"KSPLSNAP";
const HEADER_BYTES: usize = 18;
const CHECKSUM_BYTES: usize = 8;

/// The prefix of a sketch's `kind`, so a sketch snapshot can never pass for a grouper's.
pub const SKETCH_KIND_PREFIX: &str = "sketch:";

/// The body of a snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// A grouper's registry name, or `sketch:<name>`.
    pub kind: String,
    pub workers: u32,
    pub seed: u64,
    /// The effective parameters, defaults included.
    pub params: Params,
    /// The keysplit version that wrote the snapshot.
    pub library: String,
    /// The postcard encoding of the grouper's or sketch's fields.
    #[serde(with = "byte_vec")]
    pub state: Vec<u8>,
}

/// A `Vec<u8>` field as serde bytes rather than a sequence of `u8`: postcard writes both
/// alike (a varint length, then the bytes), so the layout is unchanged, but bytes are read
/// and written at once where a sequence goes through serde byte by byte (most of the time
/// of restoring a snapshot with a HyperLogLog's registers in it).
pub(crate) mod byte_vec {
    use std::fmt;

    use serde::{Deserializer, Serializer, de};

    pub(crate) fn serialize<S: Serializer>(bytes: &[u8], serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(bytes)
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Vec<u8>, D::Error> {
        deserializer.deserialize_byte_buf(ByteVec)
    }

    struct ByteVec;

    impl<'de> de::Visitor<'de> for ByteVec {
        type Value = Vec<u8>;

        fn expecting(&self, formatter: &mut fmt::Formatter) -> fmt::Result {
            formatter.write_str("bytes")
        }

        fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> Result<Vec<u8>, E> {
            Ok(bytes.to_vec())
        }

        fn visit_byte_buf<E: de::Error>(self, bytes: Vec<u8>) -> Result<Vec<u8>, E> {
            Ok(bytes)
        }

        /// A self-describing format (JSON) may give the bytes as a sequence of numbers.
        fn visit_seq<A: de::SeqAccess<'de>>(self, mut sequence: A) -> Result<Vec<u8>, A::Error> {
            let mut bytes = Vec::with_capacity(sequence.size_hint().unwrap_or(0).min(1 << 16));
            while let Some(byte) = sequence.next_element()? {
                bytes.push(byte);
            }
            Ok(bytes)
        }
    }
}

/// A snapshot could not be written or read. Reading never panics, whatever the bytes.
#[derive(Clone, Debug, PartialEq)]
pub enum SnapshotError {
    Truncated { len: usize, needed: usize },
    NotASnapshot,
    UnsupportedVersion { found: u16 },
    Checksum { stored: u64, computed: u64 },
    TrailingBytes { extra: usize },
    Malformed { what: String, reason: String },
    WrongKind { expected: String, found: String },
    Config(ConfigError),
    Mismatch { kind: String, reason: String },
    Encode(String),
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Truncated { len, needed } => {
                write!(f, "snapshot is truncated: {len} bytes, needs at least {needed}")
            }
            SnapshotError::NotASnapshot => {
                write!(f, "these bytes are not a keysplit snapshot (no KSPLSNAP magic)")
            }
            SnapshotError::UnsupportedVersion { found } => write!(
                f,
                "snapshot format version {found} is not supported; this release reads version \
                 {FORMAT_VERSION}"
            ),
            SnapshotError::Checksum { stored, computed } => write!(
                f,
                "snapshot is corrupt: checksum {computed:#018x} does not match the stored \
                 {stored:#018x}"
            ),
            SnapshotError::TrailingBytes { extra } => {
                write!(f, "snapshot has {extra} unexpected bytes after its checksum")
            }
            SnapshotError::Malformed { what, reason } => {
                write!(f, "snapshot {what} cannot be decoded: {reason}")
            }
            SnapshotError::WrongKind { expected, found } => {
                write!(f, "snapshot holds {found:?}, not {expected}")
            }
            SnapshotError::Config(e) => write!(f, "snapshot configuration is invalid: {e}"),
            SnapshotError::Mismatch { kind, reason } => {
                write!(f, "snapshot state of {kind:?} does not match its header: {reason}")
            }
            SnapshotError::Encode(reason) => write!(f, "state cannot be snapshotted: {reason}"),
        }
    }
}

impl std::error::Error for SnapshotError {}

impl From<ConfigError> for SnapshotError {
    fn from(e: ConfigError) -> Self {
        SnapshotError::Config(e)
    }
}

impl Snapshot {
    /// Frames the body with the magic, version, length and checksum.
    pub fn encode(&self) -> Result<Vec<u8>, SnapshotError> {
        let body = postcard::to_allocvec(self).map_err(|e| SnapshotError::Encode(e.to_string()))?;
        let mut out = Vec::with_capacity(HEADER_BYTES + body.len() + CHECKSUM_BYTES);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&(body.len() as u64).to_le_bytes());
        out.extend_from_slice(&body);
        let checksum = xxhash_rust::xxh3::xxh3_64(&out);
        out.extend_from_slice(&checksum.to_le_bytes());
        Ok(out)
    }

    /// Checks the frame and decodes the body. The version is checked before the checksum,
    /// so that a newer format is reported as such and not as corruption.
    pub fn decode(bytes: &[u8]) -> Result<Self, SnapshotError> {
        let minimum = HEADER_BYTES + CHECKSUM_BYTES;
        if bytes.len() < MAGIC.len() || &bytes[..MAGIC.len()] != MAGIC {
            return Err(if bytes.len() < MAGIC.len() && MAGIC.starts_with(bytes) {
                SnapshotError::Truncated { len: bytes.len(), needed: minimum }
            } else {
                SnapshotError::NotASnapshot
            });
        }
        if bytes.len() < minimum {
            return Err(SnapshotError::Truncated { len: bytes.len(), needed: minimum });
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if version != FORMAT_VERSION {
            return Err(SnapshotError::UnsupportedVersion { found: version });
        }
        let mut length = [0u8; 8];
        length.copy_from_slice(&bytes[10..HEADER_BYTES]);
        let body_len = u64::from_le_bytes(length);
        let needed = usize::try_from(body_len)
            .ok()
            .and_then(|len| len.checked_add(minimum))
            .unwrap_or(usize::MAX);
        if bytes.len() < needed {
            return Err(SnapshotError::Truncated { len: bytes.len(), needed });
        }
        let body_end = needed - CHECKSUM_BYTES;
        let mut stored = [0u8; 8];
        stored.copy_from_slice(&bytes[body_end..needed]);
        let stored = u64::from_le_bytes(stored);
        let computed = xxhash_rust::xxh3::xxh3_64(&bytes[..body_end]);
        if stored != computed {
            return Err(SnapshotError::Checksum { stored, computed });
        }
        if bytes.len() > needed {
            return Err(SnapshotError::TrailingBytes { extra: bytes.len() - needed });
        }
        decode_exact("body", &bytes[HEADER_BYTES..body_end])
    }

    fn expect_kind(&self, expected: &str) -> Result<(), SnapshotError> {
        if self.kind == expected {
            Ok(())
        } else {
            Err(SnapshotError::WrongKind {
                expected: format!("{expected:?}"),
                found: self.kind.clone(),
            })
        }
    }
}

/// Decodes a whole buffer into `T`; bytes left over mean the buffer is not a `T`.
pub(crate) fn decode_exact<T: DeserializeOwned>(
    what: &str,
    bytes: &[u8],
) -> Result<T, SnapshotError> {
    let malformed = |reason: String| SnapshotError::Malformed { what: what.to_owned(), reason };
    let (value, rest) = postcard::take_from_bytes(bytes).map_err(|e| malformed(e.to_string()))?;
    if !rest.is_empty() {
        return Err(malformed(format!("{} bytes left over", rest.len())));
    }
    Ok(value)
}

pub(crate) fn encode_state<T: Serialize + ?Sized>(state: &T) -> Result<Vec<u8>, SnapshotError> {
    postcard::to_allocvec(state).map_err(|e| SnapshotError::Encode(e.to_string()))
}

/// Snapshot and restore for a sketch type, under kind `sketch:<NAME>`.
pub trait SketchSnapshot: Serialize + DeserializeOwned {
    const NAME: &'static str;

    fn snapshot(&self) -> Result<Vec<u8>, SnapshotError> {
        Snapshot {
            kind: format!("{SKETCH_KIND_PREFIX}{}", Self::NAME),
            workers: 0,
            seed: 0,
            params: Params::new(),
            library: env!("CARGO_PKG_VERSION").to_owned(),
            state: encode_state(self)?,
        }
        .encode()
    }

    fn restore(bytes: &[u8]) -> Result<Self, SnapshotError> {
        let snapshot = Snapshot::decode(bytes)?;
        snapshot.expect_kind(&format!("{SKETCH_KIND_PREFIX}{}", Self::NAME))?;
        let sketch: Self = decode_exact("state", &snapshot.state)?;
        sketch
            .validate()
            .map_err(|reason| SnapshotError::Mismatch { kind: snapshot.kind, reason })?;
        Ok(sketch)
    }

    /// Checks the decoded fields against each other, so that a restored sketch cannot
    /// panic later on state that no sequence of updates produces.
    fn validate(&self) -> Result<(), String>;
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    #[derive(Serialize, Deserialize, PartialEq, Debug)]
    struct AsBytes(#[serde(with = "super::byte_vec")] Vec<u8>);

    /// The layout of format version 1 holds: bytes encode as the sequence of `u8` did,
    /// and either decodes the other's encoding.
    #[test]
    fn byte_vec_encodes_as_a_sequence_of_bytes() {
        for bytes in
            [vec![], vec![0u8, 1, 0x7f, 0x80, 0xff], (0..=255u8).cycle().take(300).collect()]
        {
            let as_sequence = postcard::to_allocvec(&bytes).unwrap();
            let as_bytes = postcard::to_allocvec(&AsBytes(bytes.clone())).unwrap();
            assert_eq!(as_bytes, as_sequence);
            assert_eq!(
                postcard::from_bytes::<AsBytes>(&as_sequence).unwrap(),
                AsBytes(bytes.clone())
            );
            assert_eq!(postcard::from_bytes::<Vec<u8>>(&as_bytes).unwrap(), bytes);
            let json = serde_json::to_string(&AsBytes(bytes.clone())).unwrap();
            assert_eq!(serde_json::from_str::<AsBytes>(&json).unwrap(), AsBytes(bytes));
        }
        // A length past the end is an error, not a panic or a huge allocation.
        assert!(postcard::from_bytes::<AsBytes>(&[0xff, 0xff, 0xff, 0xff, 0x0f, 1, 2]).is_err());
    }
}
