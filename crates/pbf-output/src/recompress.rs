//! `--recompress`: copied blobs change compression without being decoded.
//! Each frame's Blob is inflated and deflated again in the chosen
//! compression (the PrimitiveBlock inside is never parsed), its BlobHeader
//! is written anew with the new size and fresh indexdata for the new Blob
//! (from the keys `--add-indexdata` gives, else from the frame's own
//! indexdata when it checks against the old Blob; a frame without such
//! indexdata gets none), and frames come out in input order. Frames are
//! read in batches and compressed on a few threads, so memory stays at a
//! batch of blobs whatever the length of a copy op.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use pbf_format::compress::{Compression, decode_blob, encode_blob};
use pbf_format::frame::{BlobStart, FrameHeader, MAX_BLOB_LEN};
use pbf_format::indexdata;

use crate::error::{Error, ErrorKind, Result};
use crate::frames::{check_data_frame, data_frame_prefix, frame_at, frame_reader};
use crate::output::OutputFile;

/// The indexdata for the i-th frame of a range, re-compressed into a Blob
/// that starts as given; `None` to carry the frame's own summary over.
pub type IndexdataFor<'a> = dyn Fn(usize, &BlobStart) -> Result<Option<Vec<u8>>> + 'a;

/// A frame read for re-compression: its header and Blob bytes.
struct Frame {
    header: FrameHeader,
    blob: Vec<u8>,
}

/// Re-compress the whole frames in `offset..offset + len` of `src` into
/// `out`, `threads` at a time. `indexdata(i, blob)` gives the indexdata for
/// the i-th frame of the range, re-compressed into a Blob that starts as
/// `blob`, or `None` to carry the frame's own summary over.
pub fn recompress_range(
    out: &mut OutputFile,
    (src, path): (&File, &Path),
    (offset, len): (u64, u64),
    compression: Compression,
    threads: usize,
    indexdata: &IndexdataFor<'_>,
) -> Result<()> {
    let end = offset
        .checked_add(len)
        .ok_or_else(|| Error::invalid(path.display().to_string(), "range overflows"))?;
    let batch = threads.max(1) * 4;
    let (mut at, mut index) = (offset, 0usize);
    while at < end {
        let mut frames = Vec::with_capacity(batch);
        while at < end && frames.len() < batch {
            let frame = read_frame(src, path, at, end)?;
            at = frame.header.end();
            frames.push(frame);
        }
        let encoded = encode_batch(&frames, compression, threads, path)?;
        for (frame, blob) in frames.iter().zip(encoded) {
            let start = BlobStart::of(&blob);
            let ix = match indexdata(index, &start)? {
                Some(ix) => Some(ix),
                None => carried_indexdata(frame, &start),
            };
            let datasize = u32::try_from(blob.len())
                .ok()
                .filter(|&n| n <= MAX_BLOB_LEN);
            let datasize = datasize.ok_or_else(|| {
                Error::invalid(
                    frame_at(path, frame.header.offset),
                    format!(
                        "re-compressed Blob of {} bytes exceeds the PBF limit",
                        blob.len()
                    ),
                )
            })?;
            out.write_all(&data_frame_prefix(ix.as_deref(), datasize)?)?;
            out.write_all(&blob)?;
            index += 1;
        }
    }
    Ok(())
}

/// The frame's own indexdata, when it is ours and checks against the frame's
/// Blob, written anew for the re-compressed Blob that starts as `start`.
fn carried_indexdata(frame: &Frame, start: &BlobStart) -> Option<Vec<u8>> {
    let own = frame.header.indexdata.as_deref()?;
    let summary = indexdata::decode(own, &BlobStart::of(&frame.blob))?;
    Some(indexdata::encode(&summary, start))
}

/// Read the OSMData frame at `at`, which must end by `end`.
fn read_frame(src: &File, path: &Path, at: u64, end: u64) -> Result<Frame> {
    let header = frame_reader(src, path)?
        .frame_header_at(at)
        .map_err(|e| Error::new("", ErrorKind::Format(e)))?;
    // The plan gives no per-frame lengths here: the frame's own is checked
    // against the end of the range below.
    check_data_frame(&header, header.frame_len()).map_err(|e| e.within(path.display()))?;
    if header.datasize > MAX_BLOB_LEN || header.end() > end {
        return Err(Error::invalid(
            frame_at(path, at),
            "runs past the range the plan copies (plan does not match the file)",
        ));
    }
    let mut blob = vec![0u8; header.datasize as usize];
    src.read_exact_at(&mut blob, header.body_offset())
        .map_err(|e| Error::io(frame_at(path, at), e))?;
    Ok(Frame { header, blob })
}

/// Inflate and deflate every frame's Blob, on up to `threads` threads.
fn encode_batch(
    frames: &[Frame],
    compression: Compression,
    threads: usize,
    path: &Path,
) -> Result<Vec<Vec<u8>>> {
    let per_thread = frames.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|scope| {
        let workers: Vec<_> = frames
            .chunks(per_thread)
            .map(|chunk| {
                scope.spawn(move || {
                    chunk
                        .iter()
                        .map(|f| reencode(f, compression, path))
                        .collect::<Result<Vec<_>>>()
                })
            })
            .collect();
        let mut out = Vec::with_capacity(frames.len());
        for w in workers {
            let part = w.join().map_err(|_| {
                Error::invalid(path.display().to_string(), "a compression thread panicked")
            })??;
            out.extend(part);
        }
        Ok(out)
    })
}

fn reencode(frame: &Frame, compression: Compression, path: &Path) -> Result<Vec<u8>> {
    let place = |e| Error::new(frame_at(path, frame.header.offset), ErrorKind::Format(e));
    let raw = decode_blob(&frame.blob).map_err(place)?;
    encode_blob(&raw, compression).map_err(place)
}
