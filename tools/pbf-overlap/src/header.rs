//! The OSMHeader of the sorted output, built from the headers of all inputs
//! (pbf-overlap(1) says the same in short). The rules, field by field:
//!
//! - **required features**: `OsmSchema-V0.6` always (it is the schema every
//!   block we write follows); then the union of the inputs' required features
//!   in order of appearance, except that `LocationsOnWays` is kept only when
//!   every input has it (a way from an input without locations would break
//!   the promise) and `Sort.*` entries are dropped (the order is ours);
//!   `HistoricalInformation` survives the union when any input has it,
//!   unless the output keeps the newest version of each object (`--latest`);
//!   `DenseNodes` is added when the plan has merge ops, because pbf-merge
//!   writes dense nodes.
//! - **optional features**: the union in order of appearance, without any
//!   `Sort.*`, then `Sort.Type_then_ID`.
//! - **bbox**: the union of the inputs' boxes when every input has one, else none.
//! - **source**: kept when every input has the same value (or none has one).
//! - **replication** (timestamp, sequence number, base URL): kept as a group
//!   when every input has the same three values, else dropped, and
//!   [`replication_dropped`] says so for the notice.
//! - **writingprogram**: given by the caller (`pbf-sort <version>` or `--generator`).

use pbf_format::header::{BBox, Header, SORT_FEATURE};

/// The schema feature every output declares.
const SCHEMA_FEATURE: &str = "OsmSchema-V0.6";
/// Required only when every input has it.
const LOCATIONS_ON_WAYS: &str = "LocationsOnWays";
/// Dropped by `--latest`.
const HISTORY: &str = "HistoricalInformation";
/// Written by pbf-merge.
const DENSE_NODES: &str = "DenseNodes";

/// What the output header takes from the command line.
#[derive(Clone, Debug)]
pub struct Made {
    /// Goes into the header as is.
    pub writingprogram: String,
    /// One version of each object (`--latest`): no `HistoricalInformation`.
    pub current_state: bool,
}

/// The output header for `inputs` (in source order). `merges` says whether
/// the plan has merge ops.
pub fn output_header(inputs: &[Header], merges: bool, made: &Made) -> Header {
    let replication = agreed(inputs, replication).unwrap_or_default();
    Header {
        bbox: bbox_union(inputs),
        required_features: required_features(inputs, merges, made.current_state),
        optional_features: optional_features(inputs),
        writingprogram: Some(made.writingprogram.clone()),
        source: agreed(inputs, |h| h.source.clone()).flatten(),
        replication_timestamp: replication.0,
        replication_sequence_number: replication.1,
        replication_base_url: replication.2,
    }
}

fn is_sort_feature(f: &str) -> bool {
    f.starts_with("Sort.")
}

fn required_features(inputs: &[Header], merges: bool, current_state: bool) -> Vec<String> {
    let mut out = vec![SCHEMA_FEATURE.to_owned()];
    let all_have_low = !inputs.is_empty()
        && inputs
            .iter()
            .all(|h| h.required_features.iter().any(|f| f == LOCATIONS_ON_WAYS));
    for f in inputs.iter().flat_map(|h| &h.required_features) {
        let dropped = is_sort_feature(f)
            || (f == LOCATIONS_ON_WAYS && !all_have_low)
            || (f == HISTORY && current_state);
        if !dropped {
            push_new(&mut out, f);
        }
    }
    if merges {
        push_new(&mut out, DENSE_NODES);
    }
    out
}

fn optional_features(inputs: &[Header]) -> Vec<String> {
    let mut out = Vec::new();
    for f in inputs.iter().flat_map(|h| &h.optional_features) {
        if !is_sort_feature(f) {
            push_new(&mut out, f);
        }
    }
    out.push(SORT_FEATURE.to_owned());
    out
}

fn push_new(v: &mut Vec<String>, f: &str) {
    if !v.iter().any(|g| g == f) {
        v.push(f.to_owned());
    }
}

/// A header's replication fields, the group the output keeps or drops.
type Replication = (Option<i64>, Option<i64>, Option<String>);

fn replication(h: &Header) -> Replication {
    (
        h.replication_timestamp,
        h.replication_sequence_number,
        h.replication_base_url.clone(),
    )
}

/// Whether an input's replication fields are left out of the output, as
/// the inputs do not all give the same ones.
pub fn replication_dropped(inputs: &[Header]) -> bool {
    agreed(inputs, replication).is_none()
        && inputs
            .iter()
            .any(|h| replication(h) != Replication::default())
}

/// The value of `field` when every input has the same one.
fn agreed<T: PartialEq>(inputs: &[Header], field: impl Fn(&Header) -> T) -> Option<T> {
    let (head, rest) = inputs.split_first()?;
    let v = field(head);
    rest.iter().all(|h| field(h) == v).then_some(v)
}

fn bbox_union(inputs: &[Header]) -> Option<BBox> {
    let mut boxes = inputs.iter().map(|h| h.bbox);
    let mut acc = boxes.next()??;
    for b in boxes {
        let b = b?;
        acc = BBox {
            left: acc.left.min(b.left),
            right: acc.right.max(b.right),
            top: acc.top.max(b.top),
            bottom: acc.bottom.min(b.bottom),
        };
    }
    Some(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(required: &[&str], optional: &[&str]) -> Header {
        Header {
            required_features: required.iter().map(|s| s.to_string()).collect(),
            optional_features: optional.iter().map(|s| s.to_string()).collect(),
            ..Header::default()
        }
    }

    fn bbox(left: i64, right: i64, top: i64, bottom: i64) -> Option<BBox> {
        Some(BBox {
            left,
            right,
            top,
            bottom,
        })
    }

    fn made(writingprogram: &str) -> Made {
        Made {
            writingprogram: writingprogram.to_owned(),
            current_state: false,
        }
    }

    #[test]
    fn replication_that_differs_is_dropped_and_said() {
        let mut a = header(&["OsmSchema-V0.6"], &[]);
        let b = a.clone();
        assert!(
            !replication_dropped(&[a.clone(), b.clone()]),
            "none to drop"
        );
        a.replication_sequence_number = Some(3546);
        assert!(replication_dropped(&[a.clone(), b]));
        assert!(!replication_dropped(&[a.clone(), a]), "the same kept");
    }

    #[test]
    fn latest_drops_history() {
        let h = header(&["OsmSchema-V0.6", "HistoricalInformation"], &[]);
        let current = Made {
            current_state: true,
            ..made("p")
        };
        let out = output_header(&[h], false, &current);
        assert_eq!(out.required_features, ["OsmSchema-V0.6"]);
    }

    #[test]
    fn single_input_keeps_its_fields_and_gains_the_sort_feature() {
        let mut h = header(
            &["OsmSchema-V0.6", "DenseNodes", "HistoricalInformation"],
            &["Has_Metadata", "Sort.Geographic"],
        );
        h.bbox = bbox(1, 2, 4, 3);
        h.source = Some("planet".into());
        h.replication_timestamp = Some(1_700_000_000);
        h.replication_sequence_number = Some(7);
        h.replication_base_url = Some("https://example.invalid/".into());
        h.writingprogram = Some("osmium/1.15".into());
        let out = output_header(std::slice::from_ref(&h), false, &made("pbf-sort 0.1.0"));
        assert_eq!(
            out.required_features,
            ["OsmSchema-V0.6", "DenseNodes", "HistoricalInformation"]
        );
        assert_eq!(out.optional_features, ["Has_Metadata", SORT_FEATURE]);
        assert_eq!(out.bbox, h.bbox);
        assert_eq!(out.source, h.source);
        assert_eq!(out.replication_timestamp, Some(1_700_000_000));
        assert_eq!(out.replication_sequence_number, Some(7));
        assert_eq!(out.replication_base_url, h.replication_base_url);
        assert_eq!(out.writingprogram.as_deref(), Some("pbf-sort 0.1.0"));
    }

    #[test]
    fn locations_on_ways_only_when_every_input_has_it() {
        let low = header(&["OsmSchema-V0.6", "LocationsOnWays"], &[]);
        let plain = header(&["OsmSchema-V0.6"], &[]);
        let both = output_header(&[low.clone(), low.clone()], false, &made("p"));
        assert_eq!(
            both.required_features,
            ["OsmSchema-V0.6", "LocationsOnWays"]
        );
        let mixed = output_header(&[low, plain], false, &made("p"));
        assert_eq!(mixed.required_features, ["OsmSchema-V0.6"]);
    }

    #[test]
    fn history_if_any_input_has_it_and_features_are_a_union() {
        let a = header(&["DenseNodes"], &["Has_Metadata", "Sort.Type_then_ID"]);
        let b = header(&["OsmSchema-V0.6", "HistoricalInformation"], &["X"]);
        let out = output_header(&[a, b], false, &made("p"));
        assert_eq!(
            out.required_features,
            ["OsmSchema-V0.6", "DenseNodes", "HistoricalInformation"]
        );
        assert_eq!(out.optional_features, ["Has_Metadata", "X", SORT_FEATURE]);
    }

    #[test]
    fn dense_nodes_added_when_merging() {
        let h = header(&["OsmSchema-V0.6"], &[]);
        let copy = output_header(std::slice::from_ref(&h), false, &made("p"));
        assert_eq!(copy.required_features, ["OsmSchema-V0.6"]);
        let merge = output_header(&[h], true, &made("p"));
        assert_eq!(merge.required_features, ["OsmSchema-V0.6", DENSE_NODES]);
    }

    #[test]
    fn sort_features_are_replaced_also_when_required() {
        let h = header(&["OsmSchema-V0.6", "Sort.Geographic"], &["Sort.Geographic"]);
        let out = output_header(&[h], false, &made("p"));
        assert_eq!(out.required_features, ["OsmSchema-V0.6"]);
        assert_eq!(out.optional_features, [SORT_FEATURE]);
    }

    #[test]
    fn bbox_is_the_union_only_when_every_input_has_one() {
        let mut a = header(&[], &[]);
        a.bbox = bbox(-10, 10, 50, 40);
        let mut b = header(&[], &[]);
        b.bbox = bbox(0, 20, 45, 30);
        let out = output_header(&[a.clone(), b], false, &made("p"));
        assert_eq!(out.bbox, bbox(-10, 20, 50, 30));
        let none = output_header(&[a, header(&[], &[])], false, &made("p"));
        assert_eq!(none.bbox, None);
    }

    #[test]
    fn source_and_replication_kept_only_when_all_agree() {
        let mut a = header(&[], &[]);
        a.source = Some("s".into());
        a.replication_timestamp = Some(1);
        a.replication_sequence_number = Some(2);
        let mut b = a.clone();
        let same = output_header(&[a.clone(), b.clone()], false, &made("p"));
        assert_eq!(same.source.as_deref(), Some("s"));
        assert_eq!(same.replication_sequence_number, Some(2));
        b.source = None;
        b.replication_sequence_number = Some(3);
        let differ = output_header(&[a, b], false, &made("p"));
        assert_eq!(differ.source, None);
        assert_eq!(differ.replication_timestamp, None);
        assert_eq!(differ.replication_sequence_number, None);
    }
}
