//! `pbf-overlap`: the planning stage. It reads index streams (from pbf-index),
//! proves which blobs can be copied as they are, and writes the plan stream:
//! the output header, then copy ops for blobs whose key ranges overlap no
//! other blob and merge ops for the clusters that do, in output order. With
//! `--check` it only answers whether the input is already in order.

mod ahead;
mod check;
mod header;
mod input;
mod plan;

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Result, bail};
use clap::{Arg, ArgMatches, Command, value_parser};
use pbf_cli::args::{flag, option};
use pbf_format::Keep;
use pbf_stream::{Counts, PlanEnd, PlanRecord, StreamTime};

use ahead::Ahead;
use input::{Input, Purpose};
use plan::Op;

const NAME: &str = "pbf-overlap";

/// The command-line interface.
pub fn command() -> Command {
    let cmd = Command::new(NAME)
        .version(env!("CARGO_PKG_VERSION"))
        .about("Plan the sort: which blobs can be copied, which must be merged")
        .long_about(
            "Read index streams written by pbf-index and write the plan stream of pbf-stream(5) \
             on standard output: a plan record with the sources and the header of the output \
             file, the ops in output order, and an end record with counts.\n\n\
             Every blob is a segment [first key, last key] of the Sort.Type_then_ID key space. \
             The segments are sorted by first key and swept with a running maximum of the last \
             key, so overlap is transitive and blobs sharing a boundary key overlap. A blob that \
             overlaps no other and is sorted inside becomes a copy op; consecutive copies of \
             frames that are contiguous in the same file are coalesced into one copy op (at most \
             16384 frames each) carrying the keys of each frame (unless --no-frame-keys). Every \
             other cluster of blobs (several overlapping blobs, or one blob not sorted inside) \
             becomes a merge op for pbf-merge.\n\n\
             The output header keeps the inputs' required features (LocationsOnWays only when \
             every input has it; DenseNodes when a merge is planned), replaces Sort.* features by \
             Sort.Type_then_ID, keeps the union of the bounding boxes when every input has one, \
             and keeps source and replication fields only when all inputs agree.\n\n\
             With --check nothing is written to standard output: the exit status is 0 when the \
             input is already in order, 1 when it is not (the reason goes to standard \
             error), and 2 on an error, like cmp(1). Each file of the index streams is \
             judged on its own; with several, each reason names its file. Order is judged as osmium fileinfo -e \
             judges it, by type and id alone: repeated objects and versions of one object in \
             any order count as in order (the planner still merges such blobs). The check \
             judges the index it reads: a blob described by indexdata is judged by its \
             writer's word. To verify a file from its contents, index it with pbf-index \
             --decode (pbf-index --decode F | pbf-overlap --check), as pbf-sort --check does. \
             With \
             --objects-of INDEX it also answers 1 when the input does not hold as many objects \
             of each kind as INDEX (pbf-sort --check compares its output with its inputs this \
             way).",
        )
        .arg(
            Arg::new("index")
                .value_name("INDEX")
                .help(
                    "Index streams to read, each holding one or more sections; '-' or none \
                     reads standard input. Sources are numbered in order of appearance",
                )
                .num_args(0..),
        )
        .arg(flag(
            "check",
            "Write no plan; exit 0 when the input is already in order, 1 when not, 2 on error",
        ))
        .arg(
            option(
                "objects-of",
                "INDEX",
                "With --check, also exit 1 unless the input holds as many nodes, ways, relations \
                 and changesets as the index stream INDEX (its end records); when it does, say \
                 so in one line on standard error (unless -q). Messages name each side by the \
                 files its index describes",
            )
            .requires("check"),
        )
        .arg(
            option(
                "objects-of-as",
                "NAMES",
                "With --objects-of, name the files of that index NAMES in messages: for inputs \
                 the caller saved to files of its own (standard input, pipes)",
            )
            .requires("objects-of"),
        )
        .arg(
            option(
                "check-as",
                "NAME",
                "With --check, name the file the index describes NAME in messages: for a check \
                 run on a temporary file that becomes NAME once it passes (the copiers' \
                 --check-cmd)",
            )
            .requires("check"),
        )
        .arg(flag(
            "no-frame-keys",
            "Leave the per-frame keys out of copy ops. Only pbf-copy and pbf-reflink \
             --add-indexdata need them, and for a sorted gigabyte they are megabytes of JSON \
             that every later stage parses before the copy starts (pbf-sort passes this unless \
             --add-indexdata)",
        ))
        .arg(
            flag(
                "dedupe",
                "Plan for pbf-merge --dedupe: a blob whose keys repeat is merged (so the repeats \
                 are dropped), not copied because its equal keys are in order (pbf-sort passes \
                 this with --dedupe)",
            )
            .conflicts_with("check"),
        )
        .arg(
            flag(
                "latest",
                "Plan for pbf-merge --latest: blobs that share an object (kind and id, in any \
                 version) are merged, and so is a blob that holds one twice or comes from a \
                 history file; the output header drops HistoricalInformation (pbf-sort passes \
                 this with --latest)",
            )
            .conflicts_with("check"),
        )
        .arg(
            option(
                "sources",
                "N",
                "The index streams hold N sources. The plan record is then written as soon \
                 as the N-th source's first 16 blobs are read in order (each sorted, or its \
                 repeated keys in the merge's order, and none before the one before it), \
                 before the blobs are planned, and marked \"early\": true, unless the output \
                 header depends on the ops (DenseNodes is added for merges and no input \
                 requires it); with one source, pbf-copy starts copying ahead then. After it, \
                 \"sorted\" records say how far the last source is read in order (one at \
                 once, then one per 16 MiB) and an \"unsorted\" record when it is not. A \
                 blob is out of order, too, when one of the samples pbf-index took further on \
                 in its file sorts before its last key, so a file of two sorted files \
                 joined is seen before the index reaches the seam. Any other number of \
                 sources is an error (pbf-sort passes its number of inputs)",
            )
            .conflicts_with("check")
            .value_parser(value_parser!(u32).range(1..)),
        )
        .arg(option(
            "generator",
            "NAME",
            "writingprogram of the output header [default: pbf-sort <version>]",
        ));
    let help = pbf_cli::VerbosityHelp {
        verbose: "Print one summary line on standard error: blobs passed through in copy ops and \
                  their bytes, blobs and elements to merge in merge ops, and time; given twice \
                  (-vv), also the time spent parsing the index streams and serialising the plan \
                  (with --check: that the input holds the objects of --objects-of, when it \
                  does; -vv also the blobs checked, time and parsing time)",
        quiet: "No warning that inputs hold negative ids; with --check, do not explain why the \
                input is not in order",
    };
    pbf_cli::verbosity_args(cmd, help)
}

/// Run with parsed arguments.
pub fn run(m: &ArgMatches) -> Result<ExitCode> {
    if m.get_flag("check") {
        // Like cmp(1): 1 means "not in order", so an error must exit 2.
        return Ok(match read_check_input(m) {
            Ok((input, objects_of)) => check(&input, objects_of, m),
            Err(err) => {
                pbf_cli::warn(NAME, format!("error: {}", pbf_cli::one_line(&err)));
                ExitCode::from(2)
            }
        });
    }
    let keep = Keep::from_options(m.get_flag("dedupe"), m.get_flag("latest"));
    let made = header::Made {
        writingprogram: match m.get_one::<String>("generator") {
            Some(g) => g.clone(),
            None => format!("pbf-sort {}", env!("CARGO_PKG_VERSION")),
        },
        current_state: keep == Keep::Latest,
    };
    let out = Box::new(pbf_cli::stdout());
    let sources = m.get_one::<u32>("sources").copied();
    let mut plan = Ahead::new(out, made, sources, pbf_cli::verbosity(m) > 1);
    let blobs = plan::Blobs::new(keep);
    let mut input = Input::new(Purpose::Plan(blobs), pbf_cli::verbosity(m) > 1);
    input.read_all(&index_names(m), &mut |input| plan.record_read(input))?;
    let (tally, writing) = plan.finish(&input, !m.get_flag("no-frame-keys"))?;
    if !m.get_flag("quiet") {
        // Say once which inputs hold negative ids: osm2pgsql refuses them,
        // Valhalla reads them as huge positive ones.
        let negative = input.negative_ids.iter();
        let names: Vec<String> = negative
            .map(|&s| input.sources[s as usize].name())
            .collect();
        if !names.is_empty() {
            let verb = if names.len() == 1 { "holds" } else { "hold" };
            let names = names.join(", ");
            pbf_cli::warn(
                NAME,
                format!(
                    "warning: {names} {verb} negative ids, which osm2pgsql refuses and Valhalla \
                     misreads: `osmium renumber` gives every object a positive id"
                ),
            );
        }
        if header::replication_dropped(&input.headers) {
            let why = "the inputs' replication fields (timestamp, sequence number, base URL) \
                       differ: the output has none";
            pbf_cli::warn(NAME, format!("notice: {why}"));
        }
    }
    pbf_cli::report::counters(&tally);
    // The -v line of a plan; the time includes waiting for the index streams.
    if pbf_cli::verbosity(m) > 0 {
        let mut line = format!(
            "{}: {} passed through in {} of {} bytes, {} to merge in {} of {} elements; {:.3} s",
            pbf_cli::plural(tally.blobs, "blob"),
            tally.copy_blobs,
            pbf_cli::plural(tally.copy_ops, "copy op"),
            tally.copy_bytes,
            tally.merge_blobs,
            pbf_cli::plural(tally.merge_ops, "merge op"),
            tally.merge_elements,
            input.elapsed()
        );
        if pbf_cli::verbosity(m) > 1 {
            let streams = StreamTime {
                parsing: input.parsing,
                writing,
            };
            line += &format!("; {streams}");
        }
        pbf_cli::warn(NAME, line);
    }
    Ok(ExitCode::SUCCESS)
}

/// The `--objects-of` index of `--check`: the files it describes (for
/// messages) and their objects per kind.
struct Reference {
    files: String,
    several: bool,
    counts: Counts,
}

/// The index streams named on the command line ('-' when none).
fn index_names(m: &ArgMatches) -> Vec<String> {
    m.get_many::<String>("index")
        .map_or_else(|| vec!["-".to_owned()], |v| v.cloned().collect())
}

/// For `--check`: the input, and the `--objects-of` index when given.
fn read_check_input(m: &ArgMatches) -> Result<(Input, Option<Reference>)> {
    let purpose = Purpose::Check(check::Judge::default());
    let mut input = Input::new(purpose, pbf_cli::verbosity(m) > 1);
    input.read_all(&index_names(m), &mut |_| Ok(()))?;
    let Some(arg) = m.get_one::<String>("objects-of") else {
        return Ok((input, None));
    };
    let name = pbf_cli::input_name(arg).to_owned();
    let mut other = Input::new(Purpose::Count, false);
    other.read(&name, pbf_cli::input(arg)?, &mut |_| Ok(()))?;
    let shown = m.get_one::<String>("objects-of-as").cloned();
    let reference = Reference {
        files: shown.or_else(|| other.files()).unwrap_or(name),
        several: other.sources.len() > 1,
        counts: other.counts,
    };
    Ok((input, Some(reference)))
}

/// The plan stream being written: its record goes out as soon as it is
/// known (`--sources`, see [`ahead`]), the ops once every blob is read.
impl Ahead {
    /// Write the plan record (or after an early one the header record), the
    /// ops and the end; returns what was planned and the time spent
    /// serialising it.
    fn finish(mut self, input: &Input, frame_keys: bool) -> Result<(Tally, Duration)> {
        let Purpose::Plan(blobs) = &input.blobs else {
            bail!("internal error: no blobs were kept to plan");
        };
        let merges = blobs.clusters().any(|c| !plan::is_copy(c));
        let header = header::output_header(&input.headers, merges, &self.made);
        let record = self.planned(input, header, blobs.copy_bytes())?;
        self.out.write(&record)?;
        let mut tally = Tally {
            blobs: input.blob_records,
            ..Tally::default()
        };
        for op in blobs.ops(frame_keys) {
            match op {
                Op::Copy(c) => {
                    tally.end.add_copy(&c);
                    tally.copy_ops += 1;
                    tally.copy_blobs += c.blobs;
                    tally.copy_bytes += c.length;
                    self.out.write(&PlanRecord::Copy(c))?;
                }
                Op::Merge(m) => {
                    let elements = m.elements();
                    self.out
                        .write_merge(m.first(), m.last(), elements, m.inputs())?;
                    tally.end.add_merge_of(m.len(), elements);
                    tally.merge_ops += 1;
                    tally.merge_blobs += m.len();
                    tally.merge_elements += elements;
                }
            }
        }
        self.out.write(&PlanRecord::End(tally.end))?;
        let writing = self.out.serialise_time();
        self.out.finish()?;
        Ok((tally, writing))
    }
}

/// What the ops of a plan hold: its end record, and the counts of its
/// `-v` line and its run's report (`pbf_cli::report`).
#[derive(Default, serde::Serialize)]
struct Tally {
    /// Blob records read.
    blobs: u64,
    /// Blobs passed through in copy ops, in how many ops, and their bytes.
    copy_blobs: u64,
    copy_ops: u64,
    copy_bytes: u64,
    /// Blobs to merge in merge ops, in how many ops, and their objects.
    merge_blobs: u64,
    merge_ops: u64,
    merge_elements: u64,
    #[serde(skip)]
    end: PlanEnd,
}

/// `--check`: exit 0 when the input is in order (and holds the objects of
/// `objects_of`, when given), else 1 with the reasons on standard error
/// (unless `-q`; a yes is said only with `-v`). `--check-as` names the
/// checked file in messages instead of its path.
fn check(input: &Input, objects_of: Option<Reference>, m: &ArgMatches) -> ExitCode {
    pbf_cli::report::counters(&CheckCounters {
        blobs: input.blob_records,
    });
    // The -vv line of --check.
    if pbf_cli::verbosity(m) > 1 {
        let streams = StreamTime {
            parsing: input.parsing,
            writing: Duration::ZERO,
        };
        let (blobs, secs) = (input.blob_records, input.elapsed());
        pbf_cli::warn(
            NAME,
            format!("{blobs} blobs checked; {secs:.3} s; {streams}"),
        );
    }
    let check_as = m.get_one::<String>("check-as").cloned();
    let names = match &check_as {
        Some(name) => vec![name.clone(); input.sources.len()],
        None => input.source_names(),
    };
    let reasons = match &input.blobs {
        Purpose::Check(judge) => judge.reasons(&names),
        _ => Vec::new(),
    };
    let mut why: Vec<String> = reasons
        .into_iter()
        .map(|line| format!("not in order: {line}"))
        .collect();
    let mut same = None;
    if let Some(other) = objects_of {
        // Each side named by its files: the index checked, and the other.
        let checked = check_as
            .or_else(|| input.files())
            .unwrap_or_else(|| "the input".into());
        let (files, want) = (other.files, other.counts);
        let verb = if other.several { "hold" } else { "holds" };
        if want == input.counts {
            same = Some(format!("{checked} holds the objects of {files}: {want}"));
        } else {
            why.push(format!(
                "objects differ: {checked} holds {}; {files} {verb} {want}",
                input.counts
            ));
        }
    }
    if why.is_empty() {
        if let Some(line) = same.filter(|_| pbf_cli::verbosity(m) > 0) {
            pbf_cli::warn(NAME, line);
        }
        return ExitCode::SUCCESS;
    }
    if !m.get_flag("quiet") {
        for line in why {
            pbf_cli::warn(NAME, line);
        }
    }
    ExitCode::from(pbf_cli::EXIT_NO)
}

/// The counters of a `--check` run's report: the blob records checked.
#[derive(serde::Serialize)]
struct CheckCounters {
    blobs: u64,
}
