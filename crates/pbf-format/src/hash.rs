//! FxHash (the rustc hash) for the maps that deduplicate strings by content:
//! the encoder's string table and the merge's spill packets. Their keys come
//! from data being rewritten, not from an adversary choosing collisions, and
//! a collision costs only a comparison. Both maps hand out indexes in
//! insertion order, so the hash never shows in any output.

use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` builder with [`FxHasher`].
pub type FxBuild = BuildHasherDefault<FxHasher>;

/// One multiply per 8 bytes of key.
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(*chunk.first_chunk().unwrap_or(&[0; 8])));
        }
        // The length is hashed too (`Hash` for slices writes it first), so
        // the zero padding of the tail cannot make two strings equal.
        self.add(tail_word(chunks.remainder()));
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// The last 0-7 bytes of a key as a zero-padded little-endian word, read
/// with at most two loads instead of a copy of variable length.
#[inline]
fn tail_word(tail: &[u8]) -> u64 {
    let n = tail.len();
    match (tail.first_chunk::<4>(), tail.last_chunk::<4>()) {
        // 4-7 bytes: two overlapping 4-byte loads.
        (Some(lo), Some(hi)) => {
            u64::from(u32::from_le_bytes(*lo)) | u64::from(u32::from_le_bytes(*hi)) << (8 * (n - 4))
        }
        // 0-3 bytes: the first, middle and last (which may coincide).
        _ => match (tail.first(), tail.get(n / 2), tail.last()) {
            (Some(&a), Some(&b), Some(&c)) => {
                u64::from(a) | u64::from(b) << (8 * (n / 2)) | u64::from(c) << (8 * (n - 1))
            }
            _ => 0,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_word_is_the_zero_padded_tail() {
        let bytes = [1u8, 2, 3, 4, 5, 6, 7];
        for n in 0..=7 {
            let mut padded = [0u8; 8];
            padded[..n].copy_from_slice(&bytes[..n]);
            assert_eq!(
                tail_word(&bytes[..n]),
                u64::from_le_bytes(padded),
                "{n} bytes"
            );
        }
    }

    #[test]
    fn equal_strings_hash_equal_and_lengths_count() {
        use std::hash::BuildHasher;
        let hash = |s: &[u8]| FxBuild::default().hash_one(s);
        let elsewhere = String::from("highway");
        assert_eq!(hash(b"highway"), hash(elsewhere.as_bytes()));
        assert_ne!(hash(b"a"), hash(b"a\0"));
        assert_ne!(hash(b""), hash(b"\0"));
    }
}
