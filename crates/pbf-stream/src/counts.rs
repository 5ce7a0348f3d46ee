//! Objects per kind, as the streams write them: `{"node":N,"way":N,
//! "relation":N}` plus `"changeset":N` when there are any. The counts come
//! and go as the `[u64; 4]` indexed by [`Kind::index`] that the scanner and
//! the merge engine produce ([`Counts::from_array`]); the object's keys, the
//! field names, are [`Kind::name`]'s words (the fast writer writes them from
//! `Kind`, and its tests hold the two to agree).

use std::fmt;
use std::ops::Index;

use pbf_format::Kind;
use serde::{Deserialize, Serialize};

/// Objects per kind, indexed by [`Kind`], in their written form. Unknown
/// keys are ignored, like unknown fields everywhere in the streams;
/// changesets are rare in PBF, so a zero count of them is left out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    node: u64,
    way: u64,
    relation: u64,
    #[serde(default, skip_serializing_if = "crate::records::is_zero")]
    changeset: u64,
}

impl Counts {
    /// From an array indexed by [`Kind::index`].
    pub fn from_array([node, way, relation, changeset]: [u64; 4]) -> Counts {
        Counts {
            node,
            way,
            relation,
            changeset,
        }
    }

    /// As an array indexed by [`Kind::index`].
    pub fn to_array(self) -> [u64; 4] {
        [self.node, self.way, self.relation, self.changeset]
    }

    /// Sum of all kinds.
    pub fn total(self) -> u64 {
        self.to_array().iter().sum()
    }

    /// Add another count, kind by kind.
    pub fn add(&mut self, o: Counts) {
        let (a, b) = (self.to_array(), o.to_array());
        *self = Counts::from_array(std::array::from_fn(|i| a[i] + b[i]));
    }
}

impl Index<Kind> for Counts {
    type Output = u64;

    fn index(&self, k: Kind) -> &u64 {
        match k {
            Kind::Node => &self.node,
            Kind::Way => &self.way,
            Kind::Relation => &self.relation,
            Kind::Changeset => &self.changeset,
        }
    }
}

/// "5 nodes, 3 ways, 1 relation, 0 changesets": every kind, for messages.
impl fmt::Display for Counts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, k) in Kind::ALL.into_iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            write!(f, "{sep}{}", plural(self[k], k.name()))?;
        }
        Ok(())
    }
}

/// "1 blob", "2 blobs", "2 batches": a count and its noun (a regular
/// English plural: -es after a sibilant, else -s), for every message that
/// counts something (the tools reach it as `pbf_cli::plural`).
pub fn plural(n: u64, noun: &str) -> String {
    let es = ["s", "x", "z", "ch", "sh"]
        .iter()
        .any(|e| noun.ends_with(e));
    match (n, es) {
        (1, _) => format!("1 {noun}"),
        (n, true) => format!("{n} {noun}es"),
        (n, false) => format!("{n} {noun}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular() {
        assert_eq!(plural(1, "op"), "1 op");
        assert_eq!(plural(0, "op"), "0 ops");
        assert_eq!(plural(2, "merge op"), "2 merge ops");
        assert_eq!(plural(3, "batch"), "3 batches");
    }

    #[test]
    fn zero_changesets_are_left_out_and_read_back() {
        let c = Counts::from_array([1, 2, 3, 0]);
        let json = serde_json::to_string(&c).expect("json");
        assert_eq!(json, r#"{"node":1,"way":2,"relation":3}"#);
        assert_eq!(serde_json::from_str::<Counts>(&json).expect("read"), c);
        let c = Counts::from_array([0, 0, 0, 4]);
        let json = serde_json::to_string(&c).expect("json");
        assert_eq!(json, r#"{"node":0,"way":0,"relation":0,"changeset":4}"#);
        assert_eq!(serde_json::from_str::<Counts>(&json).expect("read"), c);
    }

    #[test]
    fn unknown_keys_are_ignored_and_missing_kinds_refused() {
        let c: Counts =
            serde_json::from_str(r#"{"way":2,"area":9,"node":1,"relation":0}"#).expect("read");
        assert_eq!(c.to_array(), [1, 2, 0, 0]);
        let e = serde_json::from_str::<Counts>(r#"{"node":1,"way":2}"#).expect_err("missing");
        assert!(e.to_string().contains("missing field `relation`"), "{e}");
        let e = serde_json::from_str::<Counts>(r#"{"node":1,"node":2}"#).expect_err("twice");
        assert!(e.to_string().contains("duplicate field `node`"), "{e}");
    }
}
