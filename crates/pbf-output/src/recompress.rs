//! `--recompress`: copied blobs change compression without being decoded.
//! Each frame's Blob is inflated and deflated again in the chosen
//! compression (the PrimitiveBlock inside is never parsed), its BlobHeader
//! is written anew with the new size and fresh indexdata for the new Blob
//! (from the keys `--add-indexdata` gives, else from the frame's own
//! indexdata when it checks against the old Blob; a frame without such
//! indexdata gets none), and frames come out in input order. Frames are
//! read by one thread, compressed on all the others and written in order as
//! they are done, so every core compresses all the time, and memory stays
//! at a few blobs per thread whatever the length of a copy op.

use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex, mpsc};

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
/// `out` on `threads` threads. `indexdata(i, blob)` gives the indexdata for
/// the i-th frame of the range, re-compressed into a Blob that starts as
/// `blob`, or `None` to carry the frame's own summary over.
///
/// Three kinds of thread, so no core waits for another's batch: one reads
/// frames in file order, `threads` inflate and deflate whichever frame is
/// next, and the calling thread writes them in file order as they are done.
/// At most [`FRAMES_PER_THREAD`] frames per thread are read and not yet
/// written: the reader takes a token for each, and the writer gives it back.
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
    let threads = threads.max(1);
    let window = threads * FRAMES_PER_THREAD;
    std::thread::scope(|scope| {
        let (token_tx, token_rx) = mpsc::sync_channel::<()>(window);
        for _ in 0..window {
            let _ = token_tx.send(());
        }
        let (work_tx, work_rx) = mpsc::channel::<(usize, Frame)>();
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        let reader =
            scope.spawn(move || read_frames(src, path, (offset, end), &token_rx, &work_tx));
        let work_rx = Arc::new(Mutex::new(work_rx));
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (work_rx, done_tx) = (Arc::clone(&work_rx), done_tx.clone());
                scope.spawn(move || encode_frames(&work_rx, &done_tx, compression, path))
            })
            .collect();
        drop(done_tx);
        // On an error here, returning drops the token sender and the
        // results' receiver, and the other threads stop.
        let mut pending = BTreeMap::new();
        let mut next = 0usize;
        for (i, frame, blob) in done_rx {
            pending.insert(i, (frame, blob));
            while let Some((frame, blob)) = pending.remove(&next) {
                write_frame(out, path, &frame, blob?, next, indexdata)?;
                let _ = token_tx.send(());
                next += 1;
            }
        }
        for w in workers {
            w.join().map_err(|_| panicked(path))?;
        }
        reader.join().map_err(|_| panicked(path))?
    })
}

/// Frames read and not yet written, per compression thread: enough that a
/// thread finds the next frame ready while the writer waits for a slow one.
const FRAMES_PER_THREAD: usize = 4;

/// A frame, by its place in the range, with its re-compressed Blob.
type Done = (usize, Frame, Result<Vec<u8>>);

/// Read the frames of `offset..end` in order into `work`, one per token.
fn read_frames(
    src: &File,
    path: &Path,
    (offset, end): (u64, u64),
    tokens: &mpsc::Receiver<()>,
    work: &mpsc::Sender<(usize, Frame)>,
) -> Result<()> {
    let (mut at, mut i) = (offset, 0usize);
    // A closed channel means the writer stopped: its error is the news.
    while at < end && tokens.recv().is_ok() {
        let frame = read_frame(src, path, at, end)?;
        at = frame.header.end();
        if work.send((i, frame)).is_err() {
            break;
        }
        i += 1;
    }
    Ok(())
}

/// Re-compress frames from `work` until it is closed, into `done`.
fn encode_frames(
    work: &Mutex<mpsc::Receiver<(usize, Frame)>>,
    done: &mpsc::Sender<Done>,
    compression: Compression,
    path: &Path,
) {
    loop {
        let next = work.lock().unwrap_or_else(|e| e.into_inner()).recv();
        let Ok((i, frame)) = next else { return };
        let blob = reencode(&frame, compression, path);
        if done.send((i, frame, blob)).is_err() {
            return;
        }
    }
}

fn panicked(path: &Path) -> Error {
    Error::invalid(path.display().to_string(), "a compression thread panicked")
}

/// Write `frame` with its re-compressed Blob, the `index`-th of its range.
fn write_frame(
    out: &mut OutputFile,
    path: &Path,
    frame: &Frame,
    blob: Vec<u8>,
    index: usize,
    indexdata: &IndexdataFor<'_>,
) -> Result<()> {
    let start = BlobStart::of(&blob);
    let ix = match indexdata(index, &start)? {
        Some(ix) => Some(ix),
        None => carried_indexdata(frame, &start),
    };
    let datasize = u32::try_from(blob.len())
        .ok()
        .filter(|&n| n <= MAX_BLOB_LEN)
        .ok_or_else(|| {
            Error::invalid(
                frame_at(path, frame.header.offset),
                format!(
                    "re-compressed Blob of {} bytes exceeds the PBF limit",
                    blob.len()
                ),
            )
        })?;
    out.write_all(&data_frame_prefix(ix.as_deref(), datasize)?)?;
    out.write_all(&blob)
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

fn reencode(frame: &Frame, compression: Compression, path: &Path) -> Result<Vec<u8>> {
    let place = |e| Error::new(frame_at(path, frame.header.offset), ErrorKind::Format(e));
    let raw = decode_blob(&frame.blob).map_err(place)?;
    encode_blob(&raw, compression).map_err(place)
}
