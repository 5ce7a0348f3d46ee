//! End-to-end tests: the real binaries over the real files in `tests/fixtures`
//! (or `$PBF_SORT_TEST_DATA`), with osmium as the oracle. One test binary
//! (ripgrep's layout), its modules grouped one way, by stage:
//!
//! - each stage run alone, in pipeline order: [`index`], [`overlap`],
//!   [`merge`], [`copy`], [`reflink`];
//! - the driver, `pbf-sort`, over the whole pipeline: [`driver`] (its
//!   edges), [`refusals`] (every refusal of the driver and the tools, in
//!   tables), [`sort`] (the sort end to end, and what reads its output),
//!   [`summary`] (`--summary-json`);
//! - apart from the stages: [`faults`] (disk full, hostile input, lies,
//!   kills) and [`terminal`] (what a terminal shows);
//! - [`lint`]: lints over the test sources themselves.
//!
//! A stage's module holds its features as submodules (`copy::ahead`,
//! `merge::spools`), so `cargo test --test e2e -- copy::` runs the copy
//! stage's tests, and `-- faults::` the faults'. Helpers are in [`util`].

mod util;

mod copy;
mod index;
mod merge;
mod overlap;
mod reflink;

mod driver;
mod refusals;
mod sort;
mod summary;

mod faults;
mod terminal;

mod lint;

/// The tests press Ctrl-C (SIGINT) as a user would. A shell without job
/// control starts a background command (`make test &` in a script) with
/// SIGINT and SIGQUIT ignored, and every tool started from here would
/// inherit that and rightly keep them ignored: the signal tests would fail
/// or wait forever. So the test binary restores their default before
/// anything runs (an `.init_array` entry runs before `main`, and before
/// any test thread). SIGHUP under nohup(1) stays as given (see
/// `copy::sigint_and_sigterm_mid_copy_remove_the_temporary_file`).
#[used]
#[unsafe(link_section = ".init_array")]
static DEFAULT_INTERRUPTS: extern "C" fn() = default_interrupts;

extern "C" fn default_interrupts() {
    use nix::sys::signal::{SigHandler, Signal, signal};
    for interrupt in [Signal::SIGINT, Signal::SIGQUIT] {
        // SAFETY: the default disposition installs no handler, and nothing
        // else runs yet.
        let _ = unsafe { signal(interrupt, SigHandler::SigDfl) };
    }
}
