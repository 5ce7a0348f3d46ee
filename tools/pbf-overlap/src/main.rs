//! The `pbf-overlap` binary; everything is in the library so man pages and tests can reach it.
fn main() -> std::process::ExitCode {
    pbf_cli::main("pbf-overlap", pbf_overlap::command(), pbf_overlap::run)
}
