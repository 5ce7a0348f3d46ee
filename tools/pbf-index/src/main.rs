//! The `pbf-index` binary; everything is in the library so man pages and tests can reach it.
fn main() -> std::process::ExitCode {
    pbf_cli::main("pbf-index", pbf_index::command(), pbf_index::run)
}

/// mimalloc: the key scan of blobs without indexdata allocates per block;
/// measured 8 % less wall than glibc malloc on 1.2 GB of random-order input.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
