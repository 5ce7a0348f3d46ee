//! End-to-end tests: the real binaries over the real files in `tests/fixtures`
//! (or `$PBF_SORT_TEST_DATA`), with osmium as the oracle. One test binary,
//! one module per topic (ripgrep's layout).

mod util;

mod ahead;
mod cookbook;
mod copy;
mod diskfull;
mod driver;
mod hostile;
mod importers;
mod index;
mod index_io;
mod jsontools;
mod latest;
mod lint;
mod merge;
mod newuser;
mod overlap;
mod reflink;
mod refusals;
mod repeats;
mod rewritten;
mod soak;
mod sort;
mod space;
mod spools;
mod streams;
mod summary;
mod terminal;
mod ties;
mod trust;

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
