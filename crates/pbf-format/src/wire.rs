//! A minimal protobuf wire reader for the hot paths that must not decode whole
//! messages: the BlobHeader walk and the key scan. Every read is bounds-checked
//! and returns an error on malformed input; nothing here can panic.
//!
//! The `try_` reads are the same reads returning `Option`, for the key scan's
//! fast path: a `Result` carries the large [`Error`] and is returned through
//! memory, an `Option` in registers. They fail exactly where the checked
//! reads fail, so a caller can re-read with those to learn why.

use crate::error::{Error, Result};

/// The protobuf wire types that fields are written with.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WireType {
    /// Varint (0).
    Varint = 0,
    /// Length-delimited (2).
    Len = 2,
}

/// A field key as it sits on the wire, as [`Reader::try_varint`] reads it:
/// the field number shifted left by three, or-ed with the wire type. The
/// fast scan compares keys undecoded, then reads the value with
/// [`Reader::try_varint`] or [`Reader::try_bytes`], or passes the key to
/// [`Reader::try_skip`], which checks number and wire type as
/// [`Reader::field`] does.
pub const fn tag(number: u32, wire: WireType) -> u64 {
    ((number as u64) << 3) | wire as u64
}

/// A field value as it sits on the wire.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    /// A varint, undecoded (apply zigzag yourself for sint types).
    Varint(u64),
    /// A fixed-width value.
    Fixed(u64),
    /// A length-delimited payload.
    Bytes(&'a [u8]),
}

/// A cursor over one message's bytes.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// The bytes not yet read.
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }

    /// How many bytes were read.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// True when all bytes are consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Read one varint.
    #[inline]
    pub fn varint(&mut self) -> Result<u64> {
        self.try_varint().ok_or_else(|| varint_error(self.rest()))
    }

    /// One varint, or `None` where [`Reader::varint`] fails.
    #[inline(always)]
    pub fn try_varint(&mut self) -> Option<u64> {
        // Most varints in a block (deltas, string indexes) are one byte.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Some(u64::from(b));
            }
        }
        let (value, len) = varint_long(self.rest());
        if len == 0 {
            return None;
        }
        self.pos += len;
        Some(value)
    }

    /// A length-delimited value, or `None` where [`Reader::field`] fails on it.
    #[inline]
    pub fn try_bytes(&mut self) -> Option<&'a [u8]> {
        let len = usize::try_from(self.try_varint()?).ok()?;
        self.try_take(len)
    }

    /// Skip the value of a field with the given key (see [`tag`]), or `None`
    /// where [`Reader::field`] fails on that key or value.
    #[inline(always)]
    pub fn try_skip(&mut self, tag: u64) -> Option<()> {
        // Field numbers run from 1 to u32::MAX.
        if !(8..1 << 35).contains(&tag) {
            return None;
        }
        match tag & 7 {
            0 => self.try_varint().map(drop),
            1 => self.try_take(8).map(drop),
            2 => self.try_bytes().map(drop),
            5 => self.try_take(4).map(drop),
            _ => None,
        }
    }

    /// The next `n` bytes, or `None` when fewer are left.
    #[inline]
    pub fn try_take(&mut self, n: usize) -> Option<&'a [u8]> {
        let s = self.rest().get(..n)?;
        self.pos += n;
        Some(s)
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        self.try_take(n)
            .ok_or_else(|| Error::malformed("field runs past the end of its message"))
    }

    /// Read the next field: its number and value. `None` at the end.
    pub fn field(&mut self) -> Result<Option<(u32, Value<'a>)>> {
        if self.is_empty() {
            return Ok(None);
        }
        let tag = self.varint()?;
        let number =
            u32::try_from(tag >> 3).map_err(|_| Error::malformed("field number too large"))?;
        if number == 0 {
            return Err(Error::malformed("field number 0"));
        }
        let value = match tag & 7 {
            0 => Value::Varint(self.varint()?),
            1 => Value::Fixed(le_u64(self.take(8)?)),
            2 => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| Error::malformed("length does not fit in memory"))?;
                Value::Bytes(self.take(len)?)
            }
            5 => Value::Fixed(le_u64(self.take(4)?)),
            w => return Err(Error::malformed(format!("unsupported wire type {w}"))),
        };
        Ok(Some((number, value)))
    }
}

/// Why the varint at the start of `b` does not decode. A varint ends at the
/// first byte below 0x80 and takes at most ten bytes, the tenth holding only
/// bit 63: with ten bytes at hand it fails only when the tenth is above 1,
/// with fewer only when no byte ends it.
#[cold]
fn varint_error(b: &[u8]) -> Error {
    if b.len() >= 10 {
        Error::malformed("varint overflows 64 bits")
    } else {
        Error::malformed("truncated varint")
    }
}

/// Decode the varint at the start of `b`: its value and length, or length 0
/// where it does not decode (truncated, or a tenth byte above 1). Returns a
/// pair rather than an `Option` so that it comes back in two registers.
#[inline(never)]
fn varint_long(b: &[u8]) -> (u64, usize) {
    let mut value: u64 = 0;
    for (i, &byte) in b.iter().enumerate().take(10) {
        if i == 9 {
            // The tenth byte holds bit 63 only.
            return match byte {
                0 | 1 => (value | (u64::from(byte) << 63), 10),
                _ => (0, 0),
            };
        }
        value |= u64::from(byte & 0x7f) << (7 * i);
        if byte < 0x80 {
            return (value, i + 1);
        }
    }
    (0, 0)
}

fn le_u64(b: &[u8]) -> u64 {
    b.iter()
        .rev()
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

/// Zigzag-decode a `sint64`.
pub fn decode_zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Zigzag-decode a `sint32`, as protobuf does: from the low 32 bits.
pub fn decode_zigzag32(v: u64) -> i32 {
    let v = v as u32;
    ((v >> 1) as i32) ^ -((v & 1) as i32)
}

/// Iterate a packed repeated varint field.
pub fn packed(bytes: &[u8]) -> impl Iterator<Item = Result<u64>> + '_ {
    let mut r = Reader::new(bytes);
    std::iter::from_fn(move || if r.is_empty() { None } else { Some(r.varint()) })
}

/// Call `f` with every value of a repeated varint field, packed or not.
pub fn each_varint(v: Value<'_>, what: &str, mut f: impl FnMut(u64)) -> Result<()> {
    match v {
        Value::Varint(x) => f(x),
        Value::Bytes(b) => {
            let mut r = Reader::new(b);
            while !r.is_empty() {
                f(r.varint()?);
            }
        }
        Value::Fixed(_) => {
            return Err(Error::malformed(format!(
                "{what}: expected a varint or packed field"
            )));
        }
    }
    Ok(())
}

/// The payload of a length-delimited field, or an error naming the field.
pub fn expect_bytes<'a>(v: Value<'a>, what: &str) -> Result<&'a [u8]> {
    match v {
        Value::Bytes(b) => Ok(b),
        _ => Err(Error::malformed(format!(
            "{what}: expected a length-delimited field"
        ))),
    }
}

/// The value of a varint field, or an error naming the field.
pub fn expect_varint(v: Value<'_>, what: &str) -> Result<u64> {
    match v {
        Value::Varint(x) => Ok(x),
        _ => Err(Error::malformed(format!("{what}: expected a varint field"))),
    }
}

/// Append a varint to `out` (byte by byte: a slice copy of a few bytes
/// would be a `memcpy` call).
#[inline]
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    out.reserve(10);
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Append a field key (number and wire type) to `out`.
pub fn put_key(out: &mut Vec<u8>, number: u32, wire: WireType) {
    put_varint(out, tag(number, wire));
}

/// Append a varint field to `out`.
pub fn put_varint_field(out: &mut Vec<u8>, number: u32, v: u64) {
    put_key(out, number, WireType::Varint);
    put_varint(out, v);
}

/// Append a length-delimited field to `out`.
pub fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_key(out, number, WireType::Len);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Zigzag-encode a `sint64`.
pub fn encode_zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Zigzag-encode a `sint32`.
pub fn encode_zigzag32(v: i32) -> u64 {
    u64::from(((v << 1) ^ (v >> 31)) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trip() {
        for v in [0u64, 1, 127, 128, 300, u64::MAX, 1 << 63] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            assert_eq!(Reader::new(&b).varint().ok(), Some(v));
        }
    }

    /// A plain reference varint decoder (a `Result` per read, a bounds check
    /// per byte): the value and length, or the error message.
    fn reference_varint(b: &[u8]) -> std::result::Result<(u64, usize), String> {
        let mut value: u64 = 0;
        for (i, shift) in (0..70).step_by(7).enumerate() {
            let Some(&byte) = b.get(i) else {
                return Err("truncated varint".into());
            };
            if shift == 63 && byte > 1 {
                return Err("varint overflows 64 bits".into());
            }
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok((value, i + 1));
            }
        }
        Err("varint longer than 10 bytes".into())
    }

    /// `varint`, `try_varint` and `try_skip` of a varint field on `b`, checked
    /// against each other and against the reference decoder.
    fn assert_varint_agrees(b: &[u8]) {
        let expected = reference_varint(b);
        let mut r = Reader::new(b);
        let got = r
            .varint()
            .map(|v| (v, b.len() - r.rest().len()))
            .map_err(|e| e.to_string());
        assert_eq!(got, expected, "varint of {b:02x?}");
        let mut r = Reader::new(b);
        let tried = r.try_varint().map(|v| (v, b.len() - r.rest().len()));
        assert_eq!(tried, expected.clone().ok(), "try_varint of {b:02x?}");
        let mut r = Reader::new(b);
        let skipped = r
            .try_skip(tag(1, WireType::Varint))
            .map(|()| b.len() - r.rest().len());
        assert_eq!(
            skipped,
            expected.ok().map(|(_, len)| len),
            "skip of {b:02x?}"
        );
    }

    #[test]
    fn varint_edge_cases_agree_with_the_reference() {
        // Every length up to 11 bytes, overlong encodings (0x80 runs, a zero
        // last byte), a tenth byte of 0, 1 and 2, with 0 to 10 bytes after
        // it, and each cut before its last byte (truncated).
        for filler in [0x80u8, 0xff] {
            for len in 0..=11 {
                for last in [0x00u8, 0x01, 0x02, 0x7f] {
                    for tail in 0..=10 {
                        let mut b = vec![filler; len];
                        b.push(last);
                        b.extend(std::iter::repeat_n(0xffu8, tail));
                        assert_varint_agrees(&b);
                        assert_varint_agrees(&b[..len]);
                    }
                }
            }
        }
        let mut b = Vec::new();
        put_varint(&mut b, u64::MAX);
        assert_eq!(reference_varint(&b), Ok((u64::MAX, 10)));
        assert_varint_agrees(&b);
    }

    proptest::proptest! {
        #[test]
        fn varint_agrees_with_the_reference(
            b in proptest::collection::vec(
                proptest::prop_oneof![4 => 0x80u8..=0xff, 1 => 0u8..=2, 1 => proptest::num::u8::ANY],
                0..16,
            ),
        ) {
            assert_varint_agrees(&b);
        }

        /// Reading a message with `try_varint` and `try_skip` stops where
        /// `field` fails and passes the same fields where it does not.
        #[test]
        fn try_reads_fail_where_field_fails(
            b in proptest::collection::vec(
                proptest::prop_oneof![
                    2 => proptest::num::u8::ANY,
                    1 => 0u8..=16,
                    1 => proptest::sample::select(vec![0x08u8, 0x0a, 0x09, 0x0d, 0x80, 0xff]),
                ],
                0..40,
            ),
        ) {
            let mut checked = Vec::new();
            let mut r = Reader::new(&b);
            let checked_ok = loop {
                match r.field() {
                    Ok(Some((n, _))) => checked.push((u64::from(n), r.rest().len())),
                    Ok(None) => break true,
                    Err(_) => break false,
                }
            };
            let mut tried = Vec::new();
            let mut r = Reader::new(&b);
            let tried_ok = loop {
                if r.is_empty() {
                    break true;
                }
                let Some(t) = r.try_varint() else { break false };
                if r.try_skip(t).is_none() {
                    break false;
                }
                tried.push((t >> 3, r.rest().len()));
            };
            proptest::prop_assert_eq!((checked_ok, checked), (tried_ok, tried));
        }
    }

    #[test]
    fn tags_are_keys_on_the_wire() {
        let mut b = Vec::new();
        put_key(&mut b, 5, WireType::Len);
        assert_eq!(Reader::new(&b).try_varint(), Some(tag(5, WireType::Len)));
        assert_eq!(tag(2, WireType::Len), 0x12);
        // Field number 0, and one above u32::MAX, are errors.
        assert_eq!(Reader::new(&[0x05, 0, 0, 0, 0]).try_skip(5), None);
        assert_eq!(Reader::new(&[0]).try_skip(1 << 35), None);
        assert_eq!(Reader::new(&[0]).try_skip((1 << 35) - 8), Some(()));
    }

    #[test]
    fn zigzag32_round_trip() {
        for v in [0i32, -1, 1, i32::MIN, i32::MAX, -123456] {
            assert_eq!(decode_zigzag32(encode_zigzag32(v)), v);
        }
        // Only the low 32 bits count, as in protobuf's sint32.
        assert_eq!(decode_zigzag32((1 << 32) | 3), -2);
    }

    #[test]
    fn encoded_len_varint_is_what_put_varint_writes() {
        for shift in 0..64 {
            for v in [1u64 << shift, (1u64 << shift) - 1, u64::MAX >> shift] {
                let mut out = Vec::new();
                put_varint(&mut out, v);
                let len = prost::encoding::encoded_len_varint(v);
                assert_eq!(len, out.len(), "{v}");
            }
        }
    }

    #[test]
    fn zigzag_round_trip() {
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -123456789] {
            assert_eq!(decode_zigzag(encode_zigzag(v)), v);
        }
    }

    #[test]
    fn malformed_is_an_error() {
        assert!(Reader::new(&[0x80]).varint().is_err());
        assert!(Reader::new(&[0xff; 11]).varint().is_err());
        // field 1, length 5, but only 1 byte follows
        assert!(Reader::new(&[0x0a, 0x05, 0x00]).field().is_err());
        assert!(Reader::new(&[0x0b]).field().is_err()); // wire type 3
    }

    #[test]
    fn fields() {
        let mut b = Vec::new();
        put_key(&mut b, 1, WireType::Varint);
        put_varint(&mut b, 42);
        put_bytes(&mut b, 2, b"hi");
        let mut r = Reader::new(&b);
        assert!(matches!(
            r.field().ok().flatten(),
            Some((1, Value::Varint(42)))
        ));
        assert!(matches!(
            r.field().ok().flatten(),
            Some((2, Value::Bytes(b"hi")))
        ));
        assert!(matches!(r.field(), Ok(None)));
    }
}
