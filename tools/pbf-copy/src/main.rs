//! The `pbf-copy` binary; everything is in the library so man pages and tests can reach it.
fn main() -> std::process::ExitCode {
    pbf_cli::main("pbf-copy", pbf_copy::command(), pbf_copy::run)
}
