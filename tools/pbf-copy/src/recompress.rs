//! `--recompress`: copied blobs change compression without being decoded.
//! Each frame's Blob is inflated and deflated again in the chosen
//! compression (the PrimitiveBlock inside is never parsed), its BlobHeader
//! is written anew with the new size and fresh indexdata for the new Blob
//! (from the keys `--add-indexdata` gives, else from the frame's own
//! indexdata when it checks against the old Blob; a frame without such
//! indexdata gets none), and frames come out in input order.
//!
//! The work goes in batches of whole frames, [`BATCH_BYTES`] or so of the
//! input each: one thread reads a batch with one `pread`, `threads` threads
//! re-compress whichever batch is next, and the calling thread writes each
//! batch with one write, in order, as it is done. A frame is inflated into
//! a buffer the thread keeps and deflated straight into the batch's output,
//! behind room left for its new BlobHeader; the batches' buffers go round
//! from reader to writer and back, so memory stays at a few batches per
//! thread whatever the length of a copy op, and nothing is allocated per
//! frame.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};

use pbf_format::compress::{Compression, blob_room, encode_blob_into, with_decoded};
use pbf_format::frame::{
    BlobStart, BlobType, FrameHeader, FrameReader, MAX_BLOB_LEN, MAX_WRITTEN_HEADER_LEN,
    frame_prefix,
};
use pbf_format::indexdata;

use crate::Recompress;
use pbf_copier::frames::{check_data_frame, frame_at, frame_reader};
use pbf_output::{Error, ErrorKind, OutputFile, Result};

/// The indexdata for the i-th frame of a range, re-compressed into a Blob
/// that starts as given; `None` to carry the frame's own summary over.
/// Called on the compression threads.
pub type IndexdataFor<'a> = dyn Fn(usize, &BlobStart) -> Result<Option<Vec<u8>>> + Sync + 'a;

/// Input bytes read at once: a batch holds the whole frames that start in
/// them (at least one, however long).
pub const BATCH_BYTES: usize = 1 << 20;

/// Batches read and not yet written, per compression thread: enough that a
/// thread finds the next batch ready while the writer waits for a slow one.
const BATCHES_PER_THREAD: usize = 2;

/// Re-compress the whole frames in `offset..offset + len` of `src` into
/// `out` in `r.compression` on `r.threads` threads. `indexdata(i, blob)` gives the indexdata for
/// the i-th frame of the range, re-compressed into a Blob that starts as
/// `blob`, or `None` to carry the frame's own summary over.
pub fn recompress_range(
    out: &mut OutputFile,
    (src, path): (&File, &Path),
    (offset, len): (u64, u64),
    r: Recompress,
    indexdata: &IndexdataFor<'_>,
) -> Result<()> {
    let end = offset
        .checked_add(len)
        .ok_or_else(|| Error::invalid(path.display().to_string(), "range overflows"))?;
    let src = frame_reader(src, path)?;
    let threads = r.threads.max(1);
    let job = Job {
        compression: r.compression,
        path,
        indexdata,
    };
    std::thread::scope(|scope| {
        let (free_tx, free_rx) = mpsc::channel::<Batch>();
        for _ in 0..threads * BATCHES_PER_THREAD {
            let _ = free_tx.send(Batch::default());
        }
        let (work_tx, work_rx) = mpsc::channel::<Batch>();
        let (done_tx, done_rx) = mpsc::channel::<(Batch, Result<()>)>();
        let reader = scope.spawn(move || read_batches(&src, (offset, end), &free_rx, &work_tx));
        let work_rx = Arc::new(Mutex::new(work_rx));
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (work_rx, done_tx, job) = (Arc::clone(&work_rx), done_tx.clone(), &job);
                scope.spawn(move || encode_batches(&work_rx, &done_tx, job))
            })
            .collect();
        drop(done_tx);
        // On an error here, returning drops the buffers' way back and the
        // results' receiver, and the other threads stop.
        let mut pending = BTreeMap::new();
        let mut next = 0usize;
        for (batch, done) in done_rx {
            pending.insert(batch.number, (batch, done));
            while let Some((batch, done)) = pending.remove(&next) {
                done?;
                out.write_all(&batch.out[..batch.used])?;
                let _ = free_tx.send(batch);
                next += 1;
            }
        }
        for w in workers {
            w.join().map_err(|_| panicked(path))?;
        }
        reader.join().map_err(|_| panicked(path))?
    })
}

/// Whole frames read at once, and their re-compressed frames: one
/// `pread`, one write.
#[derive(Default)]
struct Batch {
    /// Place among the batches of the range.
    number: usize,
    /// Index in the range of the first frame.
    first_frame: usize,
    /// Offset in the source of `input[0]`.
    offset: u64,
    /// The source's bytes from `offset`; only the first `read` hold them
    /// (the buffer's length only grows, so it is zeroed once).
    input: Vec<u8>,
    read: usize,
    /// The frames that lie whole in `input[..read]`, in order.
    frames: Vec<FrameHeader>,
    /// The re-compressed frames, in the first `used` bytes (the length
    /// only grows, as above).
    out: Vec<u8>,
    used: usize,
}

/// What every compression thread does, and to which file.
struct Job<'a> {
    compression: Compression,
    path: &'a Path,
    indexdata: &'a IndexdataFor<'a>,
}

fn panicked(path: &Path) -> Error {
    Error::invalid(path.display().to_string(), "a compression thread panicked")
}

/// Read the frames of `offset..end` in batches, into buffers from `free`,
/// and hand them to `work` in order.
fn read_batches(
    src: &FrameReader<'_>,
    (offset, end): (u64, u64),
    free: &mpsc::Receiver<Batch>,
    work: &mpsc::Sender<Batch>,
) -> Result<()> {
    let (mut at, mut number, mut first_frame) = (offset, 0, 0);
    // A closed channel means the writer stopped: its error is the news.
    while at < end {
        let Ok(mut batch) = free.recv() else { break };
        (batch.number, batch.first_frame) = (number, first_frame);
        read_batch(src, &mut batch, at, end)?;
        at = batch.frames.last().map_or(end, FrameHeader::end);
        first_frame += batch.frames.len();
        if work.send(batch).is_err() {
            break;
        }
        number += 1;
    }
    Ok(())
}

/// Read the whole frames from `at` on, [`BATCH_BYTES`] or the first frame
/// if longer, none past `end`.
fn read_batch(src: &FrameReader<'_>, batch: &mut Batch, at: u64, end: u64) -> Result<()> {
    batch.frames.clear();
    batch.offset = at;
    fill(src, batch, ((end - at) as usize).min(BATCH_BYTES))?;
    loop {
        let next = batch.frames.last().map_or(at, FrameHeader::end);
        if next >= end {
            return Ok(());
        }
        let from = (next - at) as usize;
        let fh = src
            .frame_header_in(next, &batch.input[from..batch.read])
            .map_err(|e| Error::new(src.path.display().to_string(), ErrorKind::Format(e)))?;
        check_frame(src.path, &fh, end)?;
        let frame_end = (fh.end() - at) as usize;
        if frame_end > batch.read {
            if !batch.frames.is_empty() {
                return Ok(());
            }
            fill(src, batch, frame_end)?;
        }
        batch.frames.push(fh);
    }
}

/// Read `len` bytes of the source from the batch's offset into its input.
fn fill(src: &FrameReader<'_>, batch: &mut Batch, len: usize) -> Result<()> {
    if batch.input.len() < len {
        batch.input.resize(len, 0);
    }
    src.file
        .read_exact_at(&mut batch.input[..len], batch.offset)
        .map_err(|e| Error::io(frame_at(src.path, batch.offset), e))?;
    batch.read = len;
    Ok(())
}

/// Check that the frame `fh` is an OSMData frame that ends by `end`.
fn check_frame(path: &Path, fh: &FrameHeader, end: u64) -> Result<()> {
    // The plan gives no per-frame lengths here: the frame's own is checked
    // against the end of the range.
    check_data_frame(fh, fh.frame_len()).map_err(|e| e.within(path.display()))?;
    if fh.datasize > MAX_BLOB_LEN || fh.end() > end {
        return Err(Error::invalid(
            frame_at(path, fh.offset),
            "runs past the range the plan copies (plan does not match the file)",
        ));
    }
    Ok(())
}

/// Re-compress batches from `work` until it is closed, into `done`.
fn encode_batches(
    work: &Mutex<mpsc::Receiver<Batch>>,
    done: &mpsc::Sender<(Batch, Result<()>)>,
    job: &Job<'_>,
) {
    loop {
        let next = pbf_cli::lock(work).recv();
        let Ok(mut batch) = next else { return };
        let result = encode_batch(&mut batch, job);
        if done.send((batch, result)).is_err() {
            return;
        }
    }
}

/// Re-compress every frame of `batch` into its output.
fn encode_batch(batch: &mut Batch, job: &Job<'_>) -> Result<()> {
    batch.used = 0;
    for (k, fh) in batch.frames.iter().enumerate() {
        let body = (fh.body_offset() - batch.offset) as usize;
        let blob = &batch.input[body..body + fh.datasize as usize];
        let place = |e| Error::new(frame_at(job.path, fh.offset), ErrorKind::Format(e));
        let index = batch.first_frame + k;
        let written = with_decoded(blob, |raw| {
            encode_frame((&mut batch.out, batch.used), raw, (fh, blob, index), job)
        })
        .map_err(place)??;
        batch.used += written;
    }
    Ok(())
}

/// Room before a Blob for the frame's length and BlobHeader.
const PREFIX_ROOM: usize = 4 + MAX_WRITTEN_HEADER_LEN;

/// Compress the block `raw` of the frame `fh` (whose Blob was `old`, the
/// `index`-th of its range) into a frame at `at` of `out`; returns its
/// length. The Blob is compressed in place behind room for the prefix,
/// then the frame moved down over the room it did not use.
fn encode_frame(
    (out, at): (&mut Vec<u8>, usize),
    raw: &[u8],
    (fh, old, index): (&FrameHeader, &[u8], usize),
    job: &Job<'_>,
) -> Result<usize> {
    let place = |e| Error::new(frame_at(job.path, fh.offset), ErrorKind::Format(e));
    let room = PREFIX_ROOM + blob_room(raw.len(), job.compression);
    if out.len() < at + room {
        out.resize(at + room, 0);
    }
    let frame = &mut out[at..at + room];
    let blob = encode_blob_into(raw, job.compression, &mut frame[PREFIX_ROOM..]).map_err(place)?;
    let blob = PREFIX_ROOM + blob.start..PREFIX_ROOM + blob.end;
    // MAX_BLOB_LEN is a u32: a Blob within it fits the BlobHeader's datasize.
    let n = blob.len();
    if n > MAX_BLOB_LEN as usize {
        let msg = format!("re-compressed Blob of {n} bytes exceeds the PBF limit");
        return Err(Error::invalid(frame_at(job.path, fh.offset), msg));
    }
    let start = BlobStart::of(&frame[blob.clone()]);
    let ix = (job.indexdata)(index, &start)?.or_else(|| carried_indexdata(fh, old, &start));
    let prefix = frame_prefix(&BlobType::OsmData, ix.as_deref(), n).map_err(place)?;
    let first = blob.start - prefix.len();
    frame[first..blob.start].copy_from_slice(&prefix);
    frame.copy_within(first..blob.end, 0);
    Ok(blob.end - first)
}

/// The frame's own indexdata, when it is ours and checks against the
/// frame's Blob `old`, written anew for the re-compressed Blob that starts
/// as `start`.
fn carried_indexdata(fh: &FrameHeader, old: &[u8], start: &BlobStart) -> Option<Vec<u8>> {
    let own = fh.indexdata.as_deref()?;
    let summary = indexdata::decode(own, &BlobStart::of(old))?;
    Some(indexdata::encode(&summary, start))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_format::compress::{decode_blob, encode_blob};
    use pbf_format::frame::{PbfFile, encode_frame};
    use std::io::Write;

    /// `n` data frames of distinct blocks of growing size, in `codec`.
    fn frames(n: usize, codec: Compression) -> (Vec<u8>, Vec<Vec<u8>>) {
        let (mut bytes, mut blocks) = (Vec::new(), Vec::new());
        for i in 0..n {
            let block: Vec<u8> = (0..1000 + 997 * i)
                .map(|j| (j * 7 % 251 + i) as u8)
                .collect();
            let blob = encode_blob(&block, codec).expect("blob");
            bytes.extend(encode_frame(&BlobType::OsmData, None, &blob).expect("frame"));
            blocks.push(block);
        }
        (bytes, blocks)
    }

    /// Re-compress `bytes` (after `skip` bytes of junk) to `to` on
    /// `threads` threads, into a file; its bytes.
    fn recompress(bytes: &[u8], to: Compression, threads: usize) -> Result<Vec<u8>> {
        let dir = tempfile::tempdir().expect("dir");
        let src_path = dir.path().join("in.pbf");
        let mut f = File::create(&src_path).expect("create");
        f.write_all(b"junk").expect("junk");
        f.write_all(bytes).expect("frames");
        let src = File::open(&src_path).expect("open");
        let out_path = dir.path().join("out.pbf");
        let opts = pbf_output::OutputOptions::default();
        let mut out = OutputFile::create(&out_path, &opts).expect("output");
        let none = |_: usize, _: &BlobStart| Ok(None);
        let range = (4, bytes.len() as u64);
        let r = Recompress {
            compression: to,
            threads,
            spools_as_they_are: false,
        };
        recompress_range(&mut out, (&src, &src_path), range, r, &none)?;
        out.commit()?;
        Ok(std::fs::read(&out_path).expect("read"))
    }

    #[test]
    fn every_codec_to_every_codec_keeps_the_blocks() {
        let codecs = ["none", "zlib:6", "zstd:3", "lz4"].map(|c| c.parse().expect("codec"));
        for from in codecs {
            // Enough frames for several batches, some threads idle.
            let (bytes, blocks) = frames(40, from);
            for to in codecs {
                let got = recompress(&bytes, to, 3).expect("recompress");
                let dir = tempfile::tempdir().expect("dir");
                let path = dir.path().join("got.pbf");
                std::fs::write(&path, &got).expect("write");
                let file = PbfFile::open(&path).expect("open");
                let mut n = 0;
                for (fh, block) in file.headers().zip(&blocks) {
                    let blob = file.read_body(&fh.expect("frame")).expect("body");
                    assert_eq!(
                        blob,
                        encode_blob(block, to).expect("blob"),
                        "{from} to {to}"
                    );
                    assert_eq!(&decode_blob(&blob).expect("decode"), block);
                    n += 1;
                }
                assert_eq!(n, blocks.len(), "{from} to {to}");
            }
        }
    }

    #[test]
    fn one_thread_and_many_write_the_same_bytes() {
        let (bytes, _) = frames(30, Compression::Zlib(6));
        let one = recompress(&bytes, Compression::Zlib(1), 1).expect("one");
        assert_eq!(
            recompress(&bytes, Compression::Zlib(1), 7).expect("seven"),
            one
        );
    }

    #[test]
    fn a_frame_past_the_range_is_refused() {
        let (bytes, _) = frames(3, Compression::Lz4);
        let cut = &bytes[..bytes.len() - 1];
        let err = recompress(cut, Compression::Lz4, 2).expect_err("cut");
        assert!(err.to_string().contains("in.pbf"), "{err}");
    }
}
