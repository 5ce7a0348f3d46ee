//! The `pbf-reflink` binary; everything is in the library so man pages and tests can reach it.
fn main() -> std::process::ExitCode {
    pbf_cli::main("pbf-reflink", pbf_reflink::command(), pbf_reflink::run)
}
