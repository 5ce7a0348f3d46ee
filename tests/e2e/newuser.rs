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
