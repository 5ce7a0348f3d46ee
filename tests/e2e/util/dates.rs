//! Two extracts of one area taken on different dates, made from a real file
//! through OPL, for `pbf-sort --latest`: the newer one has a later version
//! of some objects, a later timestamp alone on others, and each lacks
//! objects the other has (they overlap only partly). Also the oracle of
//! `--latest`: `osmium sort` into a history file, then `osmium time-filter`
//! (each object as it is now; left out when its newest version is deleted).

use std::path::{Path, PathBuf};

use crate::util::{opl, osmium, succeeds};

/// The timestamp of every edit of the newer extract: later than any in the
/// fixtures, earlier than the day a test runs.
pub const NEWER_TIMESTAMP: &str = "t2024-01-01T00:00:00Z";

/// The name tag every edited object of the newer extract carries.
pub const NEWER_NAME: &str = "newer";

/// The two extracts, as PBF files, and the newer one's OPL.
pub struct TwoDates {
    pub older: PathBuf,
    pub newer: PathBuf,
    pub newer_opl: String,
}

/// What the newer extract does with the `i`-th object of a kind.
enum Edit {
    Drop,
    Bump,
    Retime,
    Keep,
}

fn newer_edit(i: usize) -> Edit {
    match i {
        _ if i % 7 == 3 => Edit::Drop,
        _ if i % 3 == 0 => Edit::Bump,
        _ if i % 11 == 5 => Edit::Retime,
        _ => Edit::Keep,
    }
}

/// The older extract lacks every fifth object of each kind.
fn older_keeps(i: usize) -> bool {
    i % 5 != 4
}

/// Write the two extracts of `base` (whose objects all have a timestamp
/// before [`NEWER_TIMESTAMP`]: then every edit is newer by version, or by
/// timestamp alone, and no tie mixes objects with and without one) in `dir`.
pub fn two_dates(base: &Path, dir: &Path) -> TwoDates {
    let (mut older, mut newer) = (String::new(), String::new());
    let mut counts = std::collections::HashMap::new();
    for line in opl(base).lines() {
        let kind = line.chars().next().expect("an OPL line");
        let i = counts.entry(kind).or_insert(0usize);
        if older_keeps(*i) {
            older.push_str(line);
            older.push('\n');
        }
        if let Some(edited) = edit(line, newer_edit(*i)) {
            newer.push_str(&edited);
            newer.push('\n');
        }
        *i += 1;
    }
    TwoDates {
        older: pbf_from_opl(&older, dir, "older"),
        newer: pbf_from_opl(&newer, dir, "newer"),
        newer_opl: newer,
    }
}

/// One OPL line as the newer extract has it (`None`: left out).
fn edit(line: &str, how: Edit) -> Option<String> {
    let bump = match how {
        Edit::Drop => return None,
        Edit::Keep => return Some(line.to_owned()),
        Edit::Bump => 1,
        Edit::Retime => 0,
    };
    let fields: Vec<String> = line
        .split(' ')
        .map(|f| match f.split_at(1) {
            ("v", v) => format!("v{}", v.parse::<u64>().expect("a version") + bump),
            ("t", _) => NEWER_TIMESTAMP.to_owned(),
            ("T", tags) => named_newer(tags),
            _ => f.to_owned(),
        })
        .collect();
    Some(fields.join(" "))
}

/// OPL tags (`k=v,k=v`, commas in values escaped) with `name` set to
/// [`NEWER_NAME`].
fn named_newer(tags: &str) -> String {
    let mut kept: Vec<&str> = tags
        .split(',')
        .filter(|t| !t.is_empty() && !t.starts_with("name="))
        .collect();
    let name = format!("name={NEWER_NAME}");
    kept.push(&name);
    format!("T{}", kept.join(","))
}

/// A PBF file `DIR/STEM.osm.pbf` made by osmium from OPL text, in its order.
pub fn pbf_from_opl(text: &str, dir: &Path, stem: &str) -> PathBuf {
    let opl_path = dir.join(format!("{stem}.opl"));
    std::fs::write(&opl_path, text).expect("write OPL");
    let pbf = dir.join(format!("{stem}.osm.pbf"));
    let mut c = osmium();
    c.arg("cat").arg(&opl_path).arg("-o").arg(&pbf).arg("-O");
    succeeds(c);
    pbf
}

/// The newest version of each object of `inputs` as a current-state PBF
/// file in `dir` (`osmium sort` into a history file, then `osmium
/// time-filter`): the oracle of `pbf-sort --latest`.
pub fn osmium_latest(inputs: &[&Path], dir: &Path) -> PathBuf {
    let all = dir.join("oracle-all.osh.pbf");
    let mut c = osmium();
    c.arg("sort").args(inputs).arg("-o").arg(&all).arg("-O");
    succeeds(c);
    let latest = dir.join("oracle-latest.osm.pbf");
    let mut c = osmium();
    c.arg("time-filter")
        .arg(&all)
        .arg("-o")
        .arg(&latest)
        .arg("-O");
    succeeds(c);
    latest
}

/// The lines of an OPL text whose object the newer extract edited (its
/// name is [`NEWER_NAME`]).
pub fn edited_lines(opl: &str) -> Vec<&str> {
    let mark = format!("name={NEWER_NAME}");
    let edited = |line: &&str| {
        line.split(' ')
            .filter_map(|f| f.strip_prefix('T'))
            .any(|tags| tags.split(',').any(|t| t == mark))
    };
    opl.lines().filter(edited).collect()
}
