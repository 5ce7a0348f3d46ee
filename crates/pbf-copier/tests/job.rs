//! The shared half of the copiers, through its API as a copier uses it:
//! the options, opening a job (an existing output refused before the plan
//! is read, a changed source refused), the plan loop (records in plan
//! order, merge ops counted and refused, ops out of order and a plan cut
//! short refused, nothing left behind), the output header replaced by a
//! `header` record, and spools removed once copied unless kept. The
//! copier here copies each op with `OutputFile::copy_from`, as pbf-copy
//! does without its options.

use std::path::{Path, PathBuf};

use clap::{ArgMatches, Command};
use pbf_copier::{Job, Options, OutputHead, Step, for_each_copy};
use pbf_format::header::Header;
use pbf_stream::{
    MergeInput, MergeOp, OutputHeader, PlanRecord, SortedThrough, SourceRef, Unsorted,
};
use pbf_testkit::{
    Indexed, arg, copied, data_frames, entries, plan_header, sorted_plan, write_plan, written,
};

const VERBOSITY_HELP: pbf_cli::VerbosityHelp = pbf_cli::VerbosityHelp {
    verbose: "Say more",
    quiet: "Say less",
};

/// A copier's command line: the crate's shared options.
fn command() -> Command {
    let cmd = pbf_copier::output_args(Command::new("test-copier"), "Output file");
    pbf_copier::write_args(cmd, "Add indexdata", VERBOSITY_HELP)
}

fn matches(args: &[&str]) -> ArgMatches {
    command()
        .try_get_matches_from(std::iter::once("test-copier").chain(args.iter().copied()))
        .expect("arguments parse")
}

/// What the loop handed the copier, in order.
#[derive(Debug, PartialEq)]
enum Seen {
    Header(Option<String>),
    Unsorted,
    Sorted(u64),
    Copy(u64),
}

/// Run the job of `args` as a copier does, writing the header first (as
/// pbf-copy does to copy ahead behind it); returns what the loop handed
/// over.
fn copy(args: &[&str]) -> anyhow::Result<Vec<Seen>> {
    let m = matches(args);
    let opts = Options::from_matches(&m);
    let mut job = Job::open(&m)?;
    let mut head = OutputHead::new(&job.plan.header().header);
    head.write(&mut job.out)?;
    let bar = (job.sources.known_bytes(), "copying", opts.bars);
    let (sources, out) = (&mut job.sources, &mut job.out);
    let mut seen = Vec::new();
    let ops = for_each_copy(&mut job.plan, &job.plan_name, bar, |step, _line| {
        match step {
            Step::Header(h) => {
                seen.push(Seen::Header(h.header.writingprogram.clone()));
                return head.replace(&h.header, out);
            }
            Step::Unsorted => seen.push(Seen::Unsorted),
            Step::Sorted(s) => seen.push(Seen::Sorted(s.through)),
            Step::Copy(op) => {
                seen.push(Seen::Copy(op.offset));
                head.write(out)?;
                let (file, path) = sources.range(op.source, op.offset, op.length)?;
                out.copy_from(file, path, op.offset, op.length)?;
            }
        }
        Ok(())
    })?;
    head.write(out)?;
    let copies = seen.iter().filter(|s| matches!(s, Seen::Copy(_))).count();
    assert_eq!(ops.ops, copies as u64, "the loop counts the copy ops");
    pbf_copier::finish("test-copier", job.out, &mut job.sources, None)?;
    Ok(seen)
}

/// The real sorted file these tests copy, copied into `dir`.
fn input(dir: &Path) -> Indexed {
    copied(dir, "sorted-andorra.osm.pbf")
}

/// The sorted plan of `file` with `records` put after the plan record.
fn plan_with(dir: &Path, file: &Indexed, records: Vec<PlanRecord>, end: bool) -> PathBuf {
    let (header, ops) = sorted_plan(file, false);
    write_plan(dir, &header, &[records, ops].concat(), end)
}

#[test]
fn keep_and_remove_spools_take_the_last_given() {
    let keep = |args: &[&str]| {
        let mut all = vec!["-o", "out.osm.pbf"];
        all.extend_from_slice(args);
        matches(&all).get_flag("keep-spools")
    };
    assert!(!keep(&[]));
    assert!(keep(&["--keep-spools"]));
    assert!(!keep(&["--keep-spools", "--remove-spools"]));
    assert!(keep(&["--remove-spools", "--keep-spools"]));
    assert!(
        command()
            .try_get_matches_from(["test-copier", "-q", "-v", "-o", "out"])
            .is_err(),
        "-q and -v exclude each other"
    );
}

#[test]
fn an_existing_output_is_refused_before_the_plan_is_read() {
    let dir = tempfile::tempdir().expect("dir");
    let out = dir.path().join("out.osm.pbf");
    std::fs::write(&out, b"an older output").expect("write");
    let missing = dir.path().join("no-plan.jsonl");
    let err = copy(&[arg(&missing), "-o", arg(&out)]).expect_err("exists");
    let line = pbf_cli::one_line(&err);
    assert!(err.downcast_ref::<pbf_cli::Usage>().is_some(), "{line}");
    assert!(
        line.ends_with("exists (use -O/--overwrite to replace it)"),
        "{line}"
    );
    // With -O, the plan that cannot be opened is the usage error.
    let err = copy(&["-O", arg(&missing), "-o", arg(&out)]).expect_err("no plan");
    let line = pbf_cli::one_line(&err);
    assert!(err.downcast_ref::<pbf_cli::Usage>().is_some(), "{line}");
    assert!(line.contains("no-plan.jsonl"), "{line}");
    assert_eq!(std::fs::read(&out).expect("out"), b"an older output");
}

#[test]
fn records_reach_the_copier_in_plan_order_and_a_header_record_starts_over() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let generator = "a header record's generator, longer than the first";
    let header = Header {
        writingprogram: Some(generator.into()),
        ..file.header.clone()
    };
    let plan = plan_with(
        dir.path(),
        &file,
        vec![
            PlanRecord::Sorted(SortedThrough {
                source: 0,
                through: 100,
            }),
            PlanRecord::Header(OutputHeader {
                header,
                copy_bytes: None,
            }),
            PlanRecord::Unsorted(Unsorted {}),
        ],
        true,
    );
    let out = dir.path().join("out.osm.pbf");
    let seen = copy(&["-q", arg(&plan), "-o", arg(&out)]).expect("copy");
    let mut want = vec![
        Seen::Sorted(100),
        Seen::Header(Some(generator.into())),
        Seen::Unsorted,
    ];
    want.extend(file.blobs.iter().map(|b| Seen::Copy(b.0)));
    assert_eq!(seen, want);
    let w = written(&out);
    assert_eq!(w.header.writingprogram.as_deref(), Some(generator));
    assert_eq!(w.frames, data_frames(&file), "the old header is gone");
}

#[test]
fn merge_ops_left_in_the_plan_are_counted_and_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let (header, mut ops) = sorted_plan(&file, false);
    assert!(file.blobs.len() >= 3, "the input has three blobs");
    for (i, &(offset, length, s)) in file.blobs.iter().enumerate().skip(1).take(2) {
        let (first, last) = (s.first.into(), s.last.into());
        ops[i] = PlanRecord::Merge(MergeOp {
            inputs: vec![MergeInput {
                source: 0,
                offset,
                length,
                first,
                last,
                sorted: s.sorted,
                elements: s.counts.iter().sum(),
            }],
            first,
            last,
            elements: s.counts.iter().sum(),
        });
    }
    let plan = write_plan(dir.path(), &header, &ops, true);
    let out = dir.path().join("out.osm.pbf");
    let err = copy(&["-q", arg(&plan), "-o", arg(&out)]).expect_err("merge ops");
    let line = pbf_cli::one_line(&err);
    assert!(
        line.ends_with("line 3: plan still has 2 merge ops: run pbf-merge first"),
        "{line}"
    );
    assert_eq!(entries(dir.path()), ["in.osm.pbf", "plan.jsonl"]);
}

#[test]
fn a_plan_cut_short_or_out_of_order_leaves_nothing() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let out = dir.path().join("out.osm.pbf");
    let plan = plan_with(dir.path(), &file, Vec::new(), false);
    let err = copy(&["-q", arg(&plan), "-o", arg(&out)]).expect_err("no end");
    assert!(pbf_cli::one_line(&err).contains("plan.jsonl"), "{err:#}");
    assert_eq!(entries(dir.path()), ["in.osm.pbf", "plan.jsonl"]);
    let (header, mut ops) = sorted_plan(&file, false);
    ops.swap(0, 1);
    let plan = write_plan(dir.path(), &header, &ops, true);
    let err = copy(&["-q", arg(&plan), "-o", arg(&out)]).expect_err("out of order");
    let line = pbf_cli::one_line(&err);
    assert!(
        line.contains("starts before the op on line 2 ends"),
        "{line}"
    );
    assert_eq!(entries(dir.path()), ["in.osm.pbf", "plan.jsonl"]);
}

#[test]
fn a_source_changed_since_it_was_indexed_is_refused() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let plan = plan_with(dir.path(), &file, Vec::new(), true);
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&file.source.file.path)
        .and_then(|f| f.set_modified(later))
        .expect("touch");
    let out = dir.path().join("out.osm.pbf");
    let err = copy(&["-q", arg(&plan), "-o", arg(&out)]).expect_err("changed");
    let line = pbf_cli::one_line(&err);
    assert!(line.contains("changed since it was indexed"), "{line}");
    assert!(!out.exists());
}

#[test]
fn spools_are_removed_once_copied_whole_unless_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let file = input(dir.path());
    let spool = dir.path().join("merged.spool");
    let out = dir.path().join("out.osm.pbf");
    // A spool holds data frames only: the input without its header frame.
    let bytes = std::fs::read(&file.source.file.path).expect("read");
    let start = file.data_start;
    let spool_plan = |skip_last: bool| {
        let source = SourceRef {
            file: pbf_stream::FileIdentity {
                path: spool.clone(),
                ..file.source.file.clone()
            },
            spool: true,
            ..file.source.clone()
        };
        let (_, ops) = sorted_plan(&file, false);
        let mut ops: Vec<PlanRecord> = ops
            .into_iter()
            .map(|op| match op {
                PlanRecord::Copy(c) => PlanRecord::Copy(pbf_stream::CopyOp {
                    offset: c.offset - start,
                    ..c
                }),
                other => other,
            })
            .collect();
        if skip_last {
            ops.pop();
        }
        write_plan(
            dir.path(),
            &plan_header(vec![source], &file.header),
            &ops,
            true,
        )
    };
    for (args, kept) in [
        (&[][..], false),
        (&["--keep-spools"][..], true),
        (&["--keep-spools", "--remove-spools"][..], false),
    ] {
        std::fs::write(&spool, &bytes[start as usize..]).expect("spool");
        let plan = spool_plan(false);
        let mut all = vec!["-q", "-O", arg(&plan), "-o", arg(&out)];
        all.extend_from_slice(args);
        copy(&all).expect("copy");
        assert_eq!(spool.exists(), kept, "{args:?}");
        assert_eq!(written(&out).frames, data_frames(&file), "{args:?}");
    }
    // A spool not read whole is no proof of a spool: kept, and named.
    std::fs::write(&spool, &bytes[start as usize..]).expect("spool");
    let plan = spool_plan(true);
    copy(&["-q", "-O", arg(&plan), "-o", arg(&out)]).expect("copy");
    assert!(spool.exists(), "a spool not copied whole is kept");
}
