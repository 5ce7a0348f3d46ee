//! The OpenStreetMap PBF format, and nothing else: no command line, no JSON.
//! With the `serde` feature, the object kind and a blob's tie ends derive
//! serde, so the stream records hold these types rather than copies.
//!
//! Layers, from the file upwards:
//! - [`frame`]: the framing (4-byte length, BlobHeader, Blob), read with `pread`,
//!   with every input-controlled length checked before allocation;
//! - [`walk`]: the header walk with many reads in flight (io_uring);
//! - [`compress`]: raw, zlib, zstd and lz4 blob bodies;
//! - [`header`]: the OSMHeader block;
//! - [`scan`]: a key scan of a PrimitiveBlock that reads only ids and versions;
//! - [`block`]: a full, lossless PrimitiveBlock codec;
//! - [`key`]: the sort order;
//! - [`indexdata`]: per-blob key summaries stored in BlobHeaders;
//! - [`padding`]: frames of an exact length that hold nothing (block alignment);
//! - [`sniff`]: what a file that is not PBF probably is (XML, OPL, o5m, compressed);
//! - [`wire`]: the protobuf wire format the codecs read and write by hand.
//!
//! Two helpers of the block encoder are public because the merge's spill
//! records, which write the same objects, use them too: [`hash`], the hash
//! of the maps that deduplicate strings, and [`prefetch`], the cache hint
//! behind [`block::prefetched`].
#![deny(missing_docs)]

pub mod block;
pub mod compress;
pub mod error;
pub mod frame;
pub mod hash;
pub mod header;
pub mod indexdata;
pub mod key;
pub mod padding;
pub mod prefetch;
#[cfg(test)]
#[path = "../tests/proto/mod.rs"]
mod proto;
pub mod scan;
pub mod sniff;
pub mod walk;
pub mod wire;

pub use error::{Error, ErrorKind, Result};
pub use key::{Keep, Key, Kind};
