//! The sort key: the single definition of `Sort.Type_then_ID` order that every
//! tool uses. It is osmium's order (`object_order_type_id_version`): type
//! (node < way < relation < changeset), then ids <= 0 before positive ids,
//! each class by absolute value, then version.
//!
//! Objects with equal keys (the same version of one object, more than once)
//! are ordered as `osmium sort` orders them: by timestamp ([`tie_seconds`]),
//! then in input order. osmium compares timestamps only when both are set,
//! which is not a strict weak order once a tie mixes set and unset ones; here
//! an unset timestamp (0) sorts before every set one, which agrees with
//! osmium on every tie whose timestamps are all set or all unset.

use std::cmp::Ordering;
use std::fmt;

/// The kind of an OSM object, in sort order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
#[cfg_attr(
    feature = "serde",
    derive(serde::Serialize, serde::Deserialize),
    serde(rename_all = "lowercase")
)]
pub enum Kind {
    /// A node.
    Node = 0,
    /// A way.
    Way = 1,
    /// A relation.
    Relation = 2,
    /// A changeset (rare in PBF; sorts after relations).
    Changeset = 3,
}

impl Kind {
    /// All kinds in sort order.
    pub const ALL: [Kind; 4] = [Kind::Node, Kind::Way, Kind::Relation, Kind::Changeset];

    /// The lower-case name used in the JSONL streams.
    pub fn name(self) -> &'static str {
        ["node", "way", "relation", "changeset"][self.index()]
    }

    /// The kind with a given index (0..=3).
    pub fn from_index(i: u8) -> Option<Kind> {
        Kind::ALL.get(usize::from(i)).copied()
    }

    /// This kind's index (0..=3).
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The sort key of one object version.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Key {
    /// Object kind.
    pub kind: Kind,
    /// Object id as stored (may be zero or negative).
    pub id: i64,
    /// Object version (0 when the file carries none).
    pub version: u32,
}

impl Key {
    /// A key.
    pub fn new(kind: Kind, id: i64, version: u32) -> Key {
        Key { kind, id, version }
    }

    /// The key packed into one integer whose natural order is the sort order:
    /// kind (2 bits), positive-id flag (1 bit), |id| (64 bits), version (32 bits).
    pub fn packed(&self) -> u128 {
        let positive = u128::from(self.id > 0);
        (u128::from(self.kind as u8) << 97)
            | (positive << 96)
            | (u128::from(self.id.unsigned_abs()) << 32)
            | u128::from(self.version)
    }

    /// Whether `other` is a version of the same object (kind and id).
    pub fn same_object(&self, other: &Key) -> bool {
        (self.kind, self.id) == (other.kind, other.id)
    }

    /// The key a packed key came from (inverse of [`Key::packed`]).
    pub fn from_packed(packed: u128) -> Key {
        let kind = Kind::from_index(((packed >> 97) & 3) as u8).unwrap_or(Kind::Changeset);
        let magnitude = (packed >> 32) as u64;
        let id = match (packed >> 96) & 1 {
            1 => magnitude as i64,
            _ => 0i64.wrapping_sub(magnitude as i64),
        };
        Key::new(kind, id, packed as u32)
    }
}

/// The timestamp that orders equal keys: seconds since the epoch as osmium
/// holds them (an unsigned 32-bit count, so it is truncated like osmium's
/// conversion), 0 when unset. Equal keys sort by this value, then in input
/// order; osmium's comparison ignores timestamps unless both are set, and
/// 0 before any set value is the strict rule chosen for mixed ties.
pub fn tie_seconds(timestamp_ms: i64) -> u32 {
    (timestamp_ms / 1000) as u32
}

/// The object of a packed key ([`Key::packed`]): its kind and id without
/// the version, in sort order. `osmium fileinfo -e` judges order on this.
pub fn packed_object(packed: u128) -> u128 {
    packed >> 32
}

/// Which objects of one kind and id an output keeps: the one rule behind
/// `--dedupe` and `--latest`, in the merge's order (key, then the order
/// of equal keys above: timestamp, then input order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Keep {
    /// Every object.
    #[default]
    All,
    /// The first of equal keys (same kind, id and version): `--dedupe`.
    Dedupe,
    /// The newest version of each object: the last of its kind and id in
    /// the merge's order (highest version, then later timestamp, then
    /// later input), and nothing where that one is deleted: `--latest`.
    Latest,
}

impl Keep {
    /// The rule the options `--dedupe` and `--latest` ask for (`--latest`
    /// implies `--dedupe`).
    pub fn from_options(dedupe: bool, latest: bool) -> Keep {
        match (latest, dedupe) {
            (true, _) => Keep::Latest,
            (false, true) => Keep::Dedupe,
            (false, false) => Keep::All,
        }
    }
}

/// Whether two packed keys are of one object (kind and id, any version).
pub fn packed_same_object(a: u128, b: u128) -> bool {
    packed_object(a) == packed_object(b)
}

/// Whether a packed key's id is negative: not positive, and not 0.
pub fn packed_negative(packed: u128) -> bool {
    packed & (1 << 96) == 0 && (packed >> 32) as u64 != 0
}

/// Convert a stored PBF version (int32, -1 or absent for "none") to the key's version.
pub fn key_version(v: i32) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

/// The key as OPL names an object, with its version: `n5 v2`, `w-3 v0`.
impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The kind's initial: n, w, r or c.
        let letter = &self.kind.name()[..1];
        write!(f, "{letter}{} v{}", self.id, self.version)
    }
}

impl Ord for Key {
    fn cmp(&self, other: &Key) -> Ordering {
        self.packed().cmp(&other.packed())
    }
}

impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Key) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negative_ids_are_told_from_packed_keys() {
        for (id, negative) in [
            (-5, true),
            (-1, true),
            (0, false),
            (1, false),
            (i64::MIN, true),
        ] {
            let k = Key::new(Kind::Way, id, 3);
            assert_eq!(packed_negative(k.packed()), negative, "{id}");
        }
    }

    #[test]
    fn osmium_order() {
        let n = |id, v| Key::new(Kind::Node, id, v);
        let mut keys = vec![
            Key::new(Kind::Way, -5, 1),
            n(3, 2),
            n(3, 1),
            n(-2, 1),
            n(0, 1),
            n(-1, 1),
            n(1, 1),
            Key::new(Kind::Relation, 1, 1),
            n(i64::MIN, 1),
            n(i64::MAX, 1),
        ];
        keys.sort();
        let ids: Vec<(Kind, i64, u32)> = keys.iter().map(|k| (k.kind, k.id, k.version)).collect();
        assert_eq!(
            ids,
            vec![
                (Kind::Node, 0, 1),
                (Kind::Node, -1, 1),
                (Kind::Node, -2, 1),
                (Kind::Node, i64::MIN, 1),
                (Kind::Node, 1, 1),
                (Kind::Node, 3, 1),
                (Kind::Node, 3, 2),
                (Kind::Node, i64::MAX, 1),
                (Kind::Way, -5, 1),
                (Kind::Relation, 1, 1),
            ]
        );
    }

    #[test]
    fn from_packed_inverts_packed() {
        for kind in Kind::ALL {
            for id in [0, 1, -1, 42, -42, i64::MAX, i64::MIN, i64::MIN + 1] {
                for version in [0, 1, u32::MAX] {
                    let key = Key::new(kind, id, version);
                    assert_eq!(Key::from_packed(key.packed()), key);
                }
            }
        }
    }

    #[test]
    fn tie_seconds_are_osmium_seconds() {
        assert_eq!(tie_seconds(0), 0);
        assert_eq!(tie_seconds(999), 0);
        assert_eq!(tie_seconds(1_600_000_000_123), 1_600_000_000);
        assert_eq!(tie_seconds(4_294_967_296_000), 0);
    }

    #[test]
    fn versions() {
        assert_eq!(key_version(-1), 0);
        assert_eq!(key_version(7), 7);
    }
}
