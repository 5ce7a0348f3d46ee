//! The `pbf-index` binary; everything is in the library so man pages and tests can reach it.
fn main() -> std::process::ExitCode {
    pbf_cli::main("pbf-index", pbf_index::command(), pbf_index::run)
}
