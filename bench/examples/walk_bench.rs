//! Time one header walk of a file, by `pread` or io_uring, for tuning the
//! walk (queue depth, region size) on a cold or warm cache.
//!
//! Usage: cargo run --release -p pbf-bench-gen --example walk_bench -- FILE pread|uring [DEPTH [REGION_BYTES]]

use std::path::Path;
use std::time::Instant;

use pbf_format::frame::PbfFile;
use pbf_format::walk::{Io, Walk, WalkOptions};

type Failure = Box<dyn std::error::Error>;

fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(path), Some(io)) = (args.first(), args.get(1)) else {
        return Err("usage: walk_bench FILE pread|uring [DEPTH [REGION_BYTES]]".into());
    };
    let mut opts = WalkOptions::default();
    if let Some(d) = args.get(2) {
        opts.depth = d.parse()?;
    }
    if let Some(r) = args.get(3) {
        opts.region_len = Some(r.parse()?);
    }
    let file = PbfFile::open(Path::new(path))?;
    let started = Instant::now();
    let mut walk = Walk::with_options(&file, io.parse::<Io>()?, opts);
    if let Some(e) = walk.fallback() {
        eprintln!("walk_bench: io_uring unavailable ({e}), using pread");
    }
    let mut frames = 0u64;
    for fh in walk.by_ref() {
        fh?;
        frames += 1;
    }
    let secs = started.elapsed().as_secs_f64();
    println!(
        "{} frames in {secs:.3}s with {} {opts:?}: {:?}",
        frames,
        walk.io().name(),
        walk.stats()
    );
    Ok(())
}
