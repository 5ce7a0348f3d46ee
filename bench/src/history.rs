//! `history`: K versions of every object, as in a history file. An object
//! stored with version v (1 when it has none) becomes versions
//! (v-1)·K+1 ..= v·K with timestamps one hour apart, the last keeping the
//! original timestamp; every version is `visible`. The output is sorted and
//! its header requires `HistoricalInformation`. Changesets are kept once.

use std::path::Path;

use anyhow::Result;
use pbf_format::block::{Element, Info};
use pbf_format::header::encode_header_frame;
use pbf_output::OutputFile;

use crate::encode::{FrameEncoder, ordered};
use crate::input::Input;

const HOUR_MS: i64 = 3_600_000;

/// Write the history file; returns the bytes written.
pub fn run(
    input: &Path,
    output: &mut OutputFile,
    versions: u32,
    encoder: FrameEncoder,
) -> Result<()> {
    anyhow::ensure!(versions >= 1, "-k must be at least 1");
    let inp = Input::open(input)?;
    let mut elements = inp.decode_all()?;
    elements.sort_by_key(Element::key);
    let mut header = inp.header.clone();
    if !header.has_history() {
        header
            .required_features
            .push("HistoricalInformation".into());
    }
    let per_task = (encoder.opts.max_elements / versions as usize).max(1);
    output.write_all(&encode_header_frame(&header, encoder.compression)?)?;
    ordered(
        elements.chunks(per_task),
        |chunk| {
            let expanded: Vec<Element> = chunk.iter().flat_map(|e| expand(e, versions)).collect();
            encoder.frames(&expanded)
        },
        output,
    )
}

/// The versions of one object, oldest first.
fn expand(e: &Element, k: u32) -> Vec<Element> {
    if matches!(e, Element::Changeset(_)) {
        return vec![e.clone()];
    }
    let base = e.info().cloned().unwrap_or(Info {
        version: 1,
        timestamp_ms: 0,
        changeset: 0,
        uid: 0,
        user: std::sync::Arc::from(&b""[..]),
        visible: None,
    });
    let first = i64::from(base.version.max(1) - 1) * i64::from(k);
    (1..=k)
        .map(|j| {
            let mut v = e.clone();
            let info = Info {
                version: i32::try_from(first + i64::from(j)).unwrap_or(i32::MAX),
                timestamp_ms: (base.timestamp_ms - i64::from(k - j) * HOUR_MS).max(0),
                visible: Some(true),
                ..base.clone()
            };
            match &mut v {
                Element::Node(n) => n.info = Some(info),
                Element::Way(w) => w.info = Some(info),
                Element::Relation(r) => r.info = Some(info),
                Element::Changeset(_) => {}
            }
            v
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_format::block::Node;

    #[test]
    fn versions_follow_each_other() {
        let e = Element::Node(Node {
            id: 5,
            info: None,
            lat: 0,
            lon: 0,
            tags: Vec::new(),
        });
        let v = expand(&e, 3);
        let versions: Vec<u32> = v.iter().map(|e| e.key().version).collect();
        assert_eq!(versions, [1, 2, 3]);
        assert!(
            v.iter()
                .all(|e| e.info().is_some_and(|i| i.visible == Some(true)))
        );
    }
}
