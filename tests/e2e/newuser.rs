//! What a new user meets in the first hour: files that are not PBF are named
//! for what they are, with the command that makes a PBF of them, and an
//! output name that promises another format is refused, both before any
//! work (exit 2, one line, no output).

use std::path::Path;

use crate::sort::pbf_sort;
use crate::util::*;

/// Write `src` as `format` (an osmium output format) to `out`.
fn osmium_cat(src: &Path, format: &str, out: &Path) {
    let mut c = osmium();
    c.arg("cat")
        .arg(src)
        .args(["-f", format, "-O", "-o"])
        .arg(out);
    succeeds(c);
}

/// Run `c`; it must exit 2 with one line on stderr holding every `want`.
fn refused(mut c: std::process::Command, want: &[&str]) {
    let o = c.output().expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    for w in want {
        assert!(err.contains(w), "stderr lacks {w:?}: {err}");
    }
}

#[test]
fn files_that_are_not_pbf_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let src = data("unsorted-vex.osm.pbf");
    let xml = dir.path().join("in.osm");
    osmium_cat(&src, "osm", &xml);
    let opl = dir.path().join("in.opl");
    osmium_cat(&src, "opl", &opl);
    let bz2 = dir.path().join("in.osm.bz2");
    osmium_cat(&src, "osm.bz2", &bz2);
    let gz = dir.path().join("in.osm.gz");
    osmium_cat(&src, "osm.gz", &gz);
    let o5m = dir.path().join("in.o5m");
    std::fs::write(&o5m, b"\xff\xe0\x04o5m2\xff\xdc").expect("write o5m start");
    let cases = [
        (&xml, "OSM XML", "osmium cat"),
        (&opl, "OPL text", "osmium cat"),
        (&bz2, "bzip2-compressed", "osmium cat"),
        (&gz, "gzip-compressed", "gzip -dc"),
        (&o5m, "o5m", "osmium cat"),
    ];
    for (input, kind, fix) in cases {
        let out = dir.path().join("out.osm.pbf");
        let mut c = pbf_sort();
        c.arg(input).arg("-o").arg(&out);
        refused(c, &[&name(input), kind, fix, "not PBF"]);
        assert!(!out.exists(), "{}: output written", name(input));
        let mut c = bin("pbf-index");
        c.arg(input);
        refused(c, &[&name(input), kind]);
    }
}

#[test]
fn output_names_of_other_formats_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let input = data("unsorted-vex.osm.pbf");
    for out in ["x.osm", "x.osm.bz2", "x.opl", "x.o5m", "x.osh", "x.pbf.gz"] {
        let out = dir.path().join(out);
        let mut c = pbf_sort();
        c.arg(&input).arg("-o").arg(&out);
        refused(c, &[&name(&out), ".osm.pbf"]);
        assert!(!out.exists());
    }
    // A name without a known suffix is allowed.
    let plain = dir.path().join("sorted");
    let mut c = pbf_sort();
    c.arg("-q").arg(&input).arg("-o").arg(&plain);
    succeeds(c);
    assert!(plain.is_file());
}

/// `osmconvert --out-statistics` of a file: nodes, ways, relations, or
/// `None` when osmconvert cannot read it. Its exit status is not used: it
/// warns (and exits 92) about negative ids in osmium's order, which is not
/// its own, and still reads every object.
fn osmconvert_counts(path: &Path) -> Option<[u64; 3]> {
    let o = std::process::Command::new("osmconvert")
        .arg(path)
        .arg("--out-statistics")
        .output()
        .expect("osmconvert runs (Debian: osmctools)");
    let text =
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    if text.contains("osmconvert Error") || !text.contains("nodes:") {
        return None;
    }
    let count = |what: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(what))
            .map_or(0, |n| n.trim().parse().expect("a count"))
    };
    Some([count("nodes:"), count("ways:"), count("relations:")])
}

/// osmium's object counts of a file: nodes, ways, relations.
fn osmium_counts(path: &Path) -> [u64; 3] {
    let info = fileinfo(path);
    let n = |k: &str| info["data"]["count"][k].as_u64().expect("count");
    [n("nodes"), n("ways"), n("relations")]
}

/// Default outputs carry no indexdata, so osmconvert (0.8 and 0.9 read only
/// BlobHeaders of 11 to 17 bytes) reads them wherever it reads the input's
/// kind of data, merged blobs included.
#[test]
fn osmconvert_reads_default_outputs() {
    // osmconvert has no --version (it exits 1): it must merely run.
    let runs = std::process::Command::new("osmconvert")
        .arg("-h")
        .output()
        .is_ok();
    assert!(
        runs,
        "osmconvert (Debian package osmctools) is required; install it"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cases: Vec<Vec<std::path::PathBuf>> =
        good_files().into_iter().map(|f| vec![f]).collect();
    cases.push(vec![
        data("unsorted-vex.osm.pbf"),
        data("unsorted-josm-negative-ids.osm.pbf"),
    ]);
    let mut read = 0;
    for inputs in cases {
        let out = dir.path().join("out.osm.pbf");
        let mut c = pbf_sort();
        c.arg("-q").arg("-O").args(&inputs).arg("-o").arg(&out);
        succeeds(c);
        let what = inputs
            .iter()
            .map(|p| name(p))
            .collect::<Vec<_>>()
            .join(" + ");
        // osmconvert reads dense nodes only: a merged output has them, a
        // copied one keeps the input's blocks. Where it reads the inputs,
        // it must count the same in the output (it counts the objects of a
        // history file, not their versions); else osmium's counts.
        let of_inputs: Option<Vec<[u64; 3]>> =
            inputs.iter().map(|p| osmconvert_counts(p)).collect();
        let want = match of_inputs {
            Some(counts) => counts
                .iter()
                .fold([0; 3], |a, c| [a[0] + c[0], a[1] + c[1], a[2] + c[2]]),
            None if inputs.len() > 1 => osmium_counts(&out),
            None => continue,
        };
        let got = osmconvert_counts(&out);
        assert_eq!(got, Some(want), "{what}: osmconvert's counts");
        read += 1;
    }
    assert!(read >= 10, "only {read} outputs were tried");
}
