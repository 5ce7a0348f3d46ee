//! What the `pbf-sort` driver, a bash script, asks of Rust: what needs
//! Rust. The toolkit's `pbf-index` gives it through its `--driver-*`
//! options.
//!
//! - [`command`]: its command line as a clap [`Command`], the one source of
//!   its help (`pbf-sort --help`: `pbf-index --driver-help`), of its shell
//!   completions and man page (`pbf-man`), and of its parsing;
//! - [`args`]: the command line parsed and its files judged ([`check`])
//!   before a stage starts (`pbf-index --driver-args`);
//! - [`summary`]: the `--summary-json` object (`pbf-index
//!   --driver-summary`), from the driver's description of the run
//!   ([`run`]: NUL-terminated fields) and the stages' reports.

pub mod args;
pub mod check;
pub mod run;
pub mod summary;

use clap::builder::PossibleValue;
use clap::{Arg, ArgAction, Command, ValueHint};

use crate::args::{flag, option};

const ABOUT: &str = "Sort OpenStreetMap PBF files into Sort.Type_then_ID order";

const AFTER: &str = "The stages: pbf-index INPUT... | pbf-overlap | pbf-merge | pbf-copy -o \
    OUTPUT (or pbf-reflink); blobs that overlap no other are copied without decoding.\n\n\
    Options combine as in every tool of the toolkit: -Oqo OUT, -oOUT, abbreviated long options, \
    '--' before an INPUT starting with '-'. A replacement CMD is split at blanks (no quotes or pipes) and also \
    gets the arguments of the stage it replaces: \"pbf-merge --memory 4G\" works; other commands \
    need a script (see pbf-sort(1)).\n\n\
    Exit status: 0 success, 1 failure (no output is left behind), 2 usage error (an input not PBF \
    too); with -o -, SIGPIPE (141) if the reader stops early.";

/// The heading of the options that replace a stage.
const STAGES: &str = "Replacing a stage";

/// The driver's command line, with value hints for completion: what a user
/// needs first comes first.
pub fn command() -> Command {
    let value = |id, name, hint, help| option(id, name, help).value_hint(hint);
    let stage = |id: &'static str, help: &'static str| {
        value(id, "CMD", ValueHint::CommandString, help).help_heading(STAGES)
    };
    let always = "Progress bars even when stderr is not a terminal";
    Command::new("pbf-sort")
        .version(env!("CARGO_PKG_VERSION"))
        .about(ABOUT)
        .override_usage("pbf-sort [OPTIONS] INPUT... -o OUTPUT")
        .after_help(AFTER)
        .arg(
            Arg::new("input")
                .value_name("INPUT")
                .help("PBF files to sort; '-' (once) reads standard input")
                .num_args(1..)
                .required(true)
                .value_hint(ValueHint::FilePath),
        )
        .arg(
            value(
                "output",
                "OUTPUT",
                ValueHint::FilePath,
                "Output file (required); '-' writes to stdout (a pipe or file, not a terminal)",
            )
            .short('o')
            .required(true),
        )
        .arg(flag("overwrite", "Replace an existing OUTPUT (never an input)").short('O'))
        .arg(flag(
            "dedupe",
            "Drop repeated (type, id, version), keeping the one that sorts first (earliest \
             timestamp, then input); without it they are kept, and a file given twice is refused",
        ))
        .arg(flag(
            "latest",
            "Keep only the newest version of each object (highest version, then later \
             timestamp, then later input; none where it is deleted): extracts of different \
             dates, or a history file, to one current-state file; implies --dedupe",
        ))
        .arg(flag(
            "check",
            "Before OUTPUT is put in place, decode it in full and check its order and, but for \
             --dedupe and --latest, its objects per kind against the inputs' (not with -o -)",
        ))
        .arg(crate::jobs_arg(
            "Worker threads for indexing and merging [default: all cores]",
        ))
        .arg(
            value(
                "memory",
                "SIZE",
                ValueHint::Other,
                "Memory budget of the merge stage, such as 512M or 4G [default: 1G]",
            )
            .value_parser(crate::parse_budget),
        )
        .arg(crate::compression_arg(
            "compression",
            "Compression of merged blobs: zlib[:0-9], zstd[:1-22], lz4, none (osmium 1.15 reads \
             no zstd) [default: zlib:6]",
        ))
        .arg(flag(
            "recompress",
            "Give copied blobs that compression too (pbf-copy re-compresses each on every \
             core; not with --copier reflink)",
        ))
        .arg(flag(
            "add-indexdata",
            "Indexdata in every output BlobHeader, so the next pbf-index reads headers only \
             (osmconvert cannot)",
        ))
        .arg(value(
            "generator",
            "NAME",
            ValueHint::Other,
            "writingprogram of the output header",
        ))
        .arg(
            option(
                "copier",
                "WHICH",
                "auto: pbf-reflink where the output's filesystem can clone, else pbf-copy; copy; \
                 reflink (or fail) [default: auto]",
            )
            .value_parser([
                PossibleValue::new("auto")
                    .help("pbf-reflink where the output's filesystem can clone, else pbf-copy"),
                PossibleValue::new("copy").help("pbf-copy"),
                PossibleValue::new("reflink").help("pbf-reflink, or fail"),
            ])
            .hide_possible_values(true),
        )
        .arg(value(
            "tmpdir",
            "DIR",
            ValueHint::DirPath,
            "Where the spool goes, on any filesystem [default: OUTPUT's directory; with -o -, \
             $TMPDIR or /tmp, where saved standard input goes too]",
        ))
        .arg(value(
            "keep-plan",
            "DIR",
            ValueHint::DirPath,
            "Keep index.jsonl, plan.jsonl, merged.jsonl and the spool in DIR, to replay with \
             pbf-copy --keep-spools",
        ))
        .arg(flag(
            "no-space-check",
            "Write even where the filesystem reports too little free space (the copier, and \
             the copy of standard input, check it before writing)",
        ))
        .arg(
            value(
                "summary-json",
                "FILE",
                ValueHint::FilePath,
                "Write the run to FILE as one JSON object, also when it fails (see pbf-sort(1)); \
             an existing FILE is replaced only when it is a previous summary; not with --dry-run",
            )
            .conflicts_with("dry-run"),
        )
        .arg(flag("dry-run", "Print the run as a bash script, and exit"))
        .arg(flag("progress", always).overrides_with("no-progress"))
        .arg(flag("no-progress", "No progress bars").overrides_with("progress"))
        .arg(
            flag("quiet", "No progress and no notices")
                .short('q')
                .conflicts_with("verbose"),
        )
        .arg(
            flag(
                "verbose",
                "What each stage did to the files, and the total time; given twice (-vv), \
                 each stage's internals and when it ended too",
            )
            .short('v')
            .action(ArgAction::Count),
        )
        .args(
            [
                ("index-cmd", "Replace pbf-index (or env PBF_SORT_INDEX)"),
                (
                    "overlap-cmd",
                    "Replace pbf-overlap (or env PBF_SORT_OVERLAP)",
                ),
                ("merge-cmd", "Replace pbf-merge (or env PBF_SORT_MERGE)"),
                (
                    "copy-cmd",
                    "Replace the copier, whatever --copier says (or env PBF_SORT_COPY)",
                ),
            ]
            .map(|(id, help)| stage(id, help)),
        )
}

/// The driver's help, as `pbf-sort --help` prints it.
pub fn help() -> String {
    command().render_help().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_help_names_every_option_how_they_combine_and_what_exit_statuses_mean() {
        let help = help();
        assert!(
            help.contains("Usage: pbf-sort [OPTIONS] INPUT... -o OUTPUT"),
            "{help}"
        );
        for arg in command().get_arguments() {
            if let Some(long) = arg.get_long() {
                assert!(help.contains(&format!("--{long}")), "--{long}: {help}");
            }
        }
        assert!(
            help.contains("-Oqo OUT") && help.contains("Exit status: 0"),
            "{help}"
        );
        command().debug_assert();
    }
}
