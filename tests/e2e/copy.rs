//! `pbf-copy` over plans built here from `pbf-index` output (one copy op per
//! blob, in chosen orders), so it is tested apart from `pbf-overlap`: data
//! frames pass through byte for byte, osmium reads the result, indexdata
//! makes the next index header-only, and every failure (merge ops left, a
//! changed source, a plan without `end`, an existing OUT, a signal) leaves
//! no output behind. Copying ahead of the plan is in [`ahead`].

use std::fs;
use std::io::Write;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use pbf_format::{Key, Kind};
use pbf_stream::{BlobRecord, IndexRecord, MergeInput, MergeOp, PlanRecord, SourceRecord};

use crate::util::*;

mod ahead;

/// A plan copying `blobs` of `src` in the given order.
fn plan_for(src: &SourceRecord, blobs: &[&BlobRecord], frames: bool) -> Vec<u8> {
    let ops: Vec<PlanRecord> = blobs
        .iter()
        .map(|b| PlanRecord::Copy(copy_op(b, frames)))
        .collect();
    plan_bytes(&plan_header(src), &ops, true)
}

/// A plan copying every blob of `input` in file order.
fn plan_in_file_order(input: &Path) -> Vec<u8> {
    let (src, blobs) = index(input);
    let refs: Vec<&BlobRecord> = blobs.iter().collect();
    plan_for(&src, &refs, false)
}

fn pbf_copy(plan: &[u8], args: &[&str]) -> Output {
    let mut c = bin("pbf-copy");
    c.args(args);
    run_with_input(c, plan)
}

fn copy_ok(plan: &[u8], out: &Path, args: &[&str]) {
    let mut all = vec!["-o", out.to_str().expect("utf-8 path")];
    all.extend_from_slice(args);
    let o = pbf_copy(plan, &all);
    assert!(
        o.status.success(),
        "pbf-copy {all:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn copy_fails(plan: &[u8], out: &Path, args: &[&str], message: &str) {
    let mut all = vec!["-o", out.to_str().expect("utf-8 path")];
    all.extend_from_slice(args);
    let o = pbf_copy(plan, &all);
    // An output that exists, or is an input, is found before any work: a
    // usage error.
    let usage = message.contains("use -O/--overwrite") || message.contains("the same file as");
    let code = if usage { 2 } else { 1 };
    refused(
        &format!("pbf-copy {all:?}"),
        &o,
        code,
        &["pbf-copy: error: ", message],
    );
}

/// Length of the first frame (the OSMHeader) of PBF bytes.
fn first_frame_len(bytes: &[u8]) -> usize {
    let hl = u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]) as usize;
    let fh = pbf_format::frame::parse_blob_header(&bytes[4..4 + hl]).expect("blob header");
    assert_eq!(fh.0, pbf_format::frame::BlobType::OsmHeader);
    4 + hl + fh.2 as usize
}

fn sorted_files() -> Vec<PathBuf> {
    let v: Vec<PathBuf> = good_files()
        .into_iter()
        .filter(|p| name(p).starts_with("sorted-"))
        .collect();
    assert!(!v.is_empty(), "no sorted-* files");
    v
}

/// True when the blobs' key ranges follow each other in file order, so a
/// plan copying them in file order is in output order.
fn in_key_order(blobs: &[BlobRecord]) -> bool {
    blobs
        .windows(2)
        .all(|w| Key::from(w[1].first) >= Key::from(w[0].last))
}

#[test]
fn sorted_files_pass_through_byte_for_byte() {
    let dir = tempfile::tempdir().expect("dir");
    let mut passed = 0;
    for input in sorted_files() {
        let (src, blobs) = index(&input);
        let refs: Vec<&BlobRecord> = blobs.iter().collect();
        let out = dir.path().join(format!("{}.out.pbf", name(&input)));
        let plan = plan_for(&src, &refs, false);
        // A file whose blobs are not in key order (a "sorted" extract can
        // have one out of place): its file-order plan is refused.
        if !in_key_order(&blobs) {
            copy_fails(&plan, &out, &[], "the ops are not in output order");
            assert!(!out.exists());
            continue;
        }
        copy_ok(&plan, &out, &[]);
        passed += 1;
        let got = fs::read(&out).expect("out");
        let orig = fs::read(&input).expect("input");
        let data: Vec<u8> = blobs
            .iter()
            .flat_map(|b| orig[b.offset as usize..(b.offset + b.length) as usize].to_vec())
            .collect();
        assert_eq!(
            &got[first_frame_len(&got)..],
            data.as_slice(),
            "{}",
            name(&input)
        );
        assert_eq!(opl(&out), opl(&input), "{}", name(&input));
        let info = fileinfo(&out);
        assert_eq!(
            info["header"]["option"]["sorting"], "Type_then_ID",
            "{info}"
        );
        assert_eq!(info["data"]["objects_ordered"], true, "{}", name(&input));
    }
    assert!(passed > 3, "only {passed} sorted files passed through");
}

#[test]
fn permuted_blobs_are_put_back_in_order() {
    let dir = tempfile::tempdir().expect("dir");
    let input = data("sorted-kualalumpur.osm.pbf");
    let shuffled = dir.path().join("shuffled.osm.pbf");
    permute(&input, &shuffled, 7);
    assert!(
        !osmium_ordered(&shuffled),
        "a permuted file is not in order"
    );

    let (src2, blobs2) = index(&shuffled);
    let mut by_key: Vec<&BlobRecord> = blobs2.iter().collect();
    by_key.sort_by_key(|b| Key::from(b.first));
    let sorted = dir.path().join("sorted.osm.pbf");
    copy_ok(&plan_for(&src2, &by_key, false), &sorted, &["-v"]);
    assert!(osmium_ordered(&sorted));
    assert_eq!(opl(&sorted), opl(&input));
    let (got, orig) = (
        fs::read(&sorted).expect("out"),
        fs::read(&input).expect("in"),
    );
    assert_eq!(
        &got[first_frame_len(&got)..],
        &orig[first_frame_len(&orig)..],
        "every data frame is passed through byte for byte"
    );
}

#[test]
fn a_plan_out_of_output_order_is_refused_naming_both_ops() {
    let dir = tempfile::tempdir().expect("dir");
    let input = data("unsorted-osmconvert-claims-sorted.osm.pbf");
    let mut c = bin("pbf-index");
    c.arg("-q").arg(&input);
    let index = succeeds(c);
    let plan = succeeds_with(bin("pbf-overlap"), &index);
    let lines: Vec<&[u8]> = plan
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(lines.len(), 5, "plan record, three copy ops, end");
    let swapped = [lines[0], lines[2], lines[1], lines[3], lines[4]].join(&b'\n');
    let out = dir.path().join("s.osm.pbf");
    let ops: Vec<PlanRecord> = records(&plan);
    let (PlanRecord::Copy(a), PlanRecord::Copy(b)) = (&ops[1], &ops[2]) else {
        panic!("copy ops expected");
    };
    let want = format!(
        "standard input: line 3: copy op {}..{} starts before the op on line 2 ends ({}): the ops are \
         not in output order, so the output would not be sorted; make the plan again with \
         pbf-overlap (and pbf-merge)",
        Key::from(a.first),
        Key::from(a.last),
        Key::from(b.last)
    );
    copy_fails(&swapped, &out, &[], &want);
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    // A copy op reading bytes another op reads already.
    let mut twice: Vec<PlanRecord> = ops[..3].to_vec();
    if let PlanRecord::Copy(c) = &mut twice[2] {
        c.offset = a.offset;
        c.length = a.length;
        c.blobs = a.blobs;
        c.frames.clear();
    }
    twice.push(ops[3].clone());
    let plan_twice = plan_bytes(
        &match &ops[0] {
            PlanRecord::Plan(h) => h.clone(),
            _ => panic!("plan record"),
        },
        &twice[1..],
        true,
    );
    copy_fails(
        &plan_twice,
        &out,
        &[],
        "and the op on line 2 already read bytes",
    );
    assert!(entries(dir.path()).is_empty());
}

/// Whether a file in `dir` takes a write past the page cache (`O_DIRECT`).
fn direct_writes_in(dir: &Path) -> bool {
    use pbf_output::direct::{ALIGN, AlignedBuf, Direct};
    let probe = fs::File::create(dir.join("direct-probe")).expect("probe");
    let works = Direct::open(&probe).is_some_and(|d| {
        d.write_at(AlignedBuf::new(ALIGN as usize).bytes(), 0)
            .unwrap_or(false)
    });
    fs::remove_file(dir.join("direct-probe")).expect("remove probe");
    works
}

#[test]
fn verbose_reports_how_the_ranges_were_copied() {
    let dir = tempfile::tempdir().expect("dir");
    let input = data("sorted-andorra.osm.pbf");
    let (src, blobs) = index(&input);
    let refs: Vec<&BlobRecord> = blobs.iter().collect();
    let data_bytes: u64 = blobs.iter().map(|b| b.length).sum();
    let direct = direct_writes_in(dir.path());
    for (args, how) in [
        (&["--kernel-copy"][..], "copied in the kernel"),
        (
            &[][..],
            if direct {
                "past the page cache"
            } else {
                "copied in the kernel"
            },
        ),
    ] {
        let out = dir.path().join("out.pbf");
        let mut all = vec!["-vv", "-O", "-o", out.to_str().expect("path")];
        all.extend_from_slice(args);
        let o = pbf_copy(&plan_for(&src, &refs, false), &all);
        assert!(o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(&format!("{} copy ops", blobs.len()))
                && err.contains(&format!("{data_bytes} {how}")),
            "{args:?}: {err}"
        );
        assert_eq!(opl(&out), opl(&input), "{args:?}");
    }
}

#[test]
fn add_indexdata_makes_the_next_index_header_only() {
    let dir = tempfile::tempdir().expect("dir");
    for input in [
        data("sorted-liechtenstein.osm.pbf"),
        data("history-niue.osh.pbf"),
    ] {
        let (src, blobs) = index(&input);
        assert!(
            blobs.iter().all(|b| b.sorted),
            "copy ops hold sorted blobs only"
        );
        let refs: Vec<&BlobRecord> = blobs.iter().collect();
        let out = dir.path().join(format!("{}.ix.pbf", name(&input)));
        copy_ok(&plan_for(&src, &refs, true), &out, &["--add-indexdata"]);
        let (_, again) = index(&out);
        assert_eq!(again.len(), blobs.len());
        for (a, b) in again.iter().zip(&blobs) {
            assert_eq!(a.from, pbf_stream::KeysFrom::Indexdata, "{a:?}");
            assert_eq!((a.first, a.last, a.counts), (b.first, b.last, b.counts));
            assert!(a.sorted);
        }
        assert_eq!(opl(&out), opl(&input), "osmium reads the new BlobHeaders");
        assert!(osmium_ordered(&out));
        // The same keys come out of a full scan.
        let mut c = bin("pbf-index");
        c.args(["-q", "--decode"]).arg(&out);
        let decoded: Vec<BlobRecord> = records::<IndexRecord>(&succeeds(c))
            .into_iter()
            .filter_map(|r| match r {
                IndexRecord::Blob(b) => Some(b),
                _ => None,
            })
            .collect();
        for (a, b) in decoded.iter().zip(&again) {
            assert_eq!(
                (a.first, a.last, a.counts, a.sorted),
                (b.first, b.last, b.counts, b.sorted)
            );
        }
    }
}

#[test]
fn add_indexdata_needs_frames() {
    let dir = tempfile::tempdir().expect("dir");
    let (src, blobs) = index(&data("sorted-andorra.osm.pbf"));
    let refs: Vec<&BlobRecord> = blobs.iter().collect();
    let out = dir.path().join("out.pbf");
    copy_fails(
        &plan_for(&src, &refs, false),
        &out,
        &["--add-indexdata"],
        "\"frames\"",
    );
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn plan_with_merge_ops_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let (src, blobs) = index(&data("sorted-andorra.osm.pbf"));
    let merge = |b: &BlobRecord| {
        PlanRecord::Merge(MergeOp {
            inputs: vec![MergeInput {
                source: 0,
                offset: b.offset,
                length: b.length,
                first: b.first,
                last: b.last,
                sorted: b.sorted,
                elements: b.counts.total(),
            }],
            first: b.first,
            last: b.last,
            elements: b.counts.total(),
        })
    };
    let ops = vec![
        PlanRecord::Copy(copy_op(&blobs[0], false)),
        merge(&blobs[1]),
        PlanRecord::Copy(copy_op(&blobs[2], false)),
        merge(&blobs[3]),
    ];
    let out = dir.path().join("out.pbf");
    copy_fails(
        &plan_bytes(&plan_header(&src), &ops, true),
        &out,
        &[],
        "plan still has 2 merge ops: run pbf-merge first",
    );
    assert!(entries(dir.path()).is_empty());
}

#[test]
fn changed_source_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let input = dir.path().join("in.osm.pbf");
    fs::copy(data("sorted-andorra.osm.pbf"), &input).expect("copy input");
    let plan = plan_in_file_order(&input);
    let f = fs::File::options().write(true).open(&input).expect("open");
    f.set_modified(std::time::SystemTime::now() + Duration::from_secs(5))
        .expect("touch");
    drop(f);
    let out = dir.path().join("out.pbf");
    copy_fails(&plan, &out, &[], "changed since it was indexed");
    assert_eq!(entries(dir.path()), ["in.osm.pbf"]);
}

#[test]
fn plan_without_end_leaves_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let (src, blobs) = index(&data("sorted-andorra.osm.pbf"));
    let ops: Vec<PlanRecord> = blobs
        .iter()
        .map(|b| PlanRecord::Copy(copy_op(b, false)))
        .collect();
    let out = dir.path().join("out.pbf");
    copy_fails(
        &plan_bytes(&plan_header(&src), &ops, false),
        &out,
        &[],
        "without an end record",
    );
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));

    // On standard output the frames already went out: the stream ends with
    // bytes no reader accepts, so the reader downstream fails as well.
    let o = pbf_copy(&plan_bytes(&plan_header(&src), &ops, false), &["-o", "-"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        o.stdout.ends_with(&pbf_output::STREAM_POISON),
        "stream is poisoned"
    );
    let streamed = dir.path().join("streamed.pbf");
    fs::write(&streamed, &o.stdout).expect("write");
    let mut c = osmium();
    c.args(["fileinfo", "-e"]).arg(&streamed);
    assert!(!run(c).status.success(), "osmium refuses a failed stream");
}

#[test]
fn existing_output_needs_overwrite_and_inputs_are_never_outputs() {
    let dir = tempfile::tempdir().expect("dir");
    let input = dir.path().join("in.osm.pbf");
    fs::copy(data("sorted-andorra.osm.pbf"), &input).expect("copy input");
    let plan = plan_in_file_order(&input);
    let out = dir.path().join("out.pbf");
    fs::write(&out, b"precious").expect("old out");
    copy_fails(&plan, &out, &[], "use -O/--overwrite");
    assert_eq!(fs::read(&out).expect("out"), b"precious");
    copy_ok(&plan, &out, &["-O"]);
    assert_eq!(opl(&out), opl(&input));
    let before = fs::read(&input).expect("input");
    copy_fails(&plan, &input, &["-O"], "is the same file as the input");
    assert_eq!(fs::read(&input).expect("input"), before);
    assert_eq!(entries(dir.path()), ["in.osm.pbf", "out.pbf"]);
}

#[test]
fn stdout_streams_into_osmium() {
    let (src, blobs) = index(&data("sorted-liechtenstein.osm.pbf"));
    let refs: Vec<&BlobRecord> = blobs.iter().collect();
    let plan = plan_for(&src, &refs, false);
    let mut copy = bin("pbf-copy");
    copy.args(["-o", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut copy = copy.spawn().expect("spawn pbf-copy");
    let mut stdin = copy.stdin.take().expect("stdin");
    stdin.write_all(&plan).expect("plan");
    drop(stdin);
    let mut info = osmium();
    info.args(["fileinfo", "-e", "-j", "-F", "pbf", "-"])
        .stdin(Stdio::from(copy.stdout.take().expect("stdout")));
    let info = info.output().expect("osmium");
    let copied = copy.wait_with_output().expect("wait");
    assert!(
        copied.status.success(),
        "{}",
        String::from_utf8_lossy(&copied.stderr)
    );
    assert!(
        info.status.success(),
        "{}",
        String::from_utf8_lossy(&info.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&info.stdout).expect("json");
    assert_eq!(v["data"]["objects_ordered"], true);
    let nodes: u64 = blobs.iter().map(|b| b.counts[Kind::Node]).sum();
    assert_eq!(v["data"]["count"]["nodes"], nodes);
}

#[test]
fn a_reader_that_stops_early_ends_the_copy_by_sigpipe() {
    let dir = tempfile::tempdir().expect("dir");
    let (src, blobs) = index(&data("sorted-liechtenstein.osm.pbf"));
    let refs: Vec<&BlobRecord> = blobs.iter().collect();
    let plan = plan_for(&src, &refs, false);
    for tool in ["pbf-copy", "pbf-reflink"] {
        let mut c = bin(tool);
        c.args(["-q", "-o", "-"])
            .current_dir(dir.path())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn");
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(&plan).expect("plan");
        drop(stdin);
        // Read 1000 bytes of the 2.7 MB and close the pipe, like head -c.
        let mut head = [0u8; 1000];
        let mut stdout = child.stdout.take().expect("stdout");
        std::io::Read::read_exact(&mut stdout, &mut head).expect("the first bytes");
        drop(stdout);
        let o = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.signal(), Some(13), "{tool}: {:?} {err}", o.status);
        assert_eq!(err, "", "{tool}: quiet, as any filter whose reader stopped");
    }
}

/// A copy plan of a fixture in file order, where its first half of ops
/// ends (a byte offset into the plan), and the bytes those ops copy.
fn half_a_plan() -> (Vec<u8>, usize, u64) {
    let (src, blobs) = index(&data("sorted-kualalumpur.osm.pbf"));
    let ops: Vec<PlanRecord> = blobs
        .iter()
        .map(|b| PlanRecord::Copy(copy_op(b, false)))
        .collect();
    let plan = plan_bytes(&plan_header(&src), &ops, false);
    let half = plan
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b == b'\n')
        .nth(ops.len() / 2)
        .map(|(i, _)| i + 1)
        .expect("enough lines");
    let copied = blobs[..ops.len() / 2].iter().map(|b| b.length).sum();
    (plan, half, copied)
}

/// Start pbf-copy on a plan fed through a pipe that stays open after the
/// header and the first ops: the copy is under way, its temporary file holds
/// data, and it waits for the rest of the plan. Returns the child, its plan
/// pipe and what the temporary file's descriptor shows: `/DIR/#INODE
/// (deleted)` for an unnamed file in DIR.
// The child is handed to the caller, which waits for it; clippy cannot see that.
#[allow(clippy::zombie_processes)]
fn copy_in_progress(
    dir: &Path,
    out: &Path,
    args: &[&str],
) -> (Child, std::process::ChildStdin, PathBuf) {
    let (plan, half, expected) = half_a_plan();
    let mut c = bin("pbf-copy");
    // Through the page cache, the temporary file grows with the copy, which
    // is how this sees it under way; staged appends reach the file 8 MiB at
    // a time, and this input is smaller.
    c.arg("--kernel-copy")
        .args(args)
        .arg("-o")
        .arg(out)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(&plan[..half])
        .expect("first half of the plan");
    stdin.flush().expect("flush");
    let deadline = Instant::now() + Duration::from_secs(30);
    let fds = PathBuf::from(format!("/proc/{}/fd", child.id()));
    loop {
        let temp = fs::read_dir(&fds).into_iter().flatten().find_map(|e| {
            let fd = e.ok()?.path();
            let target = fs::read_link(&fd).ok()?;
            let len = fs::metadata(&fd).map(|m| m.len()).unwrap_or(0);
            (target.parent() == Some(dir) && len > expected).then_some(target)
        });
        if let Some(t) = temp {
            return (child, stdin, t);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("pbf-copy never got half way");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn send(child: &Child, signal: &str) {
    let st = Command::new("kill")
        .args(["-s", signal, &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(st.success());
}

#[test]
fn sigint_and_sigterm_mid_copy_remove_the_temporary_file() {
    for (signal, number) in [("INT", 2), ("TERM", 15), ("HUP", 1)] {
        let dir = tempfile::tempdir().expect("dir");
        let out = dir.path().join("out.osm.pbf");
        let (mut child, stdin, temp) = copy_in_progress(dir.path(), &out, &[]);
        assert!(name(&temp).ends_with(" (deleted)"), "unnamed: {temp:?}");
        send(&child, signal);
        let number = match ignored(number) {
            // A signal ignored here (SIGHUP under nohup; SIGINT is
            // restored in main.rs) is ignored by the copier too, as the one
            // who started it asked; SIGTERM must still clean up.
            true => {
                std::thread::sleep(Duration::from_millis(300));
                let running = child.try_wait().expect("try_wait").is_none();
                assert!(running, "an inherited ignored SIG{signal} stays ignored");
                send(&child, "TERM");
                15
            }
            false => number,
        };
        let status = wait_at_most(&mut child, Duration::from_secs(30));
        drop(stdin);
        assert_eq!(status.signal(), Some(number), "dies of SIG{signal}");
        assert!(!out.exists(), "no OUT after SIG{signal}");
        assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
    }
}

/// `-o - > file` interrupted: the file the shell made must not pass for a
/// complete PBF. The copier writes the stream poison as it dies, so it ends
/// in bytes no reader accepts.
#[test]
fn sigint_mid_stream_leaves_a_file_no_reader_accepts() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("out.osm.pbf");
    let (plan, half, expected) = half_a_plan();
    let mut c = bin("pbf-copy");
    c.args(["-o", "-"])
        .stdin(Stdio::piped())
        .stdout(fs::File::create(&out).expect("out"))
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(&plan[..half]).expect("half the plan");
    stdin.flush().expect("flush");
    let deadline = Instant::now() + Duration::from_secs(30);
    while fs::metadata(&out).map_or(0, |m| m.len()) < expected {
        assert!(Instant::now() < deadline, "pbf-copy never got half way");
        std::thread::sleep(Duration::from_millis(20));
    }
    send(&child, "INT");
    let status = wait_at_most(&mut child, Duration::from_secs(30));
    drop(stdin);
    assert_eq!(status.signal(), Some(2), "dies of SIGINT");
    let bytes = fs::read(&out).expect("read out");
    assert!(
        bytes.ends_with(&pbf_output::STREAM_POISON),
        "the cut stream ends in the poison ({} bytes)",
        bytes.len()
    );
    let st = Command::new("osmium")
        .args(["fileinfo", "-e", "-F", "pbf"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("osmium");
    assert!(!st.success(), "osmium read the cut stream as a whole file");
}

/// Whether this process ignores signal `number` (SIGHUP under nohup(1)):
/// children inherit that disposition.
fn ignored(number: i32) -> bool {
    let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| mask >> (number - 1) & 1 != 0)
}

/// The temporary file has no name (ext4, XFS, btrfs, tmpfs): SIGKILL
/// leaves nothing behind, beside OUT or in --tmpdir.
#[test]
fn sigkill_mid_copy_leaves_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("out.osm.pbf");
    let work = dir.path().join("work");
    fs::create_dir(&work).expect("work");
    let work_s = work.to_str().expect("utf-8");
    let runs: [(&Path, &[&str]); 2] = [(dir.path(), &[]), (&work, &["--tmpdir", work_s])];
    for (temp_dir, args) in runs {
        let (mut child, stdin, temp) = copy_in_progress(temp_dir, &out, args);
        assert!(name(&temp).ends_with(" (deleted)"), "unnamed: {temp:?}");
        child.kill().expect("SIGKILL");
        let st = child.wait().expect("wait");
        drop(stdin);
        assert_eq!(st.signal(), Some(9));
        assert_eq!(entries(dir.path()), ["work"], "{args:?}");
        assert!(entries(&work).is_empty(), "{args:?}: {:?}", entries(&work));
    }
}

/// `--check-cmd` judges the complete output under a temporary name before
/// OUT is written: a no leaves OUT as it was and nothing else behind.
#[test]
fn check_cmd_decides_whether_out_is_written() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("out.osm.pbf");
    let input = data("sorted-kualalumpur.osm.pbf");
    let plan = plan_in_file_order(&input);
    let out_s = out.to_str().expect("utf-8");
    // The check sees the whole file, by a name beside OUT.
    let seen = dir.path().join("seen");
    let record = format!("cat \"$1\" > {}; exit 1", seen.display());
    for existing in [None, Some(&b"the previous output"[..])] {
        if let Some(bytes) = existing {
            fs::write(&out, bytes).expect("write");
        }
        let o = pbf_copy(&plan, &["-O", "-o", out_s, "--check-cmd", &record]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.contains("--check-cmd failed (exit 1)") && err.contains("was not written"),
            "{err}"
        );
        assert_eq!(fs::read(&out).ok().as_deref(), existing);
        let mut left = entries(dir.path());
        left.retain(|e| e != "out.osm.pbf" && e != "seen");
        assert!(left.is_empty(), "{left:?}");
    }
    fs::remove_file(&out).expect("rm");
    let check = format!(
        "{} -q --decode \"$1\" | {} --check",
        bin_quoted("pbf-index"),
        bin_quoted("pbf-overlap")
    );
    copy_ok(&plan, &out, &["--check-cmd", &check]);
    assert_eq!(fs::read(&out).expect("out"), fs::read(&seen).expect("seen"));
    assert_eq!(opl(&out), opl(&input));
    let o = pbf_copy(&plan, &["-o", "-", "--check-cmd", "true"]);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.stdout.is_empty());
}

/// A signal that ends pbf-copy while `--check-cmd` runs ends the check too:
/// its shell and what the shell started (in their own process group) are
/// gone when pbf-copy is, a check deaf to SIGTERM after a grace period, so
/// nothing of it speaks after the prompt is back.
#[test]
fn a_signal_during_check_cmd_stops_the_check() {
    let plan = plan_in_file_order(&data("sorted-kualalumpur.osm.pbf"));
    for deaf in ["", "trap '' TERM; "] {
        let dir = tempfile::tempdir().expect("dir");
        let (out, group) = (dir.path().join("out.osm.pbf"), dir.path().join("group"));
        let check = format!(
            "{deaf}echo $$ > {}.tmp && mv {0}.tmp {0}; sleep 30; echo late >&2",
            group.display()
        );
        let mut c = bin("pbf-copy");
        c.args(["-o", out.to_str().expect("utf-8"), "--check-cmd", &check])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(&plan)
            .expect("plan");
        let pgid = wait_for_pid_file(&group, Duration::from_secs(30));
        kill_pid(child.id(), "TERM");
        let o = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.signal(), Some(15), "{deaf}: {err}");
        wait_for_group_gone(pgid, Duration::from_millis(500));
        assert!(!err.contains("late"), "{deaf}: {err}");
        assert_eq!(entries(dir.path()), ["group"], "{deaf}");
    }
}

#[test]
fn existing_output_survives_a_killed_copy() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("out.osm.pbf");
    fs::write(&out, b"old output").expect("old");
    let plan = plan_in_file_order(&data("sorted-kualalumpur.osm.pbf"));
    let half = plan.len() / 2;
    let mut c = bin("pbf-copy");
    c.args(["-O", "-o"])
        .arg(&out)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = c.spawn().expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(&plan[..half]).expect("half");
    std::thread::sleep(Duration::from_millis(200));
    send(&child, "INT");
    child.wait().expect("wait");
    drop(stdin);
    assert_eq!(fs::read(&out).expect("out"), b"old output");
    assert_eq!(entries(dir.path()), ["out.osm.pbf"]);
}

#[test]
fn spool_sources_are_checked_per_range_and_removed_unless_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let spool = dir.path().join("merge.spool");
    // A spool holds data frames only: the file without its OSMHeader frame.
    let (mut src, mut blobs) = index(&data("sorted-andorra.osm.pbf"));
    let skip = blobs[0].offset;
    let bytes = fs::read(data("sorted-andorra.osm.pbf")).expect("data");
    fs::write(&spool, &bytes[skip as usize..]).expect("spool");
    blobs.iter_mut().for_each(|b| b.offset -= skip);
    src.file.path = spool.clone();
    let refs: Vec<&BlobRecord> = blobs.iter().collect();
    let mut header = plan_header(&src);
    // A spool still growing: its recorded size and mtime are not checked.
    header.sources[0].spool = true;
    header.sources[0].file.mtime = 0;
    let ops: Vec<PlanRecord> = refs
        .iter()
        .map(|b| PlanRecord::Copy(copy_op(b, false)))
        .collect();
    let plan = plan_bytes(&header, &ops, true);
    let out = dir.path().join("out.pbf");
    copy_ok(&plan, &out, &["--keep-spools"]);
    assert!(spool.exists(), "--keep-spools keeps the spool");
    fs::remove_file(&out).expect("rm");
    copy_ok(&plan, &out, &["--keep-spools", "--remove-spools"]);
    assert!(
        !spool.exists(),
        "the last of --keep-spools and --remove-spools wins"
    );
    assert_eq!(opl(&out), opl(&data("sorted-andorra.osm.pbf")));
    fs::write(&spool, &bytes[skip as usize..]).expect("spool");
    fs::remove_file(&out).expect("rm");
    copy_ok(&plan, &out, &[]);
    assert!(!spool.exists(), "spool removed after the commit by default");

    // A spool shorter than the plan's ranges (pbf-merge died): refused, and
    // the spool is removed all the same, unless kept.
    let short = &bytes[skip as usize..(bytes.len() + skip as usize) / 2];
    fs::write(&spool, short).expect("short spool");
    let out2 = dir.path().join("out2.pbf");
    copy_fails(&plan, &out2, &["--keep-spools"], "pbf-merge died");
    assert!(
        spool.exists(),
        "--keep-spools keeps the spool when the copy fails"
    );
    copy_fails(&plan, &out2, &[], "pbf-merge died");
    assert!(!spool.exists(), "spool removed when the copy failed");
    assert_eq!(entries(dir.path()), ["out.pbf"]);
}

#[test]
fn other_filesystem_falls_back_and_disk_full_leaves_nothing() {
    let Some(fs_small) = Mount::tmpfs_or_skip("4m", "disk full under pbf-copy") else {
        return;
    };
    let input = data("sorted-liechtenstein.osm.pbf");
    let (src, blobs) = index(&input);
    let refs: Vec<&BlobRecord> = blobs.iter().collect();
    let out = fs_small.path().join("out.pbf");
    let plan = plan_for(&src, &refs, false);
    let o = pbf_copy(
        &plan,
        &["-vv", "--kernel-copy", "-o", out.to_str().expect("path")],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let data_bytes: u64 = blobs.iter().map(|b| b.length).sum();
    assert!(
        err.contains(&format!("{data_bytes} by read/write")),
        "copy_file_range refuses another filesystem, read/write takes over: {err}"
    );
    assert_eq!(opl(&out), opl(&input));
    let before = fs::read(&out).expect("out");

    // 2.7 MB are used; a second copy cannot fit in the remaining 1.3 MB.
    let out2 = fs_small.path().join("out2.pbf");
    for how in [&[][..], &["--kernel-copy"][..]] {
        copy_fails(&plan, &out2, how, "No space left on device");
        let mut args = vec!["-o", out2.to_str().expect("path")];
        args.extend_from_slice(how);
        let o = pbf_copy(&plan, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains(out2.to_str().expect("path")),
            "{how:?} names the output: {err}"
        );
    }
    assert_eq!(entries(fs_small.path()), ["out.pbf"]);
    assert_eq!(fs::read(&out).expect("out"), before);
}

/// The compression label of every data frame of `path`, in file order.
fn compressions(path: &Path) -> Vec<String> {
    let (_, blobs) = index(path);
    let name = |b: pbf_stream::BlobRecord| pbf_stream::codec_name(b.compression).to_owned();
    blobs.into_iter().map(name).collect()
}

#[test]
fn spools_compressed_copies_merged_frames_as_they_are() {
    let dir = tempfile::tempdir().expect("dir");
    // 11 blobs copied, 2 merged.
    let input = data("unsorted-josm-negative-ids.osm.pbf");
    let spool = dir.path().join("spool.pbf");
    let mut c = bin("pbf-index");
    c.arg("-q").arg(&input);
    let idx = succeeds(c);
    let plan = run_with_input(bin("pbf-overlap"), &idx);
    assert!(
        plan.status.success(),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    let mut merge = bin("pbf-merge");
    merge
        .args(["-q", "--compression", "zlib:1", "--spool"])
        .arg(&spool);
    let merged = run_with_input(merge, &plan.stdout);
    assert!(
        merged.status.success(),
        "{}",
        String::from_utf8_lossy(&merged.stderr)
    );
    let ops: Vec<PlanRecord> = records(&merged.stdout);
    let spool_id = match &ops[0] {
        PlanRecord::Plan(h) => h.sources.iter().find(|s| s.spool).expect("a spool").id,
        other => panic!("plan record first, got {other:?}"),
    };
    let from_spool: u64 = ops
        .iter()
        .filter_map(|r| match r {
            PlanRecord::Copy(c) if c.source == spool_id => Some(c.blobs),
            _ => None,
        })
        .sum();
    assert!(
        from_spool > 0,
        "the file merges, so frames come from the spool"
    );

    let all = dir.path().join("all-lz4.pbf");
    copy_ok(
        &merged.stdout,
        &all,
        &["-q", "--keep-spools", "--recompress", "lz4"],
    );
    assert!(compressions(&all).iter().all(|c| c == "lz4"));

    let kept = dir.path().join("spools-kept.pbf");
    let args = ["-q", "--recompress", "lz4", "--spools-compressed"];
    copy_ok(&merged.stdout, &kept, &args);
    let labels = compressions(&kept);
    let zlib = labels.iter().filter(|c| *c == "zlib").count() as u64;
    let lz4 = labels.iter().filter(|c| *c == "lz4").count() as u64;
    assert_eq!(zlib, from_spool, "spool frames keep pbf-merge's zlib");
    assert_eq!(zlib + lz4, labels.len() as u64, "input frames become lz4");
    assert!(lz4 > 0);
    assert_eq!(opl(&kept), opl(&all));
    assert!(!spool.exists(), "removed after the second copy");

    // Only with --recompress.
    let o = pbf_copy(&merged.stdout, &["-o", "x.pbf", "--spools-compressed"]);
    assert_eq!(o.status.code(), Some(2));
}

/// `-v` gives the rate over the time spent copying and committing, not over
/// the time the copier waited for its plan (here 1.5 s, as behind a merge).
#[test]
fn verbose_rate_leaves_out_the_wait_for_the_plan() {
    let dir = tempfile::tempdir().expect("dir");
    let input = data("sorted-liechtenstein.osm.pbf");
    let plan = dir.path().join("plan.jsonl");
    fs::write(&plan, plan_in_file_order(&input)).expect("plan");
    let out = dir.path().join("out.osm.pbf");
    let o = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "(sleep 1.5; cat \"$1\") | {} -vv -o \"$2\"",
            bin_quoted("pbf-copy")
        ))
        .args([
            "-",
            plan.to_str().expect("utf-8"),
            out.to_str().expect("utf-8"),
        ])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // "...; T s, of which C s copying and committing (R MB/s); ..."
    let field = |before: &str, after: &str| -> f64 {
        let start = err.find(before).map(|at| at + before.len());
        let text = start.map(|s| &err[s..]).unwrap_or_default();
        let end = text.find(after).unwrap_or(0);
        let word = text[..end].rsplit(' ').next().unwrap_or_default();
        word.parse()
            .unwrap_or_else(|_| panic!("no number before {after:?}: {err}"))
    };
    let total = field("; ", " s, of which");
    let copying = field(" s, of which ", " s copying and committing");
    let rate = field("copying and committing (", " MB/s)");
    let written = fs::metadata(&out).expect("out").len() as f64;
    assert!(total >= 1.5, "{err}");
    assert!(copying + 1.0 < total, "the wait counted as copying: {err}");
    assert!(
        rate > written / total / 1e6,
        "the rate is over the whole run: {err}"
    );
}
