//! What a file that is not PBF probably is, from its first bytes, so that a
//! user who gives an `.osm`, `.osm.bz2` or `.o5m` file is told what it is
//! instead of a BlobHeader length error (what to run then is the command
//! line's to say: `pbf-cli`).

use std::fmt;

/// Bytes [`identify`] looks at.
pub const SNIFF_LEN: usize = 16;

/// A kind of file that is not PBF, as far as its first bytes tell.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotPbf {
    /// OSM XML (`<?xml` or `<osm`).
    Xml,
    /// OPL text (`n1 v1 ...`).
    Opl,
    /// o5m or o5c (osmconvert's formats).
    O5m,
    /// A compressed file: bzip2, gzip, xz or zstd (often `.osm.bz2`,
    /// `.osm.gz`, `.pbf.gz`).
    Compressed(&'static str),
    /// An empty file.
    Empty,
    /// None of the above, and its first bytes cannot start a PBF frame:
    /// why not.
    Unknown(String),
}

/// What the file is, for a message: "this is OSM XML, not PBF".
impl fmt::Display for NotPbf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self {
            NotPbf::Xml => "OSM XML",
            NotPbf::Opl => "OPL text",
            NotPbf::O5m => "o5m",
            NotPbf::Compressed(how) => return write!(f, "this is {how}-compressed data, not PBF"),
            NotPbf::Empty => {
                return f.write_str("empty (0 bytes), not a PBF file: nothing to sort");
            }
            NotPbf::Unknown(why) => return write!(f, "unknown data, not a PBF file: {why}"),
        };
        write!(f, "this is {kind}, not PBF")
    }
}

/// The kind of file that starts with `head` (its first [`SNIFF_LEN`] bytes,
/// or all of a shorter file), when it is one of the common kinds that are
/// not PBF; `None` otherwise (a PBF file, or something unknown).
pub fn identify(head: &[u8]) -> Option<NotPbf> {
    const MAGICS: [(&[u8], &str); 4] = [
        (b"BZh", "bzip2"),
        (b"\x1f\x8b", "gzip"),
        (b"\xfd7zXZ\0", "xz"),
        (b"\x28\xb5\x2f\xfd", "zstd"),
    ];
    if let Some((_, how)) = MAGICS.iter().find(|(m, _)| head.starts_with(m)) {
        return Some(NotPbf::Compressed(how));
    }
    if head.starts_with(b"\xff\xe0\x04o5m2") || head.starts_with(b"\xff\xe0\x04o5c2") {
        return Some(NotPbf::O5m);
    }
    let text = head.strip_prefix(b"\xef\xbb\xbf").unwrap_or(head);
    let text = text.trim_ascii_start();
    if text.starts_with(b"<?xml") || text.starts_with(b"<osm") {
        return Some(NotPbf::Xml);
    }
    match text {
        [b'n' | b'w' | b'r' | b'c', d, ..] if d.is_ascii_digit() || *d == b'-' => Some(NotPbf::Opl),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_files_are_named() {
        let cases: [(&[u8], Option<NotPbf>); 10] = [
            (b"<?xml version='1.0'", Some(NotPbf::Xml)),
            (b"\n  <osm version=", Some(NotPbf::Xml)),
            (b"BZh91AY&SY", Some(NotPbf::Compressed("bzip2"))),
            (b"\x1f\x8b\x08\0", Some(NotPbf::Compressed("gzip"))),
            (b"\x28\xb5\x2f\xfd\x04", Some(NotPbf::Compressed("zstd"))),
            (b"\xff\xe0\x04o5m2\xff", Some(NotPbf::O5m)),
            (b"n1 v1 dV c1 t2020", Some(NotPbf::Opl)),
            (b"w-5 v0", Some(NotPbf::Opl)),
            (b"\0\0\0\x0d\x0a\x09OSMHeader", None),
            (b"", None),
        ];
        for (head, want) in cases {
            assert_eq!(identify(head), want, "{head:?}");
        }
    }
}
