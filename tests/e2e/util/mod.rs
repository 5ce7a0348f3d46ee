//! Helpers of the end-to-end tests, by topic; the topic modules of the
//! suite import them from here alone.
//!
//! - [`files`]: the real PBF files, inputs built from them, directories;
//! - [`mounts`]: a tmpfs and loop-mounted XFS and btrfs images;
//! - [`random`]: the seeded generator and the budgets of randomised tests;
//! - [`commands`]: our binaries, the driver and system tools, run captured
//!   or bounded in time, and the frames a terminal shows of them;
//! - [`pipeline`]: the index and plan streams, read and built;
//! - [`oracle`]: what osmium says of a file;
//! - [`dates`]: two extracts of different dates, and the oracle of `--latest`;
//! - [`postgres`]: a throwaway PostgreSQL cluster and osm2pgsql imports;
//! - [`failures`]: a refused or failed run's stderr, checked.

pub mod commands;
pub mod dates;
pub mod failures;
pub mod files;
pub mod mounts;
pub mod oracle;
pub mod pipeline;
pub mod postgres;
pub mod random;

pub use commands::*;
pub use dates::*;
pub use failures::*;
pub use files::*;
pub use mounts::*;
pub use oracle::*;
pub use pipeline::*;
pub use postgres::*;
pub use random::*;
