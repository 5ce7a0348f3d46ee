//! Build a large file for benchmarking header-only walks: the OSMHeader of
//! IN, then IN's data blobs COPIES times, each BlobHeader carrying our
//! indexdata (from a key scan of the blob), so `pbf-index` needs no blob
//! bodies. Ids repeat across copies: the file is for timing reads, not sorting.
//!
//! Usage: cargo run --release -p pbf-bench-gen --example repeat_with_indexdata -- IN OUT COPIES

use std::io::{BufWriter, Write};
use std::path::Path;

use pbf_format::compress::decode_blob;
use pbf_format::frame::{BlobStart, BlobType, PbfFile, encode_frame};
use pbf_format::indexdata;
use pbf_format::scan::scan_block;

type Failure = Box<dyn std::error::Error>;

fn main() -> Result<(), Failure> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [input, output, copies] = args.as_slice() else {
        return Err("usage: repeat_with_indexdata IN OUT COPIES".into());
    };
    let copies: usize = copies.parse()?;
    let (header, data) = frames_with_indexdata(Path::new(input))?;
    let mut out = BufWriter::new(std::fs::File::create(output)?);
    out.write_all(&header)?;
    for _ in 0..copies {
        for frame in &data {
            out.write_all(frame)?;
        }
    }
    out.flush()?;
    Ok(())
}

/// The header frame as it is, and every data frame re-framed with indexdata.
fn frames_with_indexdata(path: &Path) -> Result<(Vec<u8>, Vec<Vec<u8>>), Failure> {
    let file = PbfFile::open(path)?;
    let (mut header, mut data) = (Vec::new(), Vec::new());
    for fh in file.headers() {
        let fh = fh?;
        let body = file.read_body(&fh)?;
        if fh.blob_type != BlobType::OsmData {
            header.extend(encode_frame(&fh.blob_type, fh.indexdata.as_deref(), &body)?);
            continue;
        }
        let start = BlobStart::of(&body);
        let ix = scan_block(&decode_blob(&body)?)?.map(|s| indexdata::encode(&s, &start));
        data.push(encode_frame(&BlobType::OsmData, ix.as_deref(), &body)?);
    }
    Ok((header, data))
}
