//! Borrowed, zero-copy views of a batch of keys in the Arrow memory layouts.
//!
//! The core does not depend on Arrow: a binding hands it the raw buffers of an Arrow array
//! (or a NumPy buffer) and a [`KeyBatch`] validates them once, so that iteration can never
//! read out of bounds, whatever the caller passed.

use std::fmt;

use crate::hash::{INLINE_KEY_MAX_LEN, InlineKey, Key, NULL_KEY};

/// Why a set of buffers does not form a valid key batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidKeys(pub String);

impl fmt::Display for InvalidKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid key buffers: {}", self.0)
    }
}

impl std::error::Error for InvalidKeys {}

/// The values of a key column, in one of the Arrow layouts keysplit reads.
#[derive(Clone, Debug)]
pub enum KeyValues<'a> {
    Int8(&'a [i8]),
    Int16(&'a [i16]),
    Int32(&'a [i32]),
    Int64(&'a [i64]),
    UInt8(&'a [u8]),
    UInt16(&'a [u16]),
    UInt32(&'a [u32]),
    UInt64(&'a [u64]),
    /// `string` / `binary`: `len + 1` offsets into `data`.
    Offsets32 {
        offsets: &'a [i32],
        data: &'a [u8],
    },
    /// `large_string` / `large_binary`.
    Offsets64 {
        offsets: &'a [i64],
        data: &'a [u8],
    },
    /// `string_view` / `binary_view`: 16-byte views into `buffers`.
    Views {
        views: &'a [u128],
        buffers: Vec<&'a [u8]>,
    },
    /// Owned keys, for keys that arrive one by one (e.g. as Python objects).
    Owned(&'a [OwnedKey]),
}

/// A key that owns its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OwnedKey {
    Int(u64),
    Bytes(Vec<u8>),
}

impl OwnedKey {
    #[inline]
    pub fn as_key(&self) -> Key<'_> {
        match self {
            OwnedKey::Int(value) => Key::Int(*value),
            OwnedKey::Bytes(bytes) => Key::Bytes(bytes),
        }
    }
}

/// A key with the type its caller gave it, which [`OwnedKey`] forgets: routing reads a
/// string and its UTF-8 bytes as one key, and a negative integer as its two's complement.
/// Sketches that report keys back keep this.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum KeyLabel {
    Null,
    Signed(i64),
    Unsigned(u64),
    Text(String),
    Bytes(Vec<u8>),
}

impl KeyLabel {
    /// The fingerprint routing gives this key; a null key has [`NULL_KEY`]'s.
    pub fn fingerprint(&self) -> u64 {
        crate::hash::fingerprint(match self {
            KeyLabel::Null => NULL_KEY,
            KeyLabel::Signed(v) => Key::Int(*v as u64),
            KeyLabel::Unsigned(v) => Key::Int(*v),
            KeyLabel::Text(s) => Key::Bytes(s.as_bytes()),
            KeyLabel::Bytes(b) => Key::Bytes(b),
        })
    }
}

/// A validity bitmap in Arrow's LSB bit order: bit `offset + i` set means row `i` is valid.
#[derive(Clone, Copy, Debug)]
pub struct Validity<'a> {
    bits: &'a [u8],
    offset: usize,
}

impl Validity<'_> {
    #[inline]
    fn is_valid(&self, row: usize) -> bool {
        let bit = self.offset + row;
        self.bits[bit / 8] & (1 << (bit % 8)) != 0
    }
}

/// A validated batch of keys, optionally with nulls.
///
/// A null key is yielded as `None`; what happens to it is the caller's policy.
#[derive(Clone, Debug)]
pub struct KeyBatch<'a> {
    values: KeyValues<'a>,
    len: usize,
    validity: Option<Validity<'a>>,
}

fn view_parts(view: u128) -> (u32, u32, u32) {
    let length = view as u32;
    let buffer = (view >> 64) as u32;
    let offset = (view >> 96) as u32;
    (length, buffer, offset)
}

fn check_offsets<O: Copy + TryInto<usize> + fmt::Debug>(
    offsets: &[O],
    data_len: usize,
) -> Result<usize, InvalidKeys> {
    if offsets.is_empty() {
        return Ok(0);
    }
    let mut previous = 0usize;
    for (i, &o) in offsets.iter().enumerate() {
        let position: usize =
            o.try_into().map_err(|_| InvalidKeys(format!("offset {i} is negative ({o:?})")))?;
        if i > 0 && position < previous {
            return Err(InvalidKeys(format!("offsets decrease at index {i}")));
        }
        if position > data_len {
            return Err(InvalidKeys(format!(
                "offset {i} ({position}) is past the end of the data ({data_len} bytes)"
            )));
        }
        previous = position;
    }
    Ok(offsets.len() - 1)
}

fn check_views(views: &[u128], buffers: &[&[u8]]) -> Result<(), InvalidKeys> {
    for (row, &view) in views.iter().enumerate() {
        let (length, buffer, offset) = view_parts(view);
        if length as usize <= INLINE_KEY_MAX_LEN {
            continue;
        }
        let data = buffers.get(buffer as usize).ok_or_else(|| {
            InvalidKeys(format!("view {row} names data buffer {buffer}, of {}", buffers.len()))
        })?;
        let end = offset as usize + length as usize;
        if end > data.len() {
            return Err(InvalidKeys(format!(
                "view {row} ends at byte {end}, past its buffer of {} bytes",
                data.len()
            )));
        }
    }
    Ok(())
}

impl<'a> KeyBatch<'a> {
    /// Validates `values` and builds a batch without nulls.
    pub fn new(values: KeyValues<'a>) -> Result<Self, InvalidKeys> {
        let len = match &values {
            KeyValues::Int8(v) => v.len(),
            KeyValues::Int16(v) => v.len(),
            KeyValues::Int32(v) => v.len(),
            KeyValues::Int64(v) => v.len(),
            KeyValues::UInt8(v) => v.len(),
            KeyValues::UInt16(v) => v.len(),
            KeyValues::UInt32(v) => v.len(),
            KeyValues::UInt64(v) => v.len(),
            KeyValues::Offsets32 { offsets, data } => check_offsets(offsets, data.len())?,
            KeyValues::Offsets64 { offsets, data } => check_offsets(offsets, data.len())?,
            KeyValues::Views { views, buffers } => {
                check_views(views, buffers)?;
                views.len()
            }
            KeyValues::Owned(v) => v.len(),
        };
        Ok(Self { values, len, validity: None })
    }

    /// Attaches an Arrow validity bitmap that starts at bit `offset`.
    pub fn with_validity(mut self, bits: &'a [u8], offset: usize) -> Result<Self, InvalidKeys> {
        let needed_bits = offset
            .checked_add(self.len)
            .ok_or_else(|| InvalidKeys("validity offset overflows".into()))?;
        if bits.len() * 8 < needed_bits {
            return Err(InvalidKeys(format!(
                "validity bitmap has {} bits, {needed_bits} needed",
                bits.len() * 8
            )));
        }
        self.validity = Some(Validity { bits, offset });
        Ok(self)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Rows `start..start + len`, without copying; the range must lie inside the batch.
    pub fn rows(&self, start: usize, len: usize) -> KeyBatch<'a> {
        self.split_at(start).1.split_at(len).0
    }

    /// Rows `..mid` and rows `mid..`, without copying or validating again: the halves of a
    /// valid batch are valid. `mid` must be at most `len()`.
    pub fn split_at(&self, mid: usize) -> (KeyBatch<'a>, KeyBatch<'a>) {
        assert!(mid <= self.len, "split at {mid} of a batch of {} keys", self.len);
        macro_rules! halves {
            ($variant:ident, $v:expr) => {{
                let (head, tail) = $v.split_at(mid);
                (KeyValues::$variant(head), KeyValues::$variant(tail))
            }};
        }
        let (head, tail) = match &self.values {
            KeyValues::Int8(v) => halves!(Int8, v),
            KeyValues::Int16(v) => halves!(Int16, v),
            KeyValues::Int32(v) => halves!(Int32, v),
            KeyValues::Int64(v) => halves!(Int64, v),
            KeyValues::UInt8(v) => halves!(UInt8, v),
            KeyValues::UInt16(v) => halves!(UInt16, v),
            KeyValues::UInt32(v) => halves!(UInt32, v),
            KeyValues::UInt64(v) => halves!(UInt64, v),
            KeyValues::Owned(v) => halves!(Owned, v),
            // A batch of no rows may have no offsets at all; a split then has none either.
            KeyValues::Offsets32 { offsets, data } if !offsets.is_empty() => (
                KeyValues::Offsets32 { offsets: &offsets[..=mid], data },
                KeyValues::Offsets32 { offsets: &offsets[mid..], data },
            ),
            KeyValues::Offsets64 { offsets, data } if !offsets.is_empty() => (
                KeyValues::Offsets64 { offsets: &offsets[..=mid], data },
                KeyValues::Offsets64 { offsets: &offsets[mid..], data },
            ),
            values @ (KeyValues::Offsets32 { .. } | KeyValues::Offsets64 { .. }) => {
                (values.clone(), values.clone())
            }
            KeyValues::Views { views, buffers } => {
                let (head, tail) = views.split_at(mid);
                (
                    KeyValues::Views { views: head, buffers: buffers.clone() },
                    KeyValues::Views { views: tail, buffers: buffers.clone() },
                )
            }
        };
        let tail_validity =
            self.validity.map(|v| Validity { bits: v.bits, offset: v.offset + mid });
        (
            KeyBatch { values: head, len: mid, validity: self.validity },
            KeyBatch { values: tail, len: self.len - mid, validity: tail_validity },
        )
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The number of null keys.
    pub fn null_count(&self) -> usize {
        match &self.validity {
            None => 0,
            Some(v) => (0..self.len).filter(|&row| !v.is_valid(row)).count(),
        }
    }

    /// Calls `f(row, key)` for every row in order; `key` is `None` for a null.
    #[inline]
    pub fn for_each<F: FnMut(usize, Option<Key<'_>>)>(&self, mut f: F) {
        self.visit(&mut f);
    }

    /// Hands every row in order to `visitor`; `key` is `None` for a null.
    ///
    /// Each layout gets its own loop. The visitor's method is `#[inline(always)]` where it
    /// matters (see [`KeyVisitor`]), so that the loop and the routing compile into one.
    #[inline]
    pub fn visit<V: KeyVisitor>(&self, visitor: &mut V) {
        match self.validity {
            None => self.visit_values(&mut AllValid(visitor)),
            Some(validity) => self.visit_values(&mut Masked { validity, visitor }),
        }
    }

    /// Hands every row to `sink`, reading the values under nulls as if valid.
    #[inline(always)]
    fn visit_values<S: ValueSink>(&self, sink: &mut S) {
        // Integers widen to 64 bits: sign-extended when signed, zero-extended otherwise.
        macro_rules! widened {
            ($values:expr, $widen:ty) => {
                for (row, &v) in $values.iter().enumerate() {
                    sink.value(row, Key::Int(<$widen>::from(v) as u64));
                }
            };
        }
        match &self.values {
            KeyValues::Int8(v) => widened!(v, i64),
            KeyValues::Int16(v) => widened!(v, i64),
            KeyValues::Int32(v) => widened!(v, i64),
            KeyValues::Int64(v) => widened!(v, i64),
            KeyValues::UInt8(v) => widened!(v, u64),
            KeyValues::UInt16(v) => widened!(v, u64),
            KeyValues::UInt32(v) => widened!(v, u64),
            KeyValues::UInt64(v) => widened!(v, u64),
            KeyValues::Offsets32 { offsets, data } => {
                for (row, pair) in offsets.windows(2).enumerate() {
                    sink.value(row, Key::Bytes(&data[pair[0] as usize..pair[1] as usize]));
                }
            }
            KeyValues::Offsets64 { offsets, data } => {
                for (row, pair) in offsets.windows(2).enumerate() {
                    sink.value(row, Key::Bytes(&data[pair[0] as usize..pair[1] as usize]));
                }
            }
            KeyValues::Views { views, buffers } => {
                for (row, &view) in views.iter().enumerate() {
                    if let Some(inline) = InlineKey::from_view(view) {
                        sink.value(row, Key::Inline(inline));
                    } else {
                        let (length, buffer, offset) = view_parts(view);
                        let start = offset as usize;
                        let data = &buffers[buffer as usize][start..start + length as usize];
                        sink.value(row, Key::Bytes(data));
                    }
                }
            }
            KeyValues::Owned(v) => {
                for (row, key) in v.iter().enumerate() {
                    sink.value(row, key.as_key());
                }
            }
        }
    }
}

/// Receives the rows of a [`KeyBatch`], in order.
///
/// A trait rather than a closure: a closure called from every layout's loop is too big a
/// callee for the compiler to inline at each call, and the per-key call then costs more
/// than routing. An implementation that routes marks `visit` `#[inline(always)]`.
pub trait KeyVisitor {
    fn visit(&mut self, row: usize, key: Option<Key<'_>>);
}

impl<F: FnMut(usize, Option<Key<'_>>)> KeyVisitor for F {
    #[inline]
    fn visit(&mut self, row: usize, key: Option<Key<'_>>) {
        self(row, key)
    }
}

/// The values of the rows, before the validity bitmap is applied.
trait ValueSink {
    fn value(&mut self, row: usize, key: Key<'_>);
}

struct AllValid<'v, V>(&'v mut V);

impl<V: KeyVisitor> ValueSink for AllValid<'_, V> {
    #[inline(always)]
    fn value(&mut self, row: usize, key: Key<'_>) {
        self.0.visit(row, Some(key));
    }
}

struct Masked<'a, 'v, V> {
    validity: Validity<'a>,
    visitor: &'v mut V,
}

impl<V: KeyVisitor> ValueSink for Masked<'_, '_, V> {
    #[inline(always)]
    fn value(&mut self, row: usize, key: Key<'_>) {
        self.visitor.visit(row, self.validity.is_valid(row).then_some(key));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(batch: &KeyBatch<'_>) -> Vec<Option<OwnedKey>> {
        let mut out = Vec::new();
        batch.for_each(|_, k| {
            out.push(k.map(|k| match k {
                Key::Int(v) => OwnedKey::Int(v),
                key => OwnedKey::Bytes(key.to_bytes()),
            }))
        });
        out
    }

    fn inline_view(bytes: &[u8]) -> u128 {
        let mut raw = [0u8; 16];
        raw[..4].copy_from_slice(&(bytes.len() as u32).to_le_bytes());
        raw[4..4 + bytes.len()].copy_from_slice(bytes);
        u128::from_le_bytes(raw)
    }

    fn buffer_view(len: u32, buffer: u32, offset: u32) -> u128 {
        u128::from(len) | (u128::from(buffer) << 64) | (u128::from(offset) << 96)
    }

    #[test]
    fn every_layout_yields_the_same_logical_keys() {
        let offsets32 = [0, 2, 2, 15];
        let offsets64 = [0_i64, 2, 2, 15];
        let data = b"abthirteen bytes";
        let long = &data[2..15];
        let views = [inline_view(b"ab"), inline_view(b""), buffer_view(13, 0, 2)];
        let owned = vec![
            OwnedKey::Bytes(b"ab".to_vec()),
            OwnedKey::Bytes(vec![]),
            OwnedKey::Bytes(long.to_vec()),
        ];
        let expected: Vec<_> = owned.iter().cloned().map(Some).collect();
        for values in [
            KeyValues::Offsets32 { offsets: &offsets32, data },
            KeyValues::Offsets64 { offsets: &offsets64, data },
            KeyValues::Views { views: &views, buffers: vec![data] },
            KeyValues::Owned(&owned),
        ] {
            assert_eq!(collect(&KeyBatch::new(values).unwrap()), expected);
        }
    }

    #[test]
    fn a_split_batch_yields_the_rows_of_the_whole_in_two_parts() {
        let offsets32 = [0, 2, 2, 15];
        let offsets64 = [0_i64, 2, 2, 15];
        let data = b"abthirteen bytes";
        let views = [inline_view(b"ab"), inline_view(b""), buffer_view(13, 0, 2)];
        let owned = vec![OwnedKey::Int(1), OwnedKey::Bytes(vec![]), OwnedKey::Int(3)];
        let bits = [0b0000_1010_u8];
        for values in [
            KeyValues::Offsets32 { offsets: &offsets32, data },
            KeyValues::Offsets64 { offsets: &offsets64, data },
            KeyValues::Views { views: &views, buffers: vec![data] },
            KeyValues::Owned(&owned),
            KeyValues::Int16(&[5, -6, 7]),
        ] {
            let plain = KeyBatch::new(values).unwrap();
            let masked = plain.clone().with_validity(&bits, 1).unwrap();
            for batch in [plain, masked] {
                let whole = collect(&batch);
                for mid in 0..=3 {
                    let (head, tail) = batch.split_at(mid);
                    assert_eq!((head.len(), tail.len()), (mid, 3 - mid));
                    let mut parts = collect(&head);
                    parts.extend(collect(&tail));
                    assert_eq!(parts, whole, "split at {mid}");
                    assert_eq!(head.null_count() + tail.null_count(), batch.null_count());
                }
                assert_eq!(collect(&batch.rows(1, 2)), whole[1..3]);
            }
        }
        let empty = KeyBatch::new(KeyValues::Offsets32 { offsets: &[], data: b"" }).unwrap();
        let (head, tail) = empty.split_at(0);
        assert!(head.is_empty() && tail.is_empty());
    }

    #[test]
    fn integers_widen_to_64_bits() {
        let narrow = KeyBatch::new(KeyValues::Int32(&[-1, 7])).unwrap();
        let wide = KeyBatch::new(KeyValues::Int64(&[-1, 7])).unwrap();
        let unsigned = KeyBatch::new(KeyValues::UInt64(&[u64::MAX, 7])).unwrap();
        assert_eq!(collect(&narrow), collect(&wide));
        assert_eq!(collect(&wide), collect(&unsigned));
        let small = KeyBatch::new(KeyValues::UInt8(&[255])).unwrap();
        assert_eq!(collect(&small), vec![Some(OwnedKey::Int(255))]);
    }

    #[test]
    fn nulls_come_from_the_bitmap_with_its_offset() {
        let bits = [0b1111_0110_u8];
        let batch = KeyBatch::new(KeyValues::UInt8(&[1, 2, 3])).unwrap();
        let batch = batch.with_validity(&bits, 1).unwrap();
        assert_eq!(batch.null_count(), 1);
        let keys = collect(&batch);
        assert!(keys[0].is_some() && keys[1].is_some() && keys[2].is_none());
    }

    #[test]
    fn corrupt_buffers_are_rejected_not_read() {
        let data = b"abc";
        assert!(KeyBatch::new(KeyValues::Offsets32 { offsets: &[0, 4], data }).is_err());
        assert!(KeyBatch::new(KeyValues::Offsets32 { offsets: &[2, 1], data }).is_err());
        assert!(KeyBatch::new(KeyValues::Offsets64 { offsets: &[-1, 1], data }).is_err());
        let views = [buffer_view(20, 0, 0)];
        assert!(KeyBatch::new(KeyValues::Views { views: &views, buffers: vec![data] }).is_err());
        let views = [buffer_view(13, 3, 0)];
        assert!(KeyBatch::new(KeyValues::Views { views: &views, buffers: vec![] }).is_err());
        let batch = KeyBatch::new(KeyValues::UInt8(&[1; 9])).unwrap();
        assert!(batch.with_validity(&[0xff], 0).is_err());
    }
}
