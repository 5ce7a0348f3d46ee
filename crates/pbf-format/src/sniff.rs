//! What a file that is not PBF probably is, from its first bytes, so that a
//! user who gives an `.osm`, `.osm.bz2` or `.o5m` file is told what it is and
//! how to get a PBF from it, instead of a BlobHeader length error.

/// Bytes [`identify`] looks at.
pub const SNIFF_LEN: usize = 16;

/// A kind of file that is not PBF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
}

impl NotPbf {
    /// What the file is, for a message: "OSM XML", "bzip2-compressed data".
    pub fn describe(self) -> String {
        match self {
            NotPbf::Xml => "OSM XML".to_owned(),
            NotPbf::Opl => "OPL text".to_owned(),
            NotPbf::O5m => "o5m".to_owned(),
            NotPbf::Compressed(how) => format!("{how}-compressed data"),
        }
    }
}

/// One line for an input `name` of this kind: what it is, and how to get a
/// PBF from it, as a command to paste. osmium converts XML, OPL and o5m
/// (told the format with `-F`, so the name's suffix does not matter); a
/// compressed input is decompressed first, into `pbf-sort -` when it holds
/// PBF, else into osmium (which reads no xz or zstd). Standard input (`-`
/// or `/dev/stdin`) and a pipe of the shell's (`/dev/fd/N`, from `<(...)`)
/// are streams, read once: the command starts with `... |`, the place of
/// whatever wrote them.
pub fn advice(kind: NotPbf, name: &str) -> String {
    let stream = name == "-" || name == "/dev/stdin" || name.starts_with("/dev/fd/");
    // What reads the input: NAME as an argument, or a pipe from "...".
    let (from, arg) = if stream {
        ("... | ".to_owned(), "-".to_owned())
    } else {
        (String::new(), shell_word(name))
    };
    let sort = "pbf-sort - -o OUT.osm.pbf";
    // osmium's name of the format (its -F).
    let convert = |format: &str| {
        format!("convert it: {from}osmium cat -F {format} {arg} -f pbf -o - | {sort}")
    };
    let how = match kind {
        NotPbf::Xml => convert("xml"),
        NotPbf::Opl => convert("opl"),
        NotPbf::O5m => convert("o5m"),
        NotPbf::Compressed(tool) => {
            let unpack = if stream {
                format!("{from}{tool} -dc")
            } else {
                format!("{tool} -dc {arg}")
            };
            format!(
                "if it holds PBF, decompress it: {unpack} | {sort}; \
                 if OSM XML: {unpack} | osmium cat -F xml - -f pbf -o - | {sort}"
            )
        }
    };
    format!("this is {}, not PBF: {how}", kind.describe())
}

/// `name` as one word of a shell command line that no command takes for
/// an option: as it is when it holds only characters no shell treats
/// specially, else in single quotes; `./` before a leading `-`.
fn shell_word(name: &str) -> String {
    let name = if name.starts_with('-') {
        format!("./{name}")
    } else {
        name.to_owned()
    };
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./+,:@%=".contains(c);
    if !name.is_empty() && name.chars().all(plain) {
        name
    } else {
        format!("'{}'", name.replace('\'', "'\\''"))
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

/// Whether `head`, a file's first bytes (at least 15 of them), starts a PBF
/// file: a BlobHeader length within the limit, then the BlobHeader of an
/// `OSMHeader` blob. For readers of JSON streams given a PBF file instead.
pub fn starts_like_pbf(head: &[u8]) -> bool {
    let Some((prefix, rest)) = head.split_first_chunk::<4>() else {
        return false;
    };
    u32::from_be_bytes(*prefix) <= crate::frame::MAX_HEADER_LEN
        && rest.starts_with(b"\x0a\x09OSMHeader")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pbf_start_is_told_from_text_and_other_frames() {
        assert!(starts_like_pbf(b"\0\0\0\x0d\x0a\x09OSMHeader\x18"));
        assert!(!starts_like_pbf(b"\0\0\0\x0d\x0a\x07OSMData\x18"));
        assert!(!starts_like_pbf(b"\0\x01\0\x01\x0a\x09OSMHeader"));
        assert!(!starts_like_pbf(b"{\"type\":\"source\""));
        assert!(!starts_like_pbf(b"\0\0\0"));
    }

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

    #[test]
    fn advice_is_a_command_for_a_file_or_for_a_stream() {
        let bz2 = NotPbf::Compressed("bzip2");
        assert_eq!(
            advice(bz2, "x.osm.pbf.bz2"),
            "this is bzip2-compressed data, not PBF: if it holds PBF, decompress it: \
             bzip2 -dc x.osm.pbf.bz2 | pbf-sort - -o OUT.osm.pbf; if OSM XML: bzip2 -dc \
             x.osm.pbf.bz2 | osmium cat -F xml - -f pbf -o - | pbf-sort - -o OUT.osm.pbf"
        );
        assert_eq!(
            advice(NotPbf::Xml, "/dev/stdin"),
            "this is OSM XML, not PBF: convert it: ... | osmium cat -F xml - -f pbf -o - | \
             pbf-sort - -o OUT.osm.pbf"
        );
        assert_eq!(
            advice(NotPbf::Compressed("zstd"), "-"),
            "this is zstd-compressed data, not PBF: if it holds PBF, decompress it: ... | \
             zstd -dc | pbf-sort - -o OUT.osm.pbf; if OSM XML: ... | zstd -dc | osmium cat \
             -F xml - -f pbf -o - | pbf-sort - -o OUT.osm.pbf"
        );
        assert!(advice(NotPbf::Xml, "/dev/fd/63").contains(": ... | osmium cat -F xml - -f"));
        assert!(advice(NotPbf::Opl, "my data/a.opl").contains("-F opl 'my data/a.opl' -f"));
        assert!(advice(NotPbf::O5m, "-x.o5m").contains("-F o5m ./-x.o5m -f"));
        assert!(advice(NotPbf::Xml, "it's.osm").contains(r"'it'\''s.osm'"));
    }
}
