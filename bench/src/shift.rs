//! Shifting the ids of an encoded PrimitiveBlock without decoding it into
//! elements: the wire bytes are walked and copied, and only id fields are
//! rewritten (node, way, relation and changeset ids; way refs and relation
//! member ids, which are delta-coded). `tile` encodes each chunk of its input
//! once and then rewrites it for every copy, so the cost of a copy is this
//! walk plus compression.

use anyhow::{Result, bail};
use pbf_format::Kind;
use pbf_format::wire::{self, Reader, Value, WireType};

/// Per-kind id shifts, indexed by [`Kind::index`].
pub type PerKind = [i64; 4];

/// Move an id away from zero by `by`: ids <= 0 keep their class and sort by
/// magnitude, so both classes keep their order under the shift.
pub fn shift_id(id: i64, by: i64) -> i64 {
    if id > 0 { id + by } else { id - by }
}

/// Rewrite a PrimitiveBlock with every id shifted by its kind's amount.
pub fn shift_block(block: &[u8], shift: &PerKind) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(block.len() + 64);
    let mut r = Reader::new(block);
    while let Some((n, v)) = r.field()? {
        match (n, v) {
            (2, Value::Bytes(g)) => wire::put_bytes(&mut out, 2, &shift_group(g, shift)?),
            _ => copy_field(&mut out, n, v)?,
        }
    }
    Ok(out)
}

fn shift_group(group: &[u8], shift: &PerKind) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(group.len() + 32);
    let mut r = Reader::new(group);
    while let Some((n, v)) = r.field()? {
        let Value::Bytes(m) = v else {
            copy_field(&mut out, n, v)?;
            continue;
        };
        let rewritten = match n {
            1 => shift_message(m, |f, v, out| match (f, v) {
                (1, Value::Varint(z)) => {
                    Some(put_sint(out, 1, shift_id(wire::decode_zigzag(z), shift[0])))
                }
                _ => None,
            })?,
            2 => shift_message(m, |f, v, out| match (f, v) {
                (1, Value::Bytes(ids)) => {
                    Some(put_deltas(out, 1, ids, |_, id| shift_id(id, shift[0])))
                }
                _ => None,
            })?,
            3 => shift_message(m, |f, v, out| match (f, v) {
                (1, Value::Varint(id)) => Some(put_int(out, 1, shift_id(id as i64, shift[1]))),
                (8, Value::Bytes(refs)) => {
                    Some(put_deltas(out, 8, refs, |_, id| shift_id(id, shift[0])))
                }
                _ => None,
            })?,
            4 => shift_relation(m, shift)?,
            5 => shift_message(m, |f, v, out| match (f, v) {
                (1, Value::Varint(id)) => Some(put_int(out, 1, shift_id(id as i64, shift[3]))),
                _ => None,
            })?,
            _ => m.to_vec(),
        };
        wire::put_bytes(&mut out, n, &rewritten);
    }
    Ok(out)
}

/// Copy a message, letting `patch` write the fields it knows (returning
/// `Some`); every other field is copied unchanged.
fn shift_message<F>(msg: &[u8], patch: F) -> Result<Vec<u8>>
where
    F: Fn(u32, Value<'_>, &mut Vec<u8>) -> Option<Result<()>>,
{
    let mut out = Vec::with_capacity(msg.len() + 16);
    let mut r = Reader::new(msg);
    while let Some((n, v)) = r.field()? {
        match patch(n, v, &mut out) {
            Some(done) => done?,
            None => copy_field(&mut out, n, v)?,
        }
    }
    Ok(out)
}

/// A relation: member ids are shifted by the kind of each member, so the
/// `types` field is read before `memids` is rewritten.
fn shift_relation(msg: &[u8], shift: &PerKind) -> Result<Vec<u8>> {
    let mut kinds = Vec::new();
    let mut r = Reader::new(msg);
    while let Some((n, v)) = r.field()? {
        if let (10, Value::Bytes(types)) = (n, v) {
            for t in wire::packed(types) {
                let k = Kind::from_index(u8::try_from(t?).unwrap_or(u8::MAX))
                    .filter(|k| *k != Kind::Changeset);
                let Some(k) = k else {
                    bail!("relation member type is not 0, 1 or 2")
                };
                kinds.push(k);
            }
        }
    }
    shift_message(msg, |f, v, out| match (f, v) {
        (1, Value::Varint(id)) => Some(put_int(out, 1, shift_id(id as i64, shift[2]))),
        (9, Value::Bytes(ids)) => Some(put_deltas(out, 9, ids, |i, id| {
            let by = kinds.get(i).map_or(0, |k| shift[k.index()]);
            shift_id(id, by)
        })),
        _ => None,
    })
}

fn copy_field(out: &mut Vec<u8>, n: u32, v: Value<'_>) -> Result<()> {
    match v {
        Value::Varint(x) => {
            wire::put_key(out, n, WireType::Varint);
            wire::put_varint(out, x);
        }
        Value::Bytes(b) => wire::put_bytes(out, n, b),
        Value::Fixed(_) => bail!("unexpected fixed-width field {n} in a PrimitiveBlock"),
    }
    Ok(())
}

fn put_sint(out: &mut Vec<u8>, n: u32, v: i64) -> Result<()> {
    wire::put_key(out, n, WireType::Varint);
    wire::put_varint(out, wire::encode_zigzag(v));
    Ok(())
}

fn put_int(out: &mut Vec<u8>, n: u32, v: i64) -> Result<()> {
    wire::put_key(out, n, WireType::Varint);
    wire::put_varint(out, v as u64);
    Ok(())
}

/// Rewrite a packed, delta-coded sint64 array: undo the deltas, map each
/// absolute value (with its position), and delta-code again.
fn put_deltas(
    out: &mut Vec<u8>,
    n: u32,
    packed: &[u8],
    map: impl Fn(usize, i64) -> i64,
) -> Result<()> {
    let mut buf = Vec::with_capacity(packed.len() + 8);
    let (mut prev_in, mut prev_out) = (0i64, 0i64);
    for (i, d) in wire::packed(packed).enumerate() {
        prev_in = prev_in.wrapping_add(wire::decode_zigzag(d?));
        let id = map(i, prev_in);
        wire::put_varint(&mut buf, wire::encode_zigzag(id.wrapping_sub(prev_out)));
        prev_out = id;
    }
    wire::put_bytes(out, n, &buf);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_format::block::{
        Element, EncodeOptions, Member, Node, Relation, Way, decode_block, encode_block,
    };
    use std::sync::Arc;

    #[test]
    fn shifting_keeps_both_id_classes_in_order() {
        let ids = [0i64, -1, -7, 1, 5];
        for by in [0i64, 10, 20] {
            let shifted: Vec<i64> = ids.iter().map(|&i| shift_id(i, by)).collect();
            assert_eq!(shifted[0].unsigned_abs(), by as u64);
            assert!(shifted[..3].iter().all(|&i| i <= 0));
            assert!(shifted[3..].iter().all(|&i| i > 0));
        }
    }

    fn elements(shift: &PerKind) -> Vec<Element> {
        let s = |id: i64, kind: Kind| shift_id(id, shift[kind.index()]);
        let node = |id| {
            Element::Node(Node {
                id: s(id, Kind::Node),
                info: None,
                lat: 100,
                lon: -200,
                tags: Vec::new(),
            })
        };
        vec![
            node(-3),
            node(0),
            node(4),
            node(9),
            Element::Way(Way {
                id: s(7, Kind::Way),
                info: None,
                tags: vec![(Arc::from(&b"k"[..]), Arc::from(&b"v"[..]))],
                refs: [4, -3, 9, 4].iter().map(|&r| s(r, Kind::Node)).collect(),
                locations: Vec::new(),
            }),
            Element::Relation(Relation {
                id: s(-2, Kind::Relation),
                info: None,
                tags: Vec::new(),
                members: [
                    (Kind::Way, 7),
                    (Kind::Node, 9),
                    (Kind::Relation, -2),
                    (Kind::Node, -3),
                ]
                .iter()
                .map(|&(kind, id)| Member {
                    kind,
                    id: s(id, kind),
                    role: Arc::from(&b"r"[..]),
                })
                .collect(),
            }),
        ]
    }

    #[test]
    fn rewritten_block_decodes_to_shifted_elements() {
        for dense in [true, false] {
            let opts = EncodeOptions {
                dense_nodes: dense,
                ..EncodeOptions::default()
            };
            let block = encode_block(&elements(&[0; 4]), &opts);
            let shift = [1000, 20, 300, 0];
            let got = decode_block(&shift_block(&block, &shift).expect("shift")).expect("decode");
            assert_eq!(got, elements(&shift), "dense {dense}");
        }
    }
}
