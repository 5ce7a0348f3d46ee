//! The JSON Lines records that make the pbf-sort stages swappable.
//!
//! Two streams, both one JSON object per line tagged by `"type"`, opened by a
//! versioned header record and closed by an `end` record with counts:
//!
//! - the **index stream** ([`IndexRecord`]), written by `pbf-index`: per input
//!   file a `source` record, one `blob` record per OSMData blob and an `end`;
//!   several sections may follow each other (`cat a.idx b.idx`);
//! - the **plan stream** ([`PlanRecord`]), written by `pbf-overlap` and
//!   rewritten by `pbf-merge`: a `plan` header, `copy` and `merge` ops in
//!   output order, and an `end`.
//!
//! Readers ([`IndexReader`], [`PlanReader`]) validate order, schema and major
//! version, require the `end` record (a stream that stops without one means an
//! upstream stage died), ignore unknown fields, and report errors with line
//! numbers. [`check_source`] verifies that a file is still the one indexed, and
//! [`check_unchanged`] that it did not change while it was read;
//! [`SourceFiles`] holds a plan's sources open, so checked, for every stage
//! that reads them.
//! Every number is exact in an IEEE double ([`ijson`]), so a stream survives
//! jq or any other JSON tool a user puts between two stages.
#![deny(missing_docs)]

mod counts;
mod error;
mod fast;
pub mod ijson;
mod lines;
mod order;
mod records;
mod source;

pub use counts::{Counts, plural};
pub use error::Error;
pub use lines::{IndexReader, LineReader, MAX_LINE, MERGE_CHUNK, PlanReader, StreamTime, Writer};
pub use records::*;
pub use source::{SourceFile, SourceFiles, check_source, check_unchanged};
