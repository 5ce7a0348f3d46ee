//! A minimal protobuf wire reader for the hot paths that must not decode whole
//! messages: the BlobHeader walk and the key scan. Every read is bounds-checked
//! and returns an error on malformed input; nothing here can panic.

use crate::error::{Error, Result};

/// Protobuf wire types.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WireType {
    /// Varint (0).
    Varint,
    /// Fixed 64-bit (1).
    Fixed64,
    /// Length-delimited (2).
    Len,
    /// Fixed 32-bit (5).
    Fixed32,
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

    /// True when all bytes are consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// Read one varint.
    #[inline]
    pub fn varint(&mut self) -> Result<u64> {
        // Most varints in a block (deltas, string indexes) are one byte.
        if let Some(&b) = self.buf.get(self.pos) {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        self.varint_long()
    }

    fn varint_long(&mut self) -> Result<u64> {
        let mut value: u64 = 0;
        for shift in (0..70).step_by(7) {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(Error::malformed("truncated varint"));
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                return Err(Error::malformed("varint overflows 64 bits"));
            }
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(Error::malformed("varint longer than 10 bytes"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| Error::malformed("field runs past the end of its message"))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
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

fn le_u64(b: &[u8]) -> u64 {
    b.iter()
        .rev()
        .fold(0u64, |acc, &x| (acc << 8) | u64::from(x))
}

/// Zigzag-decode a `sint64`.
pub fn zigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Iterate a packed repeated varint field.
pub fn packed(bytes: &[u8]) -> impl Iterator<Item = Result<u64>> + '_ {
    let mut r = Reader::new(bytes);
    std::iter::from_fn(move || if r.is_empty() { None } else { Some(r.varint()) })
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

/// Append a varint to `out`.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Append a field key (number and wire type) to `out`.
pub fn put_key(out: &mut Vec<u8>, number: u32, wire: WireType) {
    let w = match wire {
        WireType::Varint => 0,
        WireType::Fixed64 => 1,
        WireType::Len => 2,
        WireType::Fixed32 => 5,
    };
    put_varint(out, (u64::from(number) << 3) | w);
}

/// Append a length-delimited field to `out`.
pub fn put_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    put_key(out, number, WireType::Len);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Zigzag-encode a `sint64`.
pub fn unzigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
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

    #[test]
    fn zigzag_round_trip() {
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -123456789] {
            assert_eq!(zigzag(unzigzag(v)), v);
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
