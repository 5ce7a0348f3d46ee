//! Writing a pbf-sort output safely and copying byte ranges into it: what
//! `pbf-copy`, `pbf-reflink` and `pbf-merge` (its spools) share. It holds no
//! command-line code: the copiers' shared options and plan loop live in
//! `pbf-copier`.
//!
//! - [`OutputFile`]: the output is written to a temporary file in OUT's
//!   directory, unnamed where the filesystem allows (`O_TMPFILE`), else with
//!   an exclusive, unpredictable name (`.OUT.pbf-sort.XXXXXX.tmp`); it is
//!   fsynced, put in place as OUT only by [`OutputFile::commit`] (or by
//!   [`OutputFile::commit_checked`] once a check has passed on the complete
//!   file), and the directory fsynced. Dropped without a commit (an error, a
//!   panic) it removes the temporary file. It refuses an existing OUT unless overwriting is allowed
//!   (`-O/--overwrite`, osmium's convention) and an OUT that is one of the
//!   inputs. `-` streams to standard output instead (a pipe or a file); a
//!   stream cannot be taken back, so one that fails after its first byte
//!   ends with [`STREAM_POISON`], which makes every reader fail too.
//! - [`cleanup`]: SIGINT, SIGTERM and SIGHUP remove every registered temporary
//!   file and poison a registered stream before the process dies of the
//!   signal, in the process's one handler. SIGKILL cannot be caught: an
//!   unnamed temporary output leaves nothing then, a named one stays, but its
//!   name can never be taken for the output.
//! - [`copy_range`]: `copy_file_range(2)` in 1 GiB calls, falling back to
//!   `pread`/`pwrite` (or `write` for a pipe) when the kernel refuses, with
//!   [`CopyStats`] telling how many bytes went which way.
//! - [`direct`]: writes past the page cache (`O_DIRECT`), which a copier's
//!   buffered appends ([`OutputFile::buffer_appends`]) and its copy ahead use:
//!   one copy of each byte from the source's cached pages, and no dirty
//!   pages of the output for the kernel to write back and reclaim.
//!
//! ```no_run
//! use std::fs::File;
//! use std::path::Path;
//! use pbf_format::header::{Header, encode_header_frame};
//! use pbf_output::{OutputFile, OutputOptions};
//!
//! # fn main() -> pbf_output::Result<()> {
//! let input = Path::new("in.osm.pbf");
//! let src = File::open(input).expect("open");
//! let opts = OutputOptions {
//!     inputs: vec![input.to_path_buf()],
//!     ..OutputOptions::default()
//! };
//! let mut out = OutputFile::create(Path::new("out.osm.pbf"), &opts)?;
//! let header = encode_header_frame(&Header::default(), Default::default()).expect("header");
//! out.write_all(&header)?;
//! out.copy_from(&src, input, 120, 4096)?; // whole frames of the input
//! eprintln!("{} bytes in the kernel", out.stats().kernel_bytes);
//! out.commit()?; // without this, dropping `out` removes the temporary file
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod buffer;
pub mod cleanup;
pub mod direct;
mod error;
mod output;
mod range;
mod temp;

pub use error::{Error, ErrorKind, Result};
pub use output::{
    Check, OutputFile, OutputOptions, STREAM_POISON, WRITEBACK_STEP, holds_system_names,
    replaces_system_name, start_writeback,
};
pub use range::{CHUNK, CopyStats, Punched, copy_range, punch_hole};
pub use temp::TEMP_MARKER;
