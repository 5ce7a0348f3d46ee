//! The blob and merge records as our writer (and `jq -c`, which keeps the
//! order of keys) writes them, read without serde. Blob records are nearly
//! every line of an index: 1.3 million for a planet, 2.4 million for a file
//! of small blobs, where serde's derive took 1.5 s of the planner's 3.2 s;
//! a merge op of a shuffled file of small blobs lists every blob in one
//! line (580,414 inputs, 101 MB), which the merge must read before it can
//! start. This reader takes only that exact form: the fields in the order
//! the record types declare them, the optional ones where the writer puts
//! them, no whitespace, plain strings, integers as the writer writes them.
//! On anything else it answers `None` and the line takes serde's path,
//! which reads every form and gives the errors; so it can only ever agree
//! with serde (property tests compare the two on written records and on
//! damaged ones). The merge op's inputs are written without serde too, in
//! that same form, which the tests compare with serde's.

use crate::ijson::{self, MAX_EXACT};
use pbf_format::Kind;
use pbf_format::compress::Codec;
use pbf_format::scan::Ties;

use crate::Counts;
use crate::records::{BlobRecord, KeyRecord, KeysFrom, MergeInput, MergeOp, codec_name};

/// The blob record on `line`, when it has exactly the written form.
pub(crate) fn blob(line: &[u8]) -> Option<BlobRecord> {
    let mut c = Cursor { rest: line };
    let seq = c.field(br#"{"type":"blob","seq":"#, Cursor::unsigned)?;
    let offset = c.field(br#","offset":"#, Cursor::unsigned)?;
    let length = c.field(br#","length":"#, Cursor::unsigned)?;
    let compression = Codec::from_name(c.field(br#","compression":"#, Cursor::string)?);
    let raw_size = c.optional(br#","raw_size":"#, Cursor::unsigned)?;
    let first = c.field(br#","first":"#, Cursor::key)?;
    let last = c.field(br#","last":"#, Cursor::key)?;
    let counts = c.field(br#","counts":"#, Cursor::counts)?;
    let sorted = c.field(br#","sorted":"#, Cursor::boolean)?;
    let repeats = c.take(br#","repeats":true"#);
    let versions_unsorted = c.take(br#","versions_unsorted":true"#);
    let duplicate_ids = c.optional(br#","duplicate_ids":"#, Cursor::unsigned)?;
    let negative_ids = c.take(br#","negative_ids":true"#);
    let ties = c.optional(br#","ties":{"first":"#, Cursor::ties)?;
    let from = match c.field(br#","from":"#, Cursor::string)? {
        "indexdata" => KeysFrom::Indexdata,
        "decoded" => KeysFrom::Decoded,
        _ => return None,
    };
    c.tag(b"}")?;
    c.rest.is_empty().then_some(BlobRecord {
        seq,
        offset,
        length,
        compression,
        raw_size,
        first,
        last,
        counts,
        sorted,
        repeats,
        versions_unsorted,
        duplicate_ids: duplicate_ids.unwrap_or(0),
        negative_ids,
        ties,
        from,
    })
}

/// The merge op on `line`, when it has exactly the written form.
pub(crate) fn merge(line: &[u8]) -> Option<MergeOp> {
    let mut c = Cursor { rest: line };
    c.tag(br#"{"type":"merge","inputs":["#)?;
    // A written input takes at least 150 bytes.
    let mut inputs = Vec::with_capacity(line.len() / 150 + 1);
    if !c.take(b"]") {
        loop {
            inputs.push(c.merge_input()?);
            if c.take(b"]") {
                break;
            }
            c.tag(b",")?;
        }
    }
    let first = c.field(br#","first":"#, Cursor::key)?;
    let last = c.field(br#","last":"#, Cursor::key)?;
    let elements = c.field(br#","elements":"#, Cursor::unsigned)?;
    c.tag(b"}")?;
    c.rest.is_empty().then_some(MergeOp {
        inputs,
        first,
        last,
        elements,
    })
}

/// Append the blob record `b` to `out` as serde writes it (with its
/// `type`), unless a key's id is beyond 2^53 in magnitude: then write
/// nothing and answer false.
pub(crate) fn write_blob(out: &mut Vec<u8>, b: &BlobRecord) -> bool {
    if !ijson::is_exact(b.first.id) || !ijson::is_exact(b.last.id) {
        return false;
    }
    number(out, br#"{"type":"blob","seq":"#, b.seq);
    number(out, br#","offset":"#, b.offset);
    number(out, br#","length":"#, b.length);
    out.extend_from_slice(br#","compression":""#);
    out.extend_from_slice(codec_name(b.compression).as_bytes());
    out.push(b'"');
    if let Some(raw) = b.raw_size {
        number(out, br#","raw_size":"#, raw);
    }
    out.extend_from_slice(br#","first":"#);
    write_key(out, b.first);
    out.extend_from_slice(br#","last":"#);
    write_key(out, b.last);
    number(out, br#","counts":{"node":"#, b.counts[Kind::Node]);
    number(out, br#","way":"#, b.counts[Kind::Way]);
    number(out, br#","relation":"#, b.counts[Kind::Relation]);
    if b.counts[Kind::Changeset] > 0 {
        number(out, br#","changeset":"#, b.counts[Kind::Changeset]);
    }
    out.extend_from_slice(match b.sorted {
        true => br#"},"sorted":true"#.as_slice(),
        false => br#"},"sorted":false"#.as_slice(),
    });
    if b.repeats {
        out.extend_from_slice(br#","repeats":true"#);
    }
    if b.versions_unsorted {
        out.extend_from_slice(br#","versions_unsorted":true"#);
    }
    if b.duplicate_ids > 0 {
        number(out, br#","duplicate_ids":"#, b.duplicate_ids);
    }
    if b.negative_ids {
        out.extend_from_slice(br#","negative_ids":true"#);
    }
    if let Some(ties) = b.ties {
        number(out, br#","ties":{"first":"#, u64::from(ties.first));
        number(out, br#","last":"#, u64::from(ties.last));
        out.push(b'}');
    }
    out.extend_from_slice(match b.from {
        KeysFrom::Indexdata => br#","from":"indexdata"}"#.as_slice(),
        KeysFrom::Decoded => br#","from":"decoded"}"#.as_slice(),
    });
    true
}

/// Append `input` to `out` as serde writes it, unless a key's id is beyond
/// 2^53 in magnitude (serde writes that as a string): then write nothing
/// and answer false.
pub(crate) fn write_merge_input(out: &mut Vec<u8>, input: &MergeInput) -> bool {
    if !ijson::is_exact(input.first.id) || !ijson::is_exact(input.last.id) {
        return false;
    }
    number(out, br#"{"source":"#, u64::from(input.source));
    number(out, br#","offset":"#, input.offset);
    number(out, br#","length":"#, input.length);
    out.extend_from_slice(br#","first":"#);
    write_key(out, input.first);
    out.extend_from_slice(br#","last":"#);
    write_key(out, input.last);
    out.extend_from_slice(match input.sorted {
        true => br#","sorted":true,"elements":"#.as_slice(),
        false => br#","sorted":false,"elements":"#.as_slice(),
    });
    decimal(out, input.elements);
    out.push(b'}');
    true
}

/// `{"kind":K,"id":I,"version":V}` of a key whose id is exact.
fn write_key(out: &mut Vec<u8>, k: KeyRecord) {
    out.extend_from_slice(br#"{"kind":""#);
    out.extend_from_slice(k.kind.name().as_bytes());
    out.extend_from_slice(br#"","id":"#);
    decimal(out, k.id);
    number(out, br#","version":"#, u64::from(k.version));
    out.push(b'}');
}

/// `tag`, then `n` in decimal digits.
fn number(out: &mut Vec<u8>, tag: &[u8], n: u64) {
    out.extend_from_slice(tag);
    decimal(out, n);
}

/// `n` in decimal digits, as serde_json writes it.
fn decimal(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// The unread rest of a line.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    /// Skip `tag` when the rest starts with it.
    fn take(&mut self, tag: &[u8]) -> bool {
        let rest = self.rest.strip_prefix(tag);
        self.rest = rest.unwrap_or(self.rest);
        rest.is_some()
    }

    /// Skip `tag`, which must come next, then read what follows it.
    fn field<T>(&mut self, tag: &[u8], read: impl FnOnce(&mut Self) -> Option<T>) -> Option<T> {
        self.tag(tag)?;
        read(self)
    }

    /// When `tag` comes next, skip it and read what follows it (`None`
    /// when that fails); else `Some(None)`.
    fn optional<T>(
        &mut self,
        tag: &[u8],
        read: impl FnOnce(&mut Self) -> Option<T>,
    ) -> Option<Option<T>> {
        match self.take(tag) {
            true => read(self).map(Some),
            false => Some(None),
        }
    }

    /// Skip `tag`, which must come next.
    fn tag(&mut self, tag: &[u8]) -> Option<()> {
        self.take(tag).then_some(())
    }

    /// Digits as JSON writes an integer: no sign, no leading zero, no
    /// fraction or exponent after them (serde would read a float there).
    fn unsigned(&mut self) -> Option<u64> {
        let digits = self.rest.iter().take_while(|b| b.is_ascii_digit()).count();
        let (number, rest) = self.rest.split_at(digits);
        if digits == 0 || (digits > 1 && number[0] == b'0') {
            return None;
        }
        if matches!(rest.first(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let mut n: u64 = 0;
        for &d in number {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        self.rest = rest;
        Some(n)
    }

    /// An id written as a number (at most 2^53 in magnitude; a larger one
    /// is a string, which serde reads).
    fn id(&mut self) -> Option<i64> {
        let negative = self.take(b"-");
        let n = i64::try_from(self.unsigned()?).ok()?;
        if n > MAX_EXACT || (negative && n == 0) {
            return None;
        }
        Some(if negative { -n } else { n })
    }

    /// A string without escapes or control characters.
    fn string(&mut self) -> Option<&'a str> {
        let body = self.rest.strip_prefix(b"\"")?;
        let len = body.iter().position(|&b| b == b'"')?;
        let (text, rest) = body.split_at(len);
        if text.iter().any(|&b| b == b'\\' || b < 0x20) {
            return None;
        }
        self.rest = &rest[1..];
        std::str::from_utf8(text).ok()
    }

    fn boolean(&mut self) -> Option<bool> {
        let t = self.take(b"true");
        (t || self.take(b"false")).then_some(t)
    }

    /// A kind's name as a string.
    fn kind(&mut self) -> Option<Kind> {
        let name = self.string()?;
        Kind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// One input of a merge op, as [`MergeInput`] declares its fields.
    fn merge_input(&mut self) -> Option<MergeInput> {
        let source = u32::try_from(self.field(br#"{"source":"#, Cursor::unsigned)?).ok()?;
        let offset = self.field(br#","offset":"#, Cursor::unsigned)?;
        let length = self.field(br#","length":"#, Cursor::unsigned)?;
        let first = self.field(br#","first":"#, Cursor::key)?;
        let last = self.field(br#","last":"#, Cursor::key)?;
        let sorted = self.field(br#","sorted":"#, Cursor::boolean)?;
        let elements = self.field(br#","elements":"#, Cursor::unsigned)?;
        self.tag(b"}")?;
        Some(MergeInput {
            source,
            offset,
            length,
            first,
            last,
            sorted,
            elements,
        })
    }

    /// The rest of `{"first":S,"last":S}` after `{"first":`.
    fn ties(&mut self) -> Option<Ties> {
        let first = u32::try_from(self.unsigned()?).ok()?;
        let last = u32::try_from(self.field(br#","last":"#, Cursor::unsigned)?).ok()?;
        self.tag(b"}")?;
        Some(Ties { first, last })
    }

    /// `{"kind":K,"id":I,"version":V}`.
    fn key(&mut self) -> Option<KeyRecord> {
        let kind = self.field(br#"{"kind":"#, Cursor::kind)?;
        let id = self.field(br#","id":"#, Cursor::id)?;
        let version = u32::try_from(self.field(br#","version":"#, Cursor::unsigned)?).ok()?;
        self.tag(b"}")?;
        Some(KeyRecord { kind, id, version })
    }

    /// `{"node":N,"way":N,"relation":N}` and `,"changeset":N` before the
    /// brace when there are any, as [`Counts`] writes them.
    fn counts(&mut self) -> Option<Counts> {
        let node = self.field(br#"{"node":"#, Cursor::unsigned)?;
        let way = self.field(br#","way":"#, Cursor::unsigned)?;
        let relation = self.field(br#","relation":"#, Cursor::unsigned)?;
        let changeset = self
            .optional(br#","changeset":"#, Cursor::unsigned)?
            .unwrap_or(0);
        self.tag(b"}")?;
        Some(Counts::from_array([node, way, relation, changeset]))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::records::IndexRecord;
    use pbf_format::Key;
    use proptest::prelude::*;

    fn written(b: &BlobRecord) -> Vec<u8> {
        serde_json::to_vec(&IndexRecord::Blob(b.clone())).expect("serialise")
    }

    fn serde_blob(line: &[u8]) -> Option<BlobRecord> {
        serde_json::from_slice::<BlobRecord>(line).ok()
    }

    fn key() -> impl Strategy<Value = KeyRecord> {
        let id = prop_oneof![
            -1000i64..1000,
            any::<i64>(),
            Just(MAX_EXACT),
            Just(-MAX_EXACT),
            Just(MAX_EXACT + 1)
        ];
        (0..4u8, id, any::<u32>()).prop_map(|(k, id, version)| {
            let kind = Kind::from_index(k).unwrap_or(Kind::Node);
            KeyRecord::from(Key::new(kind, id, version))
        })
    }

    fn blob_record() -> impl Strategy<Value = BlobRecord> {
        let numbers = (
            any::<u64>(),
            any::<u64>(),
            0..u64::MAX,
            any::<Option<u64>>(),
        );
        let counts = prop::array::uniform4(prop_oneof![0..10u64, any::<u64>()]);
        let codec = prop::option::of(prop::sample::select(Codec::ALL.to_vec()));
        let ties = prop::option::of((any::<u32>(), any::<u32>()));
        let flags = (0..4u8, any::<bool>(), codec, ties);
        (numbers, key(), key(), counts, flags).prop_map(
            |((seq, offset, length, raw_size), first, last, counts, (flag, from, comp, ties))| {
                BlobRecord {
                    seq,
                    offset,
                    length,
                    compression: comp,
                    raw_size,
                    first,
                    last,
                    counts: Counts::from_array(counts),
                    sorted: flag == 1,
                    repeats: flag == 2,
                    versions_unsorted: flag == 3,
                    duplicate_ids: counts[0] % 3,
                    negative_ids: counts[1] % 2 == 1,
                    ties: ties.map(|(first, last)| Ties { first, last }),
                    from: if from {
                        KeysFrom::Indexdata
                    } else {
                        KeysFrom::Decoded
                    },
                }
            },
        )
    }

    proptest! {
        /// Every record the writer writes takes the fast path and reads back.
        #[test]
        fn written_records_read_back(b in blob_record()) {
            let line = written(&b);
            let fast = blob(&line);
            // Ids beyond 2^53 are strings, which only serde reads.
            let exact = ijson::is_exact(b.first.id)
                && ijson::is_exact(b.last.id);
            prop_assert_eq!(fast.is_some(), exact, "{}", String::from_utf8_lossy(&line));
            if let Some(fast) = fast {
                prop_assert_eq!(fast, b);
            }
        }

        /// A blob record written without serde is written as serde writes
        /// it, or not at all when an id is a string.
        #[test]
        fn blob_records_are_written_as_serde_writes_them(b in blob_record()) {
            written_as_serde(|out| write_blob(out, &b), [b.first, b.last], written(&b))?;
        }

        /// A damaged line is read by the fast path only as serde reads it.
        #[test]
        fn damaged_lines_read_as_serde_reads_them(b in blob_record(), edits in edits()) {
            let line = damaged(written(&b), edits);
            if let Some(fast) = blob(&line) {
                prop_assert_eq!(Some(fast), serde_blob(&line), "{}", String::from_utf8_lossy(&line));
            }
        }

        /// Every merge op the writer writes takes the fast path and reads
        /// back.
        #[test]
        fn written_merge_ops_read_back(m in merge_op()) {
            let line = written_merge(&m);
            // `Writer::write_merge` writes what serde writes for the op.
            let serde = serde_json::to_vec(&crate::PlanRecord::Merge(m.clone())).expect("serialise");
            prop_assert_eq!(&line, &serde);
            let fast = merge(&line);
            let keys = m.inputs.iter().flat_map(|i| [i.first, i.last]).chain([m.first, m.last]);
            let exact = keys.into_iter().all(|k| ijson::is_exact(k.id));
            prop_assert_eq!(fast.is_some(), exact, "{}", String::from_utf8_lossy(&line));
            if let Some(fast) = fast {
                prop_assert_eq!(fast, m);
            }
        }

        /// A merge input written without serde is written as serde writes
        /// it, or not at all when an id is a string.
        #[test]
        fn merge_inputs_are_written_as_serde_writes_them(m in merge_op()) {
            for input in &m.inputs {
                let serde = serde_json::to_vec(input).expect("serialise");
                let write = |out: &mut Vec<u8>| write_merge_input(out, input);
                written_as_serde(write, [input.first, input.last], serde)?;
            }
        }

        /// A damaged merge op is read by the fast path only as serde reads it.
        #[test]
        fn damaged_merge_ops_read_as_serde_reads_them(m in merge_op(), edits in edits()) {
            let line = damaged(written_merge(&m), edits);
            if let Some(fast) = merge(&line) {
                let serde = serde_json::from_slice::<MergeOp>(&line).ok();
                prop_assert_eq!(Some(fast), serde, "{}", String::from_utf8_lossy(&line));
            }
        }
    }

    /// `write` writes what serde wrote (`serde`), or nothing when one of
    /// `keys` has an id that only serde writes (a string).
    fn written_as_serde(
        write: impl FnOnce(&mut Vec<u8>) -> bool,
        keys: [KeyRecord; 2],
        serde: Vec<u8>,
    ) -> Result<(), TestCaseError> {
        let exact = keys.iter().all(|k| ijson::is_exact(k.id));
        let mut out = Vec::new();
        prop_assert_eq!(write(&mut out), exact);
        match exact {
            true => prop_assert_eq!(out, serde),
            false => prop_assert!(out.is_empty()),
        }
        Ok(())
    }

    /// Up to three byte edits: (where, byte, replace / insert / remove).
    fn edits() -> impl Strategy<Value = Vec<(prop::sample::Index, u8, u8)>> {
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0..3u8), 1..4)
    }

    fn damaged(mut line: Vec<u8>, edits: Vec<(prop::sample::Index, u8, u8)>) -> Vec<u8> {
        for (at, byte, how) in edits {
            let i = at.index(line.len() + 1);
            match how {
                0 if i < line.len() => line[i] = byte,
                1 => line.insert(i, byte),
                _ if i < line.len() => {
                    line.remove(i);
                }
                _ => {}
            }
        }
        line
    }

    /// A merge op as [`crate::Writer::write_merge`] writes it.
    fn written_merge(m: &MergeOp) -> Vec<u8> {
        let mut w = crate::Writer::new(Vec::new());
        w.write_merge(m.first, m.last, m.elements, m.inputs.iter().cloned())
            .expect("write");
        let mut line = w.finish().expect("finish");
        assert_eq!(line.pop(), Some(b'\n'));
        line
    }

    fn merge_op() -> impl Strategy<Value = MergeOp> {
        let input = (
            any::<u32>(),
            any::<u64>(),
            any::<u64>(),
            key(),
            key(),
            any::<bool>(),
            any::<u64>(),
        )
            .prop_map(|(source, offset, length, first, last, sorted, elements)| {
                MergeInput {
                    source,
                    offset,
                    length,
                    first,
                    last,
                    sorted,
                    elements,
                }
            });
        (
            prop::collection::vec(input, 0..4),
            key(),
            key(),
            any::<u64>(),
        )
            .prop_map(|(inputs, first, last, elements)| MergeOp {
                inputs,
                first,
                last,
                elements,
            })
    }

    #[test]
    fn merge_ops_in_other_forms_take_serde_s_path() {
        let key = |id| KeyRecord::from(Key::new(Kind::Node, id, 1));
        let m = MergeOp {
            inputs: vec![MergeInput {
                source: 0,
                offset: 10,
                length: 20,
                first: key(-5),
                last: key(7),
                sorted: true,
                elements: 3,
            }],
            first: key(-5),
            last: key(7),
            elements: 3,
        };
        let line = String::from_utf8(written_merge(&m)).expect("utf-8");
        assert_eq!(merge(line.as_bytes()), Some(m.clone()));
        for (other, same) in [
            (line.replace(r#""offset":10"#, r#""offset":1e1"#), false),
            (
                line.replace(r#""source":0"#, r#""source":4294967296"#),
                false,
            ),
            (line.replace(r#""id":-5,"#, r#""id":"-5","#), true),
            (line.replace(r#","sorted""#, r#", "sorted""#), true),
            (
                line.replace(r#""elements":3}"#, r#""elements":3,"future":1}"#),
                true,
            ),
            (line.replace("}],", "},],"), false),
        ] {
            assert_eq!(merge(other.as_bytes()), None, "{other}");
            let serde = serde_json::from_slice::<MergeOp>(other.as_bytes()).ok();
            assert_eq!(serde.is_some_and(|s| s == m), same, "{other}");
        }
    }

    #[test]
    fn other_forms_take_serde_s_path() {
        let b = BlobRecord {
            seq: 1,
            offset: 2,
            length: 3,
            compression: Some(Codec::Zlib),
            raw_size: None,
            first: KeyRecord::from(Key::new(Kind::Node, -5, 1)),
            last: KeyRecord::from(Key::new(Kind::Way, 7, 2)),
            counts: Counts::from_array([1, 1, 0, 0]),
            sorted: true,
            repeats: false,
            versions_unsorted: false,
            duplicate_ids: 0,
            negative_ids: false,
            ties: Some(Ties { first: 4, last: 5 }),
            from: KeysFrom::Decoded,
        };
        let line = String::from_utf8(written(&b)).expect("utf-8");
        assert_eq!(blob(line.as_bytes()), Some(b.clone()));
        // (line, whether serde reads it as the same record)
        for (other, same) in [
            (line.replace(r#""seq":1"#, r#""seq":1.0"#), false),
            (line.replace(r#""seq":1"#, r#""seq":01"#), false),
            (line.replace(r#""id":-5"#, r#""id":"-5""#), true),
            (line.replace(r#""zlib""#, r#""zl\u0069b""#), true),
            (line.replace(r#","sorted""#, r#", "sorted""#), true),
            (line.replace(r#""last":5}"#, r#""last":5.0}"#), false),
            (
                line.replace(r#"{"first":4,"#, r#"{"last":5,"first":4,"#)
                    .replace(r#","last":5}"#, "}"),
                true,
            ),
            (line.replace(r#""way":1,"#, r#""way":1,"area":0,"#), true),
            (
                line.replace(r#""decoded"}"#, r#""decoded","future":1}"#),
                true,
            ),
            (line.clone() + " ", true),
        ] {
            assert_eq!(blob(other.as_bytes()), None, "{other}");
            assert_eq!(
                serde_blob(other.as_bytes()).is_some_and(|s| s == b),
                same,
                "{other}"
            );
        }
    }
}
