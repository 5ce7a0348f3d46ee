//! `pbf-gen`: builds the large benchmark inputs of `bench/` from the small
//! real extracts in `tests/fixtures/`: tiled copies with shifted ids,
//! blob-permuted and concatenated files, element-shuffled files and history
//! files; plus `copy`, the plain copy_file_range + fsync that serves as the
//! disk's floor in the benchmark tables.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Arg, ArgAction, ArgMatches, Command, value_parser};
use pbf_format::block::EncodeOptions;
use pbf_format::compress::Compression;

use pbf_bench_gen::encode::FrameEncoder;
use pbf_bench_gen::{frames, history, output, shuffle, tile};

/// Default blob compression of re-encoded output (see `bench/README.md`).
const DEFAULT_COMPRESSION: &str = "zlib:6";

fn main() -> ExitCode {
    pbf_cli::main("pbf-gen", command(), run)
}

fn input_arg() -> Arg {
    Arg::new("input")
        .value_name("IN")
        .help("Input PBF file")
        .required(true)
        .value_parser(value_parser!(PathBuf))
}

fn output_arg() -> Arg {
    Arg::new("output")
        .short('o')
        .long("output")
        .value_name("OUT")
        .help("Output file (written to a temporary file beside it, then renamed)")
        .required(true)
        .value_parser(value_parser!(PathBuf))
}

fn seed_arg() -> Arg {
    Arg::new("seed")
        .long("seed")
        .value_name("S")
        .help("Random seed")
        .default_value("1")
        .value_parser(value_parser!(u64))
}

/// Options of every subcommand that re-encodes blocks.
fn encoding_args(cmd: Command) -> Command {
    cmd.arg(
        Arg::new("blob-elements")
            .long("blob-elements")
            .value_name("N")
            .help("Most elements per output blob")
            .default_value("8000")
            .value_parser(value_parser!(u32).range(1..)),
    )
    .arg(
        Arg::new("compression")
            .long("compression")
            .value_name("C")
            .help("Blob compression: none, zlib[:0-9], zstd[:1-22] or lz4")
            .default_value(DEFAULT_COMPRESSION)
            .value_parser(|s: &str| s.parse::<Compression>()),
    )
    .arg(
        Arg::new("plain-nodes")
            .long("plain-nodes")
            .help("Write plain (non-dense) nodes")
            .action(ArgAction::SetTrue),
    )
    .arg(
        Arg::new("indexdata")
            .long("indexdata")
            .help("Write pbf-sort indexdata into every BlobHeader")
            .action(ArgAction::SetTrue),
    )
}

fn command() -> Command {
    Command::new("pbf-gen")
        .version(env!("CARGO_PKG_VERSION"))
        .about("Generate large benchmark inputs from small PBF extracts")
        .subcommand_required(true)
        .arg(
            Arg::new("jobs")
                .short('j')
                .long("jobs")
                .global(true)
                .value_name("N")
                .help("Worker threads [default: all cores]")
                .value_parser(value_parser!(usize)),
        )
        .subcommand(encoding_args(
            Command::new("tile")
                .about("N copies of an extract with shifted ids, sorted")
                .arg(
                    Arg::new("copies")
                        .short('n')
                        .value_name("N")
                        .help("Number of copies")
                        .required(true)
                        .value_parser(value_parser!(u64).range(1..)),
                )
                .arg(
                    Arg::new("stride-of")
                        .long("stride-of")
                        .value_name("OTHER")
                        .help("Use at least the id strides of this extract, so two tiled files interleave")
                        .value_parser(value_parser!(PathBuf)),
                )
                .arg(
                    Arg::new("offset")
                        .long("offset")
                        .value_name("K")
                        .help("Add K to every id magnitude")
                        .default_value("0")
                        .value_parser(value_parser!(i64).range(0..)),
                )
                .arg(input_arg())
                .arg(output_arg()),
        ))
        .subcommand(
            Command::new("permute")
                .about("Data blobs in a seeded random order, bytes untouched")
                .arg(seed_arg())
                .arg(input_arg())
                .arg(output_arg()),
        )
        .subcommand(
            Command::new("concat")
                .about("The first file's header, then every file's data blobs, bytes untouched")
                .arg(
                    Arg::new("inputs")
                        .value_name("IN")
                        .help("Input PBF files")
                        .num_args(1..)
                        .required(true)
                        .value_parser(value_parser!(PathBuf)),
                )
                .arg(output_arg()),
        )
        .subcommand(encoding_args(
            Command::new("shuffle")
                .about("Elements in a seeded random order, re-encoded")
                .arg(seed_arg())
                .arg(
                    Arg::new("bucket-size")
                        .long("bucket-size")
                        .value_name("SIZE")
                        .help("Input bytes per in-memory bucket (memory is about 10x this)")
                        .default_value("32M")
                        .value_parser(pbf_cli::parse_size),
                )
                .arg(input_arg())
                .arg(output_arg()),
        ))
        .subcommand(encoding_args(
            Command::new("history")
                .about("K versions of every object, sorted, as a history file")
                .arg(
                    Arg::new("versions")
                        .short('k')
                        .value_name("K")
                        .help("Versions per object")
                        .required(true)
                        .value_parser(value_parser!(u32).range(1..=1000)),
                )
                .arg(input_arg())
                .arg(output_arg()),
        ))
        .subcommand(
            Command::new("copy")
                .about("copy_file_range the whole file and fsync (the disk's floor)")
                .arg(input_arg())
                .arg(output_arg()),
        )
}

fn frame_encoder(m: &ArgMatches) -> Result<FrameEncoder> {
    let elements = m.get_one::<u32>("blob-elements").copied().unwrap_or(8000);
    Ok(FrameEncoder {
        opts: EncodeOptions {
            max_elements: elements as usize,
            dense_nodes: !m.get_flag("plain-nodes"),
            ..EncodeOptions::default()
        },
        compression: m
            .get_one::<Compression>("compression")
            .copied()
            .unwrap_or_default(),
        indexdata: m.get_flag("indexdata"),
    })
}

fn path<'a>(m: &'a ArgMatches, name: &str) -> Result<&'a PathBuf> {
    m.get_one::<PathBuf>(name)
        .with_context(|| format!("missing argument {name}"))
}

fn run(m: &ArgMatches) -> Result<ExitCode> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(pbf_cli::jobs(m.get_one::<usize>("jobs").copied()))
        .build_global()
        .context("starting the thread pool")?;
    let Some((name, sub)) = m.subcommand() else {
        anyhow::bail!("no subcommand");
    };
    let out = path(sub, "output")?;
    let inputs: Vec<PathBuf> = match name {
        "concat" => sub
            .get_many::<PathBuf>("inputs")
            .context("missing inputs")?
            .cloned()
            .collect(),
        _ => vec![path(sub, "input")?.clone()],
    };
    let input = &inputs[0];
    let seed = || sub.get_one::<u64>("seed").copied().unwrap_or(1);
    let start = Instant::now();
    let mut output = output::create(out, &inputs)?;
    let o = &mut output;
    match name {
        "tile" => {
            let args = tile::TileArgs {
                copies: sub.get_one::<u64>("copies").copied().unwrap_or(1),
                stride_of: sub.get_one::<PathBuf>("stride-of").map(PathBuf::as_path),
                offset: sub.get_one::<i64>("offset").copied().unwrap_or(0),
            };
            tile::run(input, o, &args, frame_encoder(sub)?)?
        }
        "permute" => frames::permute(input, o, seed())?,
        "concat" => frames::concat(&inputs, o)?,
        "shuffle" => {
            let bucket = sub
                .get_one::<u64>("bucket-size")
                .copied()
                .unwrap_or(32 << 20);
            let spill_dir = match out.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            shuffle::run(input, o, spill_dir, seed(), bucket, frame_encoder(sub)?)?
        }
        "history" => {
            let k = sub.get_one::<u32>("versions").copied().unwrap_or(1);
            history::run(input, o, k, frame_encoder(sub)?)?
        }
        "copy" => frames::copy(input, o)?,
        other => anyhow::bail!("unknown subcommand {other}"),
    }
    let bytes = output::finish(output)?;
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "pbf-gen {name}: wrote {} ({bytes} bytes) in {secs:.3} s",
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}
