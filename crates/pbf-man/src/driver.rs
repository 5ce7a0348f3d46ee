//! The command line of the `pbf-sort` driver as a clap [`Command`], so its
//! shell completions come from the same generator as the tools'.
//!
//! The driver is a bash script that parses its options with getopt(1): its
//! `long=` list and its `usage()` text are the definition, and nothing in Rust
//! parses them. This `Command` declares the same options again, adding what a
//! completion needs and the script cannot say: which values name files or
//! directories, and the fixed values of `--copier` and `--compression`. It
//! parses nothing and renders no man page (`man/pbf-sort.1` is written by
//! hand). `tests/driver.rs` holds it to the script: every long option of the
//! getopt list and of `pbf-sort --help` is here and nothing else is, with the
//! same short form, the same value name, a value exactly where getopt wants
//! one, and the `--copier` and `--compression` values the driver and
//! `pbf-merge` accept.

use clap::builder::PossibleValue;
use clap::{Arg, ArgAction, Command, ValueHint};

/// The driver's command line, with value hints for completion.
pub fn command() -> Command {
    let flag = |id: &'static str, help: &'static str| {
        Arg::new(id).long(id).help(help).action(ArgAction::SetTrue)
    };
    let value = |id: &'static str, name: &'static str, hint: ValueHint, help: &'static str| {
        Arg::new(id)
            .long(id)
            .value_name(name)
            .value_hint(hint)
            .help(help)
    };
    let stage =
        |id: &'static str, help: &'static str| value(id, "CMD", ValueHint::CommandString, help);
    Command::new("pbf-sort")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Sort OpenStreetMap PBF files into one output in Sort.Type_then_ID order")
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
                "FILE",
                ValueHint::FilePath,
                "Output file; '-' writes to stdout",
            )
            .short('o')
            .required(true),
        )
        .arg(flag("overwrite", "Replace an existing output file").short('O'))
        .arg(
            value(
                "jobs",
                "N",
                ValueHint::Other,
                "Worker threads for indexing and merging [default: all cores]",
            )
            .short('j'),
        )
        .arg(choice(
            "compression",
            "C",
            "Compression of merged blobs [default: zlib:6]",
            compressions(),
        ))
        .arg(flag(
            "recompress",
            "Give copied blobs that compression too (pbf-copy)",
        ))
        .arg(value(
            "memory",
            "SIZE",
            ValueHint::Other,
            "Memory budget of the merge stage [default: 1G]",
        ))
        .arg(flag(
            "dedupe",
            "Drop repeated (type, id, version), keeping the one that sorts first",
        ))
        .arg(value(
            "generator",
            "NAME",
            ValueHint::Other,
            "writingprogram of the output header",
        ))
        .arg(flag(
            "add-indexdata",
            "Indexdata in every output BlobHeader, so the next pbf-index reads headers only",
        ))
        .arg(choice(
            "copier",
            "WHICH",
            "The copy stage [default: auto]",
            [
                PossibleValue::new("auto")
                    .help("pbf-reflink where the output's filesystem can clone, else pbf-copy"),
                PossibleValue::new("copy").help("pbf-copy"),
                PossibleValue::new("reflink").help("pbf-reflink, or fail"),
            ],
        ))
        .arg(stage(
            "index-cmd",
            "Replace pbf-index (or env PBF_SORT_INDEX)",
        ))
        .arg(stage(
            "overlap-cmd",
            "Replace pbf-overlap (or env PBF_SORT_OVERLAP)",
        ))
        .arg(stage(
            "merge-cmd",
            "Replace pbf-merge (or env PBF_SORT_MERGE)",
        ))
        .arg(stage(
            "copy-cmd",
            "Replace the copier (or env PBF_SORT_COPY)",
        ))
        .arg(value(
            "keep-plan",
            "DIR",
            ValueHint::DirPath,
            "Keep the index, plan and spool in DIR, to replay with pbf-copy --keep-spools",
        ))
        .arg(value(
            "tmpdir",
            "DIR",
            ValueHint::DirPath,
            "Where the spool goes [default: the output's directory]",
        ))
        .arg(flag(
            "no-space-check",
            "Write even where the filesystem reports too little free space",
        ))
        .arg(value(
            "summary-json",
            "FILE",
            ValueHint::FilePath,
            "Write the run to FILE as one JSON object, also when it fails (not with --dry-run)",
        ))
        .arg(flag("dry-run", "Print the run as a bash script, and exit"))
        .arg(flag(
            "check",
            "Verify the output's order and object counts before it is written",
        ))
        .arg(
            flag(
                "progress",
                "Progress bars even when stderr is not a terminal",
            )
            .overrides_with("no-progress"),
        )
        .arg(flag("no-progress", "No progress bars").overrides_with("progress"))
        .arg(
            flag("quiet", "No progress and no notices")
                .short('q')
                .conflicts_with("verbose"),
        )
        .arg(flag("verbose", "Each stage's summary, and the total time").short('v'))
}

/// An option whose value is one of `values` (a completion offers them; this
/// `Command` parses nothing, so they need not be every spelling the driver
/// accepts).
fn choice<const N: usize>(
    id: &'static str,
    name: &'static str,
    help: &'static str,
    values: [PossibleValue; N],
) -> Arg {
    Arg::new(id)
        .long(id)
        .value_name(name)
        .help(help)
        .value_parser(values)
}

/// The forms of `--compression` a completion offers: the codec names the
/// tools' parser offers ([`pbf_cli::compression_parser`]).
fn compressions() -> [PossibleValue; 4] {
    pbf_cli::CompressionParser::names()
}
