//! The `pbf-merge` binary; everything is in the library so man pages and tests can reach it.
fn main() -> std::process::ExitCode {
    pbf_cli::main("pbf-merge", pbf_merge::command(), pbf_merge::run)
}

/// mimalloc: decoding allocates per element and per string, and glibc malloc
/// cost a sixth of the wall time of a random-order sort (bench/merge-perf.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
