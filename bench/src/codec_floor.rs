//! `pbf-codec-floor`: the CPU a re-compression cannot go below, for the
//! `--recompress` row of `make bench`. Every data Blob of a file is
//! inflated, and its block compressed again in the given compression, on
//! one thread; the thread's CPU time of each step is summed apart (reading
//! the file is in neither). Prints one JSON line.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Arg, ArgMatches, Command, value_parser};
use nix::sys::resource::{UsageWho, getrusage};
use pbf_format::compress::{Compression, blob_room, encode_blob_into, with_decoded};
use pbf_format::frame::{BlobType, PbfFile};

fn main() -> ExitCode {
    pbf_cli::main("pbf-codec-floor", command(), run)
}

fn command() -> Command {
    Command::new("pbf-codec-floor")
        .version(env!("CARGO_PKG_VERSION"))
        .about("CPU seconds to inflate every data Blob of a file and to compress it again, on one thread")
        .arg(
            Arg::new("compression")
                .long("compression")
                .value_name("C")
                .help("Compression to compress again in")
                .default_value("zlib:6")
                .value_parser(value_parser!(Compression)),
        )
        .arg(
            Arg::new("input")
                .value_name("IN")
                .help("Input PBF file")
                .required(true)
                .value_parser(value_parser!(PathBuf)),
        )
}

/// What was done and the CPU time of each step.
#[derive(Default, serde::Serialize)]
struct Floors {
    blobs: u64,
    input_bytes: u64,
    block_bytes: u64,
    output_bytes: u64,
    inflate_cpu_s: f64,
    deflate_cpu_s: f64,
}

fn run(m: &ArgMatches) -> Result<ExitCode> {
    let path = m.get_one::<PathBuf>("input").context("missing input")?;
    let compression = m
        .get_one::<Compression>("compression")
        .copied()
        .unwrap_or_default();
    let file = PbfFile::open(path)?;
    let mut f = Floors::default();
    let (mut inflating, mut deflating) = (Duration::ZERO, Duration::ZERO);
    let mut room = Vec::new();
    for fh in file.headers() {
        let fh = fh?;
        if fh.blob_type != BlobType::OsmData {
            continue;
        }
        let blob = file.read_body(&fh)?;
        let t0 = thread_cpu()?;
        let out = with_decoded(&blob, |raw| -> Result<(usize, usize, Duration)> {
            let t1 = thread_cpu()?;
            let need = blob_room(raw.len(), compression);
            if room.len() < need {
                room.resize(need, 0);
            }
            let written = encode_blob_into(raw, compression, &mut room)?;
            Ok((raw.len(), written.len(), thread_cpu()? - t1))
        })??;
        let (raw, written, deflate) = out;
        inflating += thread_cpu()? - t0 - deflate;
        deflating += deflate;
        f.blobs += 1;
        f.input_bytes += blob.len() as u64;
        f.block_bytes += raw as u64;
        f.output_bytes += written as u64;
    }
    f.inflate_cpu_s = inflating.as_secs_f64();
    f.deflate_cpu_s = deflating.as_secs_f64();
    println!("{}", serde_json::to_string(&f)?);
    Ok(ExitCode::SUCCESS)
}

/// CPU time of the calling thread so far.
fn thread_cpu() -> Result<Duration> {
    let u = getrusage(UsageWho::RUSAGE_THREAD).context("getrusage")?;
    let t =
        |tv: nix::sys::time::TimeVal| Duration::new(tv.tv_sec() as u64, tv.tv_usec() as u32 * 1000);
    Ok(t(u.user_time()) + t(u.system_time()))
}
