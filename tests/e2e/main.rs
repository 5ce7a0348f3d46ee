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
mod index;
mod index_io;
mod jsontools;
mod lint;
mod merge;
mod messages;
mod newuser;
mod overlap;
mod recompressed;
mod reflink;
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
