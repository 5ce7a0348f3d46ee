//! `pbf-reflink` end to end. On a loop-mounted XFS image formatted with
//! `reflink=1`, and on btrfs (needs root, xfsprogs and btrfs-progs, and a
//! kernel with btrfs; otherwise the test prints "SKIPPED: <reason>"):
//! sorted, blob-permuted and overlapping inputs sort
//! into files that hold osmium sort's objects, that osmium, pyosmium and
//! pbf-index read, and whose extents are shared with the inputs. On the
//! filesystem of the temporary directory (ext4 here, no clones): the fallback
//! writes exactly what pbf-copy writes, and `--require-reflink` fails cleanly.

use std::path::{Path, PathBuf};
use std::process::Command;

use pbf_stream::IndexRecord;

use crate::util::*;

/// Objects counted by pyosmium (fails when pyosmium cannot read the file).
fn pyosmium_count(path: &Path) -> u64 {
    let script = "import osmium, sys\n\
                  class H(osmium.SimpleHandler):\n\
                  \x20   def __init__(self):\n\
                  \x20       super().__init__()\n\
                  \x20       self.n = 0\n\
                  \x20   def node(self, o): self.n += 1\n\
                  \x20   def way(self, o): self.n += 1\n\
                  \x20   def relation(self, o): self.n += 1\n\
                  h = H()\n\
                  h.apply_file(sys.argv[1])\n\
                  print(h.n)\n";
    let mut c = tool("python3", "python3-pyosmium", "the pyosmium check");
    c.arg("-c").arg(script).arg(path);
    let out = succeeds(c);
    String::from_utf8_lossy(&out)
        .trim()
        .parse()
        .expect("pyosmium count")
}

/// Check that `out` holds osmium sort's objects of `inputs`, in order, and
/// that osmium, pyosmium and pbf-index read it; returns pbf-index's padding count.
fn check_output(out: &Path, inputs: &[&Path], what: &str) -> u64 {
    let tmp = tempfile::tempdir().expect("dir");
    let info = assert_sorted_like_osmium(out, inputs, tmp.path(), what);
    let count = &info["data"]["count"];
    let total: u64 = ["nodes", "ways", "relations"]
        .iter()
        .map(|k| count[k].as_u64().expect("count"))
        .sum();
    assert_eq!(
        pyosmium_count(out),
        total,
        "{what}: pyosmium counts differently"
    );
    let mut index = bin("pbf-index");
    index.arg(out);
    let result = run(index);
    assert!(
        result.status.success(),
        "{what}: pbf-index: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    assert!(
        result.stderr.is_empty(),
        "{what}: pbf-index warns: {}",
        String::from_utf8_lossy(&result.stderr)
    );
    let end = records::<IndexRecord>(&result.stdout)
        .into_iter()
        .find_map(|r| match r {
            IndexRecord::End(e) => Some(e),
            _ => None,
        })
        .expect("end record");
    assert_eq!(
        (end.counts.total(), end.empty_blobs),
        (total, 0),
        "{what}: index end {end:?}"
    );
    end.padding_blobs
}

/// Bytes of `path` in extents flagged "shared" by `filefrag -v`.
fn shared_bytes(path: &Path) -> u64 {
    let out = Command::new("filefrag")
        .arg("-v")
        .arg(path)
        .output()
        .expect("filefrag (e2fsprogs)");
    assert!(
        out.status.success(),
        "filefrag: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let block: u64 = text
        .split("blocks of ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|s| s.parse().ok())
        .expect("filefrag block size");
    text.lines()
        .filter(|l| l.contains("shared"))
        .filter_map(|l| l.split(':').nth(3)?.trim().parse::<u64>().ok())
        .map(|blocks| blocks * block)
        .sum()
}

/// The percentage pbf-reflink -v reports as cloned.
fn cloned_percent(stderr: &[u8]) -> f64 {
    let text = String::from_utf8_lossy(stderr);
    text.split(" % of range bytes cloned")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no clone percentage in {text}"))
}

/// A plan for the inputs (merged into a spool when they overlap).
fn plan(inputs: &[&Path], spool: &Path, align: bool) -> Vec<u8> {
    let mut index = bin("pbf-index");
    index.arg("-q").args(inputs);
    let mut overlap = bin("pbf-overlap");
    overlap.arg("-q");
    let plan = run_with_input(overlap, &succeeds(index));
    assert!(
        plan.status.success(),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    let mut merge = bin("pbf-merge");
    merge.arg("-q").arg("--spool").arg(spool);
    if align {
        merge.args(["--align", "4096"]);
    }
    let merged = run_with_input(merge, &plan.stdout);
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    merged.stdout
}

fn reflink(plan: &[u8], out: &Path, args: &[&str]) -> std::process::Output {
    let mut c = bin("pbf-reflink");
    c.arg("-o").arg(out).args(args);
    run_with_input(c, plan)
}

/// `pbf-reflink --probe -q -o OUT`: its exit status and standard output
/// (the block size when OUT's directory can receive clones).
fn reflink_probe(out: &Path) -> (Option<i32>, String) {
    let mut c = bin("pbf-reflink");
    c.args(["--probe", "-q", "-o"]).arg(out);
    let o = run(c);
    assert!(
        o.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!out.exists(), "the probe wrote OUT");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// A sorted file on `mount`: one range, cloned but for its unaligned edges.
/// Returns the input, the output and its padding frames (`check_output`).
fn clone_sorted(mount: &LoopMount, what: &str) -> (PathBuf, PathBuf, u64) {
    let sorted = mount.put("sorted-kualalumpur.osm.pbf");
    let out = mount.path().join("sorted.out.pbf");
    let r = reflink(
        &plan(&[&sorted], &mount.path().join("s0"), false),
        &out,
        &["-vv"],
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(
        cloned_percent(&r.stderr) >= 99.0,
        "{what}: {}",
        String::from_utf8_lossy(&r.stderr)
    );
    let padding = check_output(&out, &[&sorted], what);
    (sorted, out, padding)
}

#[test]
fn clones_on_xfs() {
    let xfs = match LoopMount::xfs() {
        Ok(m) => m,
        Err(why) => {
            eprintln!("SKIPPED: reflink test on XFS: {why}");
            return;
        }
    };
    let mnt = xfs.path().to_path_buf();
    assert_eq!(
        reflink_probe(&mnt.join("x.pbf")),
        (Some(0), "4096\n".into())
    );
    let (sorted, out, padding) = clone_sorted(&xfs, "sorted");
    assert!(padding >= 1, "no padding frame");
    let size = std::fs::metadata(&out).expect("out").len();
    assert!(
        shared_bytes(&out) * 100 >= size * 99,
        "extents not shared: {}",
        shared_bytes(&out)
    );

    // A plan header record replaces the header: the ranges are aligned
    // behind the new (longer) header and still clone.
    let headed = with_header_record(&plan(&[&sorted], &mnt.join("s1"), false));
    let out = mnt.join("header.out.pbf");
    let r = reflink(&headed, &out, &["-vv"]);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(
        cloned_percent(&r.stderr) >= 99.0,
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert_header_record_taken(&out, &sorted);
    check_output(&out, &[&sorted], "after a header record");

    // The driver picks pbf-reflink and has pbf-merge align the spool.
    let mut c = pbf_sort();
    c.arg("--dry-run")
        .arg(&sorted)
        .arg("-o")
        .arg(mnt.join("dry.pbf"));
    let line = String::from_utf8(succeeds(c)).expect("pipeline");
    assert!(
        line.contains("--align 4096 |") && line.contains("pbf-reflink "),
        "{line}"
    );

    // Blob-permuted, through the driver (auto copier picks pbf-reflink).
    let permuted = mnt.join("permuted.osm.pbf");
    permute(&sorted, &permuted, 7);
    let out = mnt.join("permuted.out.pbf");
    let mut c = pbf_sort();
    c.arg("-vv").arg(&permuted).arg("-o").arg(&out);
    let r = run(c);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert!(
        err.contains("with pbf-reflink"),
        "auto copier did not pick pbf-reflink: {err}"
    );
    check_output(&out, &[&permuted], "permuted");
    assert!(
        shared_bytes(&out) > size / 2,
        "permuted: extents not shared"
    );

    // Overlapping inputs: merged into an aligned spool, whose runs clone too.
    let a = xfs.put("unsorted-vex.osm.pbf");
    let b = xfs.put("sorted-andorra.osm.pbf");
    let out = mnt.join("overlap.out.pbf");
    let spool = mnt.join("spool.pbf");
    let r = reflink(
        &plan(&[&a, &b], &spool, true),
        &out,
        &["-vv", "--keep-spools"],
    );
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(
        cloned_percent(&r.stderr) >= 90.0,
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    check_output(&out, &[&a, &b], "overlapping");
    // Shared with the spool while it exists (removing it unshares them).
    let size = std::fs::metadata(&out).expect("out").len();
    assert!(
        shared_bytes(&out) * 10 >= size * 9,
        "overlapping: extents not shared"
    );
    std::fs::remove_file(&spool).expect("remove spool");
    // By default the aligned spool is removed: its padding is never copied.
    let out = mnt.join("overlap-remove.out.pbf");
    let r = reflink(&plan(&[&a, &b], &spool, true), &out, &[]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success() && err.is_empty(), "{err}");
    assert!(!spool.exists(), "the aligned spool is removed");
    let out = mnt.join("overlap-driver.out.pbf");
    let mut c = pbf_sort();
    c.args(["-vv", "--add-indexdata"])
        .arg(&a)
        .arg(&b)
        .arg("-o")
        .arg(&out);
    let r = run(c);
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(
        cloned_percent(&r.stderr) >= 90.0,
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    check_output(&out, &[&a, &b], "overlapping, driver, --add-indexdata");

    // A source on another filesystem: copied after a notice, or refused.
    let elsewhere = data("sorted-andorra.osm.pbf");
    let p = plan(&[&elsewhere], &mnt.join("s1"), false);
    let out = mnt.join("elsewhere.pbf");
    let r = reflink(&p, &out, &["--require-reflink"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("is on another filesystem than the output"),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );
    assert!(!out.exists());
    let r = reflink(&p, &out, &[]);
    assert!(r.status.success());
    assert!(String::from_utf8_lossy(&r.stderr).contains("notice:"));
    let copy = mnt.join("elsewhere-copy.pbf");
    let mut c = bin("pbf-copy");
    c.arg("-o").arg(&copy);
    assert!(run_with_input(c, &p).status.success());
    assert_eq!(
        std::fs::read(&out).expect("out"),
        std::fs::read(&copy).expect("copy"),
        "fallback differs from pbf-copy"
    );

    let leftovers: Vec<_> = std::fs::read_dir(&mnt)
        .expect("mnt")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".pbf-sort.") || n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

#[test]
fn falls_back_where_clones_are_impossible() {
    let dir = tempfile::tempdir().expect("dir");
    let probe = Command::new("cp")
        .args(["--reflink=always", "/proc/self/exe"])
        .arg(dir.path().join("probe"))
        .stderr(std::process::Stdio::null())
        .status()
        .expect("cp");
    if probe.success() {
        eprintln!(
            "SKIPPED: fallback test: {} supports clones",
            dir.path().display()
        );
        return;
    }
    assert_eq!(
        reflink_probe(&dir.path().join("x.pbf")),
        (Some(1), String::new())
    );
    let input = data("sorted-liechtenstein.osm.pbf");
    let mut c = pbf_sort();
    c.arg("--dry-run")
        .arg(&input)
        .arg("-o")
        .arg(dir.path().join("dry.pbf"));
    let line = String::from_utf8(succeeds(c)).expect("pipeline");
    assert!(
        line.contains("pbf-copy ") && !line.contains("--align"),
        "{line}"
    );
    let p = plan(&[&input], &dir.path().join("spool"), false);
    let copy = dir.path().join("copy.pbf");
    let mut c = bin("pbf-copy");
    c.arg("-o").arg(&copy);
    assert!(run_with_input(c, &p).status.success());

    let out = dir.path().join("out.pbf");
    let r = reflink(&p, &out, &["-vv"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert_eq!(
        err.lines().filter(|l| l.contains("notice:")).count(),
        1,
        "{err}"
    );
    assert!(err.contains("copying like pbf-copy"), "{err}");
    assert_eq!(
        std::fs::read(&out).expect("out"),
        std::fs::read(&copy).expect("copy")
    );

    let quiet = dir.path().join("quiet.pbf");
    let r = reflink(&p, &quiet, &["-q"]);
    assert!(
        r.status.success() && r.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&r.stderr)
    );

    let refused = dir.path().join("refused.pbf");
    let r = reflink(&p, &refused, &["--require-reflink"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--require-reflink") && err.contains("refused.pbf"),
        "{err}"
    );
    assert!(!refused.exists());
    assert!(err.contains("use pbf-copy"), "{err}");

    // An output named relative to the current directory: the messages
    // name that directory in words (never "." or the absolute path), say
    // in plain words that its filesystem cannot clone, and what copies.
    let in_dir = |args: &[&str]| {
        let mut c = bin("pbf-reflink");
        c.current_dir(dir.path()).args(args);
        run_with_input(c, &p)
    };
    let says = "the filesystem of the current directory cannot clone files (reflink";
    let r = in_dir(&["-o", "rel.pbf"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert!(
        err.contains(says) && err.contains("copying like pbf-copy"),
        "{err}"
    );
    let r = in_dir(&["--require-reflink", "-o", "rel-refused.pbf"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with("pbf-reflink: error: rel-refused.pbf: ") && err.contains(says),
        "{err}"
    );
    assert!(
        err.contains("use pbf-copy (in pbf-sort: --copier copy)"),
        "{err}"
    );
    let r = in_dir(&["--probe", "-o", "rel.pbf"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{err}");
    assert!(err.contains(says) && err.contains("use pbf-copy"), "{err}");
    let r = in_dir(&["--probe", "-o", "gone/rel.pbf"]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert!(err.contains("gone: no such directory (output)"), "{err}");
    let dir_shown = dir.path().display().to_string();
    for r in [
        in_dir(&["-O", "-o", "rel.pbf"]),
        in_dir(&["--probe", "-o", "./rel.pbf"]),
    ] {
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(
            !err.contains(" of . ") && !err.contains(&dir_shown),
            "names the directory as . or absolute: {err}"
        );
    }
    std::fs::remove_file(dir.path().join("rel.pbf")).expect("rm rel.pbf");

    let r = reflink(&p, Path::new("-"), &["--require-reflink"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(r.stdout.is_empty());
    let r = reflink(&p, Path::new("-"), &[]);
    assert!(r.status.success());
    assert_eq!(
        r.stdout,
        std::fs::read(&copy).expect("copy"),
        "-o - differs from pbf-copy"
    );

    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".pbf-sort.") || n.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "temporary files left: {leftovers:?}");
}

/// btrfs clones too (the README and pbf-reflink(1) promise it): a sorted
/// file is cloned but for its unaligned edges, and a sort that merges,
/// with `--copier reflink`, gives osmium sort's objects in order.
#[test]
fn clones_on_btrfs() {
    let btrfs = match LoopMount::btrfs() {
        Ok(m) => m,
        Err(why) => {
            eprintln!("SKIPPED: reflink test on btrfs: {why}");
            return;
        }
    };
    let mnt = btrfs.path().to_path_buf();
    clone_sorted(&btrfs, "sorted, on btrfs");

    let (a, b) = (
        btrfs.put("unsorted-vex.osm.pbf"),
        btrfs.put("sorted-andorra.osm.pbf"),
    );
    let out = mnt.join("merged.out.pbf");
    let mut c = pbf_sort();
    c.args(["-vv", "--copier", "reflink"])
        .arg(&a)
        .arg(&b)
        .arg("-o")
        .arg(&out);
    let r = run(c);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(r.status.success(), "{err}");
    assert!(err.contains("with pbf-reflink"), "{err}");
    assert!(cloned_percent(&r.stderr) >= 80.0, "{err}");
    let dir = tempfile::tempdir().expect("tempdir");
    assert_sorted_like_osmium(&out, &[&a, &b], dir.path(), "merged, on btrfs");
}
