//! Reading an input: its OSMHeader, the list of its data frames, and decoding
//! of data frames into elements (in parallel where a whole file is needed).

use std::path::Path;

use anyhow::{Context, Result, bail};
use pbf_format::block::{Element, decode_block};
use pbf_format::compress::decode_blob;
use pbf_format::frame::{BlobType, FrameHeader, PbfFile};
use pbf_format::header::{Header, read_file_header};
use rayon::prelude::*;

/// Largest input that `tile` and `history` hold decoded in memory.
pub const MAX_IN_MEMORY: u64 = 512 << 20;

/// An open input file.
pub struct Input {
    /// The file.
    pub file: PbfFile,
    /// Its decoded OSMHeader.
    pub header: Header,
    /// The OSMHeader frame.
    pub header_frame: FrameHeader,
    /// Every frame after the header, in file order.
    pub data: Vec<FrameHeader>,
}

impl Input {
    /// Open a file and walk its frame headers.
    pub fn open(path: &Path) -> Result<Input> {
        let file = PbfFile::open(path)?;
        let mut walk = file.headers();
        let (header_frame, header) = read_file_header(&file, &mut walk)?;
        let data = walk.collect::<pbf_format::Result<Vec<_>>>()?;
        Ok(Input {
            file,
            header,
            header_frame,
            data,
        })
    }

    /// Decode one data frame into elements.
    pub fn decode(&self, fh: &FrameHeader) -> Result<Vec<Element>> {
        if fh.blob_type != BlobType::OsmData {
            bail!(
                "{}: offset {}: blob type {} is not OSMData",
                self.file.path().display(),
                fh.offset,
                fh.blob_type
            );
        }
        let fail = |e: pbf_format::Error| e.at(fh.offset).in_file(self.file.path());
        let raw = decode_blob(&self.file.read_body(fh)?).map_err(fail)?;
        Ok(decode_block(&raw).map_err(fail)?)
    }

    /// Decode every data frame, in file order (for small inputs only).
    pub fn decode_all(&self) -> Result<Vec<Element>> {
        if self.file.size() > MAX_IN_MEMORY {
            bail!(
                "{}: {} bytes is more than the {} MiB this subcommand holds decoded in memory \
                 (use a smaller extract)",
                self.file.path().display(),
                self.file.size(),
                MAX_IN_MEMORY >> 20
            );
        }
        let blocks: Vec<Vec<Element>> = self
            .data
            .par_iter()
            .map(|fh| self.decode(fh))
            .collect::<Result<_>>()
            .with_context(|| format!("{}: decoding", self.file.path().display()))?;
        Ok(blocks.into_iter().flatten().collect())
    }
}
