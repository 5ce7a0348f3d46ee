//! The re-compressed frames file, both sides of it. `pbf-sort --recompress`
//! would otherwise inflate every blob twice: once in `pbf-index` for its keys
//! and once in `pbf-copy` to compress it anew. So `pbf-index --recompressed
//! FILE` compresses the blobs that will likely be copied while it holds them
//! inflated ([`Writer`]), and `pbf-copy --recompressed FILE` copies those
//! frames where a copy op asks for their input frames ([`Table`]), and
//! re-compresses the others itself. Either way the output has the same bytes.
//!
//! Layout: the frames back to back from offset 0, each as pbf-copy writes a
//! re-compressed frame without indexdata; then one entry per frame (u64le:
//! the input frame's offset and length, the frame's length), in input order;
//! then the input's absolute path, and a footer (u64le: the path's length,
//! the number of entries, the input's size, mtime seconds and nanoseconds,
//! the compression; then [`MAGIC`]). The writer adds the table and footer
//! last, so a file without them was not finished and is refused; the copier
//! uses it only for the input it names, as it still is, and only to write the
//! compression it names. A writer that is dropped unfinished removes its
//! file, and one that gives up ([`Writer::give_up`]) finishes it empty.

use std::fs::File;
use std::io::Write;
use std::ops::Range;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::compress::{Compression, blob_room, encode_blob_into};
use crate::error::{Error, Result};
use crate::frame::{BlobType, encode_frame};

/// The last 8 bytes of a finished file.
pub const MAGIC: &[u8; 8] = b"pbfrecz1";

/// Bytes of one table entry, and of the footer.
const ENTRY: u64 = 24;
const FOOTER: u64 = 48 + MAGIC.len() as u64;
/// The longest input path a footer may name.
const MAX_PATH: u64 = 64 << 10;

/// The frame `pbf-copy --recompress C` writes for a Blob whose block is
/// `raw`, when the frame gets no indexdata. The Blob is compressed into a
/// buffer the thread keeps (a fresh one per blob cost a tenth more CPU).
pub fn frame(raw: &[u8], compression: Compression) -> Result<Vec<u8>> {
    thread_local! {
        static ROOM: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    ROOM.with_borrow_mut(|room| {
        let need = blob_room(raw.len(), compression);
        if room.len() < need {
            room.resize(need, 0);
        }
        let blob = encode_blob_into(raw, compression, room)?;
        encode_frame(&BlobType::OsmData, None, &room[blob])
    })
}

/// Writes a re-compressed frames file, frames in input order.
#[derive(Debug)]
pub struct Writer {
    compression: Compression,
    /// Finished: the drop leaves the file.
    finished: bool,
    /// Written unbuffered: a frame is one write (tens of kB or more).
    out: File,
    path: PathBuf,
    table: Vec<u8>,
    last_end: u64,
    entries: u64,
    /// Bytes of frames written, and whether the writer gave up.
    frames_len: u64,
    given_up: bool,
}

impl Writer {
    /// Create `path`, a new file, for frames in `compression`.
    pub fn create(path: &Path, compression: Compression) -> Result<Writer> {
        let file = File::options().write(true).create_new(true).open(path);
        let file = file.map_err(|e| Error::from(e).in_file(path))?;
        Ok(Writer {
            compression,
            finished: false,
            out: file,
            path: path.to_path_buf(),
            table: Vec::new(),
            last_end: 0,
            entries: 0,
            frames_len: 0,
            given_up: false,
        })
    }

    /// Add the re-compressed `frame` of the input frame at `input`, which
    /// must lie after the one added before.
    pub fn add(&mut self, input: Range<u64>, frame: &[u8]) -> Result<()> {
        if input.start < self.last_end || input.end <= input.start {
            return Err(Error::malformed(
                "re-compressed frames added out of input order",
            ));
        }
        if self.given_up {
            return Ok(());
        }
        self.out.write_all(frame).map_err(|e| self.failed(e))?;
        self.frames_len += frame.len() as u64;
        for n in [input.start, input.end - input.start, frame.len() as u64] {
            self.table.extend_from_slice(&n.to_le_bytes());
        }
        self.last_end = input.end;
        self.entries += 1;
        Ok(())
    }

    /// Write the table and footer naming `input` (its absolute path) as it
    /// is now, and close the file.
    pub fn finish(mut self, input: &Path) -> Result<()> {
        let name = input.as_os_str().as_bytes();
        let meta = std::fs::metadata(input).map_err(|e| Error::from(e).in_file(input))?;
        let id = Identity::of(&meta);
        let footer = [
            name.len() as u64,
            self.entries,
            id.size,
            id.mtime as u64,
            id.mtime_nsec,
            compression_word(self.compression),
        ]
        .map(u64::to_le_bytes)
        .concat();
        for part in [&self.table[..], name, &footer, MAGIC] {
            self.out.write_all(part).map_err(|e| self.failed(e))?;
        }
        self.finished = true;
        Ok(())
    }

    /// Drop the frames written (their room goes back to the filesystem) and
    /// add none from now on: [`Writer::finish`] then writes an empty table,
    /// and the copier re-compresses every blob itself.
    pub fn give_up(&mut self) -> Result<()> {
        self.out.set_len(0).map_err(|e| self.failed(e))?;
        std::io::Seek::rewind(&mut self.out).map_err(|e| self.failed(e))?;
        self.table.clear();
        (self.entries, self.frames_len, self.given_up) = (0, 0, true);
        Ok(())
    }

    /// Where the file is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`Writer::give_up`] was called.
    pub fn gave_up(&self) -> bool {
        self.given_up
    }

    /// Bytes of frames written.
    pub fn frames_len(&self) -> u64 {
        self.frames_len
    }

    fn failed(&self, e: std::io::Error) -> Error {
        Error::from(e).in_file(&self.path)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        if !self.finished {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// A compression as one footer word: a codec tag, then the level.
fn compression_word(c: Compression) -> u64 {
    match c {
        Compression::None => 0,
        Compression::Zlib(level) => 1 << 32 | u64::from(level),
        Compression::Zstd(level) => 2 << 32 | u64::from(level as u32),
        Compression::Lz4 => 3 << 32,
    }
}

/// The compression a footer word names, if any.
fn word_compression(w: u64) -> Option<Compression> {
    let level = w as u32;
    match w >> 32 {
        0 if level == 0 => Some(Compression::None),
        1 if level <= 9 => Some(Compression::Zlib(level)),
        2 if (1..=22).contains(&(level as i32)) => Some(Compression::Zstd(level as i32)),
        3 if level == 0 => Some(Compression::Lz4),
        _ => None,
    }
}

/// One entry: an input frame and where its re-compressed frame lies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The input frame's offset.
    pub input_offset: u64,
    /// The input frame's length.
    pub input_len: u64,
    /// The re-compressed frame's offset in the file.
    pub offset: u64,
    /// The re-compressed frame's length.
    pub len: u64,
}

/// A piece of an input range: input bytes to re-compress, or re-compressed
/// frames ready in the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// `offset..offset + len` of the input.
    Input(Range<u64>),
    /// `offset..offset + len` of the re-compressed frames file.
    Ready(Range<u64>),
}

/// What a table says its input file was: size and mtime.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Identity {
    size: u64,
    mtime: i64,
    mtime_nsec: u64,
}

impl Identity {
    fn of(meta: &std::fs::Metadata) -> Identity {
        Identity {
            size: meta.len(),
            mtime: meta.mtime(),
            mtime_nsec: meta.mtime_nsec() as u64,
        }
    }
}

/// How far a file being written holds frames: its size, or where its
/// frames end once it is finished (the table and footer are not frames).
pub fn frames_held(file: &File) -> u64 {
    let Ok(size) = file.metadata().map(|m| m.len()) else {
        return 0;
    };
    let mut footer = [0u8; FOOTER as usize];
    if size < FOOTER || file.read_exact_at(&mut footer, size - FOOTER).is_err() {
        return size;
    }
    let word = |i: usize| u64::from_le_bytes(footer[i * 8..i * 8 + 8].try_into().expect("8"));
    match &footer[48..] == MAGIC {
        true => word(1)
            .checked_mul(ENTRY)
            .and_then(|t| size.checked_sub(FOOTER + word(0) + t))
            .unwrap_or(0),
        false => size,
    }
}

/// A finished file's table, read whole.
#[derive(Debug)]
pub struct Table {
    input: PathBuf,
    identity: Identity,
    compression: Compression,
    entries: Vec<Entry>,
}

impl Table {
    /// Read and check the table of `file` (named `path` in errors).
    pub fn read(file: &File, path: &Path) -> Result<Table> {
        let bad = |why: &str| {
            Error::malformed(format!("not a finished re-compressed frames file: {why}"))
                .in_file(path)
        };
        let io = |e: std::io::Error| Error::from(e).in_file(path);
        let size = file.metadata().map_err(io)?.len();
        if size < FOOTER {
            return Err(bad("too short"));
        }
        let mut footer = [0u8; FOOTER as usize];
        file.read_exact_at(&mut footer, size - FOOTER).map_err(io)?;
        if &footer[48..] != MAGIC {
            return Err(bad("no footer"));
        }
        let word =
            |b: &[u8], i: usize| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().expect("8"));
        let (name_len, count) = (word(&footer, 0), word(&footer, 1));
        let identity = Identity {
            size: word(&footer, 2),
            mtime: word(&footer, 3) as i64,
            mtime_nsec: word(&footer, 4),
        };
        let compression =
            word_compression(word(&footer, 5)).ok_or_else(|| bad("an unknown compression"))?;
        let table_len = count.checked_mul(ENTRY).filter(|_| name_len <= MAX_PATH);
        let table_len = table_len
            .filter(|&n| n.saturating_add(name_len).saturating_add(FOOTER) <= size)
            .ok_or_else(|| bad("its table does not fit it"))?;
        let frames_end = size - FOOTER - name_len - table_len;
        let mut tail = vec![0u8; (table_len + name_len) as usize];
        file.read_exact_at(&mut tail, frames_end).map_err(io)?;
        let name = tail.split_off(table_len as usize);
        let entries = entries(&tail, frames_end).ok_or_else(|| bad("its table is out of order"))?;
        let input = PathBuf::from(std::ffi::OsString::from_vec(name));
        Ok(Table {
            input,
            identity,
            compression,
            entries,
        })
    }

    /// The compression of the frames.
    pub fn compression(&self) -> Compression {
        self.compression
    }

    /// The input file whose frames these are.
    pub fn input(&self) -> &Path {
        &self.input
    }

    /// Whether `file` is the input as it was when the table was written
    /// (same size and mtime).
    pub fn is_of(&self, file: &File) -> bool {
        file.metadata()
            .is_ok_and(|m| Identity::of(&m) == self.identity)
    }

    /// The entries, in input order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The range `offset..offset + len` of the input, cut into pieces:
    /// runs of frames ready in the file, and the input between them.
    pub fn pieces(&self, offset: u64, len: u64) -> Vec<Piece> {
        let end = offset.saturating_add(len);
        let first = self.entries.partition_point(|e| e.input_offset < offset);
        let mut pieces = Vec::new();
        let mut at = offset;
        for e in self.entries[first..]
            .iter()
            .take_while(|e| e.input_offset + e.input_len <= end)
        {
            if e.input_offset > at {
                pieces.push(Piece::Input(at..e.input_offset));
            }
            match pieces.last_mut() {
                Some(Piece::Ready(r)) if r.end == e.offset && at == e.input_offset => {
                    r.end += e.len
                }
                _ => pieces.push(Piece::Ready(e.offset..e.offset + e.len)),
            }
            at = e.input_offset + e.input_len;
        }
        if at < end {
            pieces.push(Piece::Input(at..end));
        }
        pieces
    }
}

/// The entries of `table`, whose frames end at `frames_end`; `None` unless
/// input frames are in order without overlap and frames lie back to back.
fn entries(table: &[u8], frames_end: u64) -> Option<Vec<Entry>> {
    let mut entries: Vec<Entry> = Vec::with_capacity(table.len() / ENTRY as usize);
    let mut offset = 0u64;
    for raw in table.chunks_exact(ENTRY as usize) {
        let n = |i: usize| u64::from_le_bytes(raw[i * 8..i * 8 + 8].try_into().expect("8"));
        let e = Entry {
            input_offset: n(0),
            input_len: n(1),
            offset,
            len: n(2),
        };
        let after = entries.last().map_or(0, |p| p.input_offset + p.input_len);
        if e.input_offset < after
            || e.input_len == 0
            || e.input_offset.checked_add(e.input_len).is_none()
        {
            return None;
        }
        offset = offset.checked_add(e.len)?;
        entries.push(e);
    }
    (offset == frames_end).then_some(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of `frames` at `path`, for the input `input` (created).
    fn write(path: &Path, frames: &[(Range<u64>, &[u8])]) -> PathBuf {
        let input = path.with_extension("in");
        std::fs::write(&input, b"input").expect("input");
        let mut w = Writer::create(path, Compression::Lz4).expect("create");
        for (range, frame) in frames {
            w.add(range.clone(), frame).expect("add");
        }
        w.finish(&input).expect("finish");
        input
    }

    #[test]
    fn a_table_reads_back_and_cuts_ranges_into_pieces() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("r");
        let input = write(
            &path,
            &[(10..20, b"aaa"), (20..35, b"bb"), (50..60, b"cccc")],
        );
        let table = Table::read(&File::open(&path).expect("open"), &path).expect("table");
        assert_eq!(table.input(), input);
        assert!(table.is_of(&File::open(&input).expect("open")));
        std::fs::write(&input, b"changed").expect("change");
        assert!(!table.is_of(&File::open(&input).expect("open")));
        assert_eq!(
            table.entries()[2],
            Entry {
                input_offset: 50,
                input_len: 10,
                offset: 5,
                len: 4
            }
        );
        use Piece::*;
        assert_eq!(
            table.pieces(0, 70),
            [
                Input(0..10),
                Ready(0..5),
                Input(35..50),
                Ready(5..9),
                Input(60..70)
            ]
        );
        assert_eq!(
            table.pieces(20, 40),
            [Ready(3..5), Input(35..50), Ready(5..9)]
        );
        assert_eq!(table.pieces(36, 10), [Input(36..46)]);
    }

    #[test]
    fn a_file_holds_frames_up_to_its_size_then_up_to_its_table() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("r");
        let mut w = Writer::create(&path, Compression::Lz4).expect("create");
        w.add(0..10, b"abcde").expect("add");
        w.out.flush().expect("flush");
        assert_eq!(frames_held(&File::open(&path).expect("open")), 5);
        drop(w);
        write(&path, &[(0..10, b"abcde"), (10..20, b"fg")]);
        assert_eq!(frames_held(&File::open(&path).expect("open")), 7);
    }

    #[test]
    fn a_table_names_its_compression_and_one_given_up_holds_nothing() {
        let dir = tempfile::tempdir().expect("dir");
        let input = dir.path().join("in");
        std::fs::write(&input, b"input").expect("input");
        for c in ["none", "zlib:0", "zlib:9", "zstd:1", "zstd:22", "lz4"] {
            let c: Compression = c.parse().expect("compression");
            let path = dir.path().join(format!("{c}"));
            let mut w = Writer::create(&path, c).expect("create");
            w.add(0..10, b"abcde").expect("add");
            w.give_up().expect("give up");
            w.add(10..20, b"fg").expect("add after");
            assert!(w.gave_up() && w.frames_len() == 0);
            w.finish(&input).expect("finish");
            let table = Table::read(&File::open(&path).expect("open"), &path).expect("table");
            assert_eq!((table.compression(), table.entries().len()), (c, 0));
            assert_eq!(table.pieces(0, 20), [Piece::Input(0..20)]);
        }
    }

    #[test]
    fn an_unfinished_or_damaged_file_is_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("r");
        let mut w = Writer::create(&path, Compression::Lz4).expect("create");
        w.add(0..10, b"abc").expect("add");
        assert!(w.add(5..10, b"x").is_err(), "out of order");
        assert!(
            Writer::create(&path, Compression::Lz4).is_err(),
            "an existing file"
        );
        drop(w);
        assert!(!path.exists(), "dropped unfinished, removed");
        std::fs::write(&path, b"abc").expect("frames alone");
        let err = Table::read(&File::open(&path).expect("open"), &path).expect_err("unfinished");
        assert!(err.to_string().contains("not a finished"), "{err}");
        std::fs::remove_file(&path).expect("rm");
        write(&path, &[(0..10, b"abc")]);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[3..11].copy_from_slice(&u64::MAX.to_le_bytes()); // the entry's input offset
        std::fs::write(&path, &bytes).expect("write");
        let err = Table::read(&File::open(&path).expect("open"), &path).expect_err("damaged");
        assert!(err.to_string().contains("out of order"), "{err}");
    }
}
