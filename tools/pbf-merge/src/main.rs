//! The `pbf-merge` binary; everything is in the library so man pages and tests can reach it.
fn main() -> std::process::ExitCode {
    pbf_cli::main("pbf-merge", pbf_merge::command(), pbf_merge::run)
}
