//! The output file: never visible under its final name until it is complete.
//! Bytes go to a temporary file in OUT's directory (unnamed where the
//! filesystem allows, see [`crate::temp`]); [`OutputFile::commit`] fsyncs it,
//! puts it in place as OUT and fsyncs the directory, and
//! [`OutputFile::commit_checked`] first lets a check judge the complete
//! file. Anything else (an error, a panic, a signal, a check that says no)
//! removes the temporary file and leaves an existing OUT untouched.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use crate::buffer::DirectBuffer;
use crate::cleanup;
use crate::error::{Error, ErrorKind, Result};
use crate::range::{CopyStats, copy_range, read_exact};
use crate::temp::Temp;

/// What an output may replace.
#[derive(Clone, Debug, Default)]
pub struct OutputOptions {
    /// Replace an existing OUT (`-O/--overwrite`); without it an existing OUT
    /// is an error.
    pub overwrite: bool,
    /// Files OUT must not be (inputs, plan sources): compared by device and
    /// inode when both exist, and by canonical path.
    pub inputs: Vec<PathBuf>,
    /// Where the temporary file goes instead of OUT's directory. Must be on
    /// OUT's filesystem: the file is put in place by a link or a rename,
    /// never copied.
    pub temp_dir: Option<PathBuf>,
}

/// An output being written: a temporary file to be renamed onto OUT, or
/// standard output (`-o -`).
///
/// Writes are positional for a temporary file (the file position is never
/// used) and sequential for standard output (a pipe has no positions). A tool
/// that writes through [`OutputFile::file`] itself, as `pbf-reflink` does
/// with `FICLONERANGE` at [`OutputFile::position`], reports the bytes with
/// [`OutputFile::advance`].
#[derive(Debug)]
pub struct OutputFile {
    target: Target,
    name: String,
    pos: u64,
    /// Bytes before this offset were handed to the disk ([`start_writeback`]).
    handed: u64,
    stats: CopyStats,
    /// Appends gathered and written past the page cache
    /// ([`OutputFile::buffer_appends`]).
    buffer: Option<DirectBuffer>,
}

/// A check of the complete output, given its temporary path
/// ([`OutputFile::commit_checked`]).
pub type Check<'a> = dyn FnMut(&Path) -> Result<()> + 'a;

/// Bytes written between two writeback hints ([`start_writeback`]).
pub const WRITEBACK_STEP: u64 = 16 << 20;

#[derive(Debug)]
enum Target {
    /// A temporary file, to become `dest`.
    Temp {
        temp: Temp,
        dest: PathBuf,
        overwrite: bool,
    },
    Stream(StreamOut),
}

/// What ends a stream that failed after it started: a frame length no PBF
/// reader accepts (over any BlobHeader limit, and negative for libosmium's
/// signed read), so `pbf-copy -o - | reader` fails downstream too instead of
/// reading a short stream that ends at a frame boundary as a complete file.
pub const STREAM_POISON: [u8; 4] = [0xFF; 4];

/// Standard output; poisoned on drop unless finished.
#[derive(Debug)]
struct StreamOut {
    /// Poisons the stream if a signal kills the process once it started.
    /// Declared before `file`, so it is dropped first: the signal handler
    /// never writes to the descriptor after it is closed (and its number
    /// perhaps reused).
    on_signal: Option<cleanup::StreamRegistration>,
    file: File,
    started: bool,
    finished: bool,
}

impl Drop for StreamOut {
    fn drop(&mut self) {
        if self.started && !self.finished {
            let _ = (&self.file).write_all(&STREAM_POISON);
        }
    }
}

impl OutputFile {
    /// Start writing `out` (`-` for standard output); a symbolic link is
    /// written through (the new file replaces its target, and the link
    /// stays). Refuses an existing OUT unless `opts.overwrite`, anything but
    /// a regular file as OUT, and an OUT that is one of `opts.inputs`.
    /// Nothing is created when it fails. The rest of what a user's OUT
    /// must be (no name the system gives a device or process, see
    /// [`replaces_system_name`], and `opts.temp_dir` on its filesystem) a
    /// tool checks before, in its own words (`pbf_cli::paths`).
    pub fn create(out: &Path, opts: &OutputOptions) -> Result<OutputFile> {
        if out == Path::new("-") {
            // A duplicate of fd 1: Rust's buffered `stdout()` must not be
            // used for data at the same time.
            let name = "standard output".to_string();
            let fd = io::stdout()
                .as_fd()
                .try_clone_to_owned()
                .map_err(|e| Error::io(format!("{name}: dup"), e))?;
            let file = File::from(fd);
            if let Some(meta) = file.metadata().ok().filter(|m| m.is_file()) {
                check_not_input((Path::new("/dev/stdout"), &name), Some(&meta), &opts.inputs)?;
            }
            return Ok(OutputFile::stream(file, name));
        }
        let name = out.display().to_string();
        check_not_input((out, &name), None, &opts.inputs)?;
        let link = fs::symlink_metadata(out).is_ok_and(|m| m.file_type().is_symlink());
        let resolved = match link {
            true => fs::canonicalize(out).map_err(|e| Error::io(&name, e))?,
            false => out.to_path_buf(),
        };
        let out = resolved.as_path();
        match fs::metadata(out) {
            Ok(m) if !m.is_file() => {
                return Err(Error::invalid(
                    &name,
                    "exists and is not a regular file (use -o - to write to a pipe or device)",
                ));
            }
            Ok(_) if !opts.overwrite => return Err(Error::new(&name, ErrorKind::Exists)),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&name, e)),
        }
        let file_name = out
            .file_name()
            .ok_or_else(|| Error::invalid(&name, "output path has no file name"))?;
        let dir = opts.temp_dir.as_deref().unwrap_or(parent_dir(out));
        let target = Target::Temp {
            temp: Temp::create(dir, file_name)?,
            dest: out.to_path_buf(),
            overwrite: opts.overwrite,
        };
        Ok(OutputFile::new(target, name))
    }

    fn new(target: Target, name: String) -> OutputFile {
        OutputFile {
            target,
            name,
            pos: 0,
            handed: 0,
            stats: CopyStats::default(),
            buffer: None,
        }
    }

    /// Write sequentially to an open pipe, terminal or file.
    pub(crate) fn stream(file: File, name: String) -> OutputFile {
        let stream = StreamOut {
            on_signal: None,
            file,
            started: false,
            finished: false,
        };
        OutputFile::new(Target::Stream(stream), name)
    }

    /// OUT as given, or `standard output`: the name errors use.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The directory of the temporary file (`None` for standard output).
    pub fn temp_dir(&self) -> Option<&Path> {
        match &self.target {
            Target::Temp { temp, .. } => Some(temp.dir()),
            Target::Stream(_) => None,
        }
    }

    /// The open file being written.
    pub fn file(&self) -> &File {
        match &self.target {
            Target::Temp { temp, .. } => temp.file(),
            Target::Stream(s) => &s.file,
        }
    }

    /// True when writing to standard output: sequential writes only, no
    /// positions, no clones.
    pub fn is_stream(&self) -> bool {
        matches!(self.target, Target::Stream(_))
    }

    /// Bytes written so far: the offset of the next byte.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// How the bytes were written so far.
    pub fn stats(&self) -> CopyStats {
        self.stats
    }

    /// Refuse an output that cannot fit: it will hold at least `total`
    /// bytes (its header and what a plan copies as it is), and what the
    /// file holds already took its space, so the rest must be free on its
    /// filesystem (`f_bavail * f_frsize`, what an unprivileged writer may
    /// use). The error names the directory as given. A stream is checked
    /// only when it is a regular file; a pipe or terminal takes any size.
    pub fn check_room(&self, total: u64) -> Result<()> {
        let (file, held) = match &self.target {
            Target::Temp { temp, .. } => {
                let meta = temp
                    .file()
                    .metadata()
                    .map_err(|e| Error::io(&self.name, e))?;
                (temp.file(), meta.blocks().saturating_mul(512))
            }
            Target::Stream(s) if s.file.metadata().is_ok_and(|m| m.is_file()) => {
                (&s.file, self.pos)
            }
            Target::Stream(_) => return Ok(()),
        };
        // Free space first: a copy ahead still writing only makes `held`
        // larger, so the need is never overstated.
        let vfs = nix::sys::statvfs::fstatvfs(file)
            .map_err(|e| Error::io(format!("{}: statvfs", self.name), e.into()))?;
        let free = (vfs.blocks_available() as u64).saturating_mul(vfs.fragment_size() as u64);
        let needed = total.saturating_sub(held);
        if needed <= free {
            return Ok(());
        }
        let dir = self
            .temp_dir()
            .map_or(self.name.clone(), |d| d.display().to_string());
        Err(Error::new(dir, ErrorKind::NoSpace { needed, free }))
    }

    /// Record `len` bytes written at [`OutputFile::position`] through
    /// [`OutputFile::file`] by the caller (e.g. a clone), counted as kernel
    /// bytes. Appends still buffered go to the file first.
    pub fn advance(&mut self, len: u64) -> Result<()> {
        self.flush_buffer()?;
        self.started();
        self.pos += len;
        self.stats.kernel_bytes += len;
        Ok(())
    }

    /// Record `len` bytes written at [`OutputFile::position`] by a copy on
    /// another handle of the file (the copier's copy ahead), copied as
    /// `stats` says. That copy handed each of its steps to the disk itself
    /// ([`start_writeback`]). Appends still buffered go to the file first.
    pub fn add_copied(&mut self, len: u64, stats: CopyStats) -> Result<()> {
        self.flush_buffer()?;
        self.started();
        self.pos += len;
        self.handed = self.pos;
        self.stats.kernel_bytes += stats.kernel_bytes;
        self.stats.direct_bytes += stats.direct_bytes;
        self.stats.fallback_bytes += stats.fallback_bytes;
        self.stats.fallbacks += stats.fallbacks;
        Ok(())
    }

    /// From now on, gather what [`OutputFile::write_all`] and
    /// [`OutputFile::copy_from`] append in memory and write it past the
    /// page cache a buffer (8 MiB) at a time, in whole blocks: a range is
    /// read once from the source's cached pages, and the output leaves no
    /// dirty pages behind (see [`crate::direct`]). False, and nothing
    /// changes, for standard output and where the filesystem has no direct
    /// writes; a filesystem that refuses a direct write gets the page cache
    /// from then on. Until [`OutputFile::flush`] or the commit the file
    /// lacks the bytes still buffered: a caller writing through
    /// [`OutputFile::file`] does so past [`OutputFile::position`] and
    /// reports with [`OutputFile::advance`] or [`OutputFile::add_copied`],
    /// which write them first.
    pub fn buffer_appends(&mut self) -> bool {
        if let (None, Target::Temp { temp, .. }) = (&self.buffer, &self.target) {
            self.buffer = DirectBuffer::open(temp.file());
        }
        self.buffer.is_some()
    }

    /// True while appends are buffered and written past the page cache
    /// ([`OutputFile::buffer_appends`]): a copy beside them (the copy
    /// ahead) writes that way too.
    pub fn is_buffered(&self) -> bool {
        self.buffer.as_ref().is_some_and(|b| b.direct.works())
    }

    /// Write what is buffered, so the file holds every byte before the
    /// position and [`OutputFile::stats`] tells how all of them went.
    pub fn flush(&mut self) -> Result<()> {
        self.flush_buffer().map_err(|e| e.within(&self.name))
    }

    fn flush_buffer(&mut self) -> Result<()> {
        let (Some(buffer), Target::Temp { temp, .. }) = (&mut self.buffer, &self.target) else {
            return Ok(());
        };
        let flushed = buffer.flush(temp.file());
        self.tally();
        flushed
    }

    /// Count how the buffer's copies went out.
    fn tally(&mut self) {
        if let Some(buffer) = &mut self.buffer {
            let t = std::mem::take(&mut buffer.tally);
            self.stats.direct_bytes += t.direct_bytes;
            self.stats.fallback_bytes += t.fallback_bytes;
            self.stats.fallbacks += t.fallbacks;
        }
    }

    /// Append `len` bytes (of a copy when `copy`): through the buffer when
    /// there is one, `put` as in [`DirectBuffer::append`], else by
    /// `unbuffered`; then move the position past them. Errors name no
    /// file: the caller's do.
    fn append(
        &mut self,
        (len, copy): (u64, bool),
        put: impl FnMut(&mut [u8], u64) -> Result<()>,
        unbuffered: impl FnOnce(&mut OutputFile) -> Result<()>,
    ) -> Result<()> {
        self.started();
        if let (Some(buffer), Target::Temp { temp, .. }) = (&mut self.buffer, &self.target) {
            let appended = buffer.append(temp.file(), (self.pos, len), copy, put);
            self.tally();
            appended?;
            if !self.is_buffered() {
                // Refused: what is held goes through the page cache, and so
                // does everything after it.
                self.flush_buffer()?;
                self.buffer = None;
            }
        } else {
            unbuffered(self)?;
        }
        self.pos += len;
        self.hand_to_disk();
        Ok(())
    }

    /// Start over at offset 0: the next byte written goes there. What was
    /// written before is overwritten by what follows or cut off by
    /// [`OutputFile::commit`], and its statistics are forgotten. A stream
    /// can start over only while nothing went out: bytes sent are gone.
    pub fn restart(&mut self) -> Result<()> {
        if matches!(&self.target, Target::Stream(s) if s.started) {
            return Err(Error::invalid(
                &self.name,
                "cannot start over: bytes were already written to the stream",
            ));
        }
        self.pos = 0;
        self.handed = 0;
        self.stats = CopyStats::default();
        if let Some(buffer) = &mut self.buffer {
            buffer.discard();
            buffer.tally = CopyStats::default();
        }
        Ok(())
    }

    /// Note that bytes went out: a stream failing from now on is poisoned.
    fn started(&mut self) {
        if let Target::Stream(s) = &mut self.target {
            if !s.started {
                s.on_signal = Some(cleanup::poison_on_signal(s.file.as_fd()));
            }
            s.started = true;
        }
    }

    /// Append bytes from memory.
    pub fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        let len = bytes.len() as u64;
        let put = |buf: &mut [u8], done: u64| {
            buf.copy_from_slice(&bytes[done as usize..done as usize + buf.len()]);
            Ok(())
        };
        let unbuffered = |o: &mut OutputFile| {
            match &o.target {
                Target::Temp { temp, .. } => temp.file().write_all_at(bytes, o.pos),
                Target::Stream(s) => (&s.file).write_all(bytes),
            }
            .map_err(|e| Error::io(format!("write at offset {}", o.pos), e))
        };
        self.append((len, false), put, unbuffered)
            .map_err(|e| e.within(&self.name))?;
        self.stats.written_bytes += len;
        Ok(())
    }

    /// Once a step's worth of bytes is written since the last hint, ask the
    /// kernel to start writing them to disk. A merge feeds the output a few
    /// megabytes at a time over minutes; left to itself the kernel keeps
    /// those pages dirty (up to a tenth of memory, or 30 seconds) and the
    /// commit's fsync then writes them while everything waits. Handed over as
    /// they come, they go out while the merge still runs.
    fn hand_to_disk(&mut self) {
        if let Target::Temp { temp, .. } = &self.target {
            if self.pos - self.handed >= WRITEBACK_STEP {
                start_writeback(temp.file(), self.handed, self.pos - self.handed);
                self.handed = self.pos;
            }
        }
    }

    /// Append `len` bytes of `src` from `offset`: through the buffer when
    /// appends are buffered, else in the kernel when it can. `src_name` names
    /// the source in errors.
    pub fn copy_from(&mut self, src: &File, src_name: &Path, offset: u64, len: u64) -> Result<()> {
        let put = |buf: &mut [u8], done| read_exact(src, buf, offset + done, len - done);
        let unbuffered = |o: &mut OutputFile| {
            let dst_off = (!o.is_stream()).then_some(o.pos);
            let mut stats = o.stats;
            let copied = copy_range(src, offset, len, o.file(), dst_off, &mut stats);
            o.stats = stats;
            copied
        };
        self.append((len, true), put, unbuffered).map_err(|e| {
            e.within(format!(
                "copying {} bytes {offset}..{} to {}",
                src_name.display(),
                offset + len,
                self.name
            ))
        })
    }

    /// Finish: cut off anything past the position (a copy ahead the plan did
    /// not want in full), fsync, put the file in place as OUT (refusing,
    /// without `overwrite`, an OUT that appeared meanwhile), fsync the
    /// directory. For standard output this only marks the stream complete;
    /// a stream dropped without a commit after its first byte ends with
    /// [`STREAM_POISON`].
    pub fn commit(self) -> Result<()> {
        self.finish(None)
    }

    /// [`OutputFile::commit`], but first let `check` judge the complete,
    /// fsynced file under a temporary name in its directory: OUT is
    /// written only when `check` says yes; otherwise the file is removed,
    /// an existing OUT stays as it was, and `check`'s error is returned.
    /// For standard output the check is refused (the bytes went out).
    pub fn commit_checked(self, check: &mut Check<'_>) -> Result<()> {
        self.finish(Some(check))
    }

    fn finish(mut self, check: Option<&mut Check<'_>>) -> Result<()> {
        self.flush()?;
        let name = self.name;
        let (temp, dest, overwrite) = match self.target {
            Target::Temp {
                temp,
                dest,
                overwrite,
            } => (temp, dest, overwrite),
            Target::Stream(mut s) if check.is_none() => {
                s.finished = true;
                s.on_signal = None;
                return Ok(());
            }
            Target::Stream(_) => {
                return Err(Error::invalid(
                    name,
                    "standard output cannot be checked before it is written",
                ));
            }
        };
        // Cut the file back to the position when it is longer: a copy ahead
        // that the plan did not want in full leaves bytes past it.
        let (file, len) = (temp.file(), self.pos);
        let failed = |what: &str, e| Error::io(format!("{name}: {what}"), e);
        if file.metadata().map_err(|e| failed("stat", e))?.len() > len {
            let cut = file.set_len(len);
            cut.map_err(|e| failed(&format!("truncate to {len}"), e))?;
        }
        file.sync_all().map_err(|e| failed("fsync", e))?;
        let file_name = dest.file_name().unwrap_or_default();
        let placed = match (check, overwrite) {
            // No name is needed on the way: link the file as OUT.
            (None, false) => match temp.link_as(&dest) {
                Ok(linked) => linked,
                Err(named) => named.into_named(file_name)?.persist(&dest, false),
            },
            (check, _) => {
                let named = temp.into_named(file_name)?;
                if let Some(check) = check {
                    check(named.path())?;
                }
                named.persist(&dest, overwrite)
            }
        };
        match placed {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(Error::new(name, ErrorKind::Exists));
            }
            Err(e) => return Err(Error::io(format!("{name}: putting the output in place"), e)),
        }
        let dir = parent_dir(&dest);
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(format!("{}: fsync directory", dir.display()), e))
    }
}

/// Ask the kernel to start writing a range of `file` to disk now, without
/// waiting for it. A hint only: its result changes nothing, and the commit's
/// fsync reports any real write error.
pub fn start_writeback(file: &File, offset: u64, len: u64) {
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: the descriptor stays open for the call, which reads no memory.
    let _ = unsafe {
        nix::libc::sync_file_range(
            file.as_raw_fd(),
            offset,
            len,
            nix::libc::SYNC_FILE_RANGE_WRITE,
        )
    };
}

/// Whether a file put in place as `path` would replace a name the system
/// gives a device or process: its directory is one of
/// [`holds_system_names`].
pub fn replaces_system_name(path: &Path) -> bool {
    holds_system_names(parent_dir(path))
}

/// Whether the directory `dir`, where it really is, holds the system's
/// names for devices and processes rather than files: it is in `/proc` or
/// `/sys` (`/dev/fd` is `/proc/self/fd`), or in `/dev` (`/dev/stdout`,
/// `/dev/null`) but for a tmpfs mounted there (`/dev/shm`), which holds
/// files like any other directory. A directory that does not exist holds
/// nothing.
pub fn holds_system_names(dir: &Path) -> bool {
    let Ok(dir) = fs::canonicalize(dir) else {
        return false;
    };
    if dir.starts_with("/proc") || dir.starts_with("/sys") {
        return true;
    }
    if !dir.starts_with("/dev") {
        return false;
    }
    let device = |p: &Path| fs::metadata(p).map(|m| m.dev()).ok();
    let own_tmpfs = nix::sys::statfs::statfs(&dir)
        .is_ok_and(|fs| fs.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
        && device(&dir).is_some_and(|d| Some(d) != device(Path::new("/dev")));
    !own_tmpfs
}

fn parent_dir(p: &Path) -> &Path {
    match p.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// The canonical form of a path that may not exist yet.
fn canonical(p: &Path) -> PathBuf {
    if let Ok(c) = fs::canonicalize(p) {
        return c;
    }
    match (fs::canonicalize(parent_dir(p)), p.file_name()) {
        (Ok(d), Some(n)) => d.join(n),
        _ => std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()),
    }
}

/// Refuse an output that is one of the inputs; `name` is the output's in errors.
fn check_not_input(
    (out, name): (&Path, &str),
    meta: Option<&fs::Metadata>,
    inputs: &[PathBuf],
) -> Result<()> {
    let out_meta = meta.cloned().or_else(|| fs::metadata(out).ok());
    let out_path = meta.is_none().then(|| canonical(out));
    for input in inputs {
        let same_inode = match (&out_meta, fs::metadata(input)) {
            (Some(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
            _ => false,
        };
        let same_path = out_path.as_ref().is_some_and(|o| *o == canonical(input));
        if same_inode || same_path {
            return Err(Error::new(name, ErrorKind::SameAsInput(input.clone())));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(overwrite: bool, inputs: &[&Path]) -> OutputOptions {
        OutputOptions {
            overwrite,
            inputs: inputs.iter().map(|p| p.to_path_buf()).collect(),
            temp_dir: None,
        }
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn commit_puts_the_unnamed_file_in_place_as_out() {
        let dir = tempfile::tempdir().expect("dir");
        let out = dir.path().join("out.osm.pbf");
        let mut o = OutputFile::create(&out, &opts(false, &[])).expect("create");
        // ext4, XFS, btrfs and tmpfs have unnamed files: nothing to see.
        assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
        o.write_all(b"hello ").expect("write");
        let src = dir.path().join("src");
        fs::write(&src, b"0123456789world").expect("src");
        let f = File::open(&src).expect("open");
        o.copy_from(&f, &src, 10, 5).expect("copy");
        assert_eq!(o.position(), 11);
        o.commit().expect("commit");
        assert_eq!(fs::read(&out).expect("out"), b"hello world");
        assert_eq!(entries(dir.path()), ["out.osm.pbf", "src"]);
    }

    #[test]
    fn a_link_is_written_through() {
        let dir = tempfile::tempdir().expect("dir");
        let (real, link) = (
            dir.path().join("real.osm.pbf"),
            dir.path().join("link.osm.pbf"),
        );
        fs::write(&real, b"old").expect("real");
        std::os::unix::fs::symlink("real.osm.pbf", &link).expect("link");
        let mut o = OutputFile::create(&link, &opts(true, &[])).expect("create");
        o.write_all(b"new").expect("write");
        o.commit().expect("commit");
        assert!(
            fs::symlink_metadata(&link)
                .expect("lstat")
                .file_type()
                .is_symlink()
        );
        assert_eq!(fs::read(&real).expect("real"), b"new");
        let dangling = dir.path().join("dangling.osm.pbf");
        std::os::unix::fs::symlink("gone/x.pbf", &dangling).expect("link");
        let e = OutputFile::create(&dangling, &opts(true, &[])).expect_err("dangling");
        assert!(e.to_string().contains("dangling.osm.pbf"), "{e}");
    }

    #[test]
    fn system_names_are_told_by_where_their_directory_really_is() {
        for system in [
            "/dev/null",
            "/dev/new.pbf",
            "/dev/fd/1",
            "/proc/self/fd/1",
            "/sys/x",
        ] {
            assert!(replaces_system_name(Path::new(system)), "{system}");
        }
        let dir = tempfile::tempdir().expect("dir");
        assert!(!replaces_system_name(&dir.path().join("out.osm.pbf")));
        assert!(!replaces_system_name(Path::new("out.osm.pbf")));
        // /dev/shm is a tmpfs of its own wherever it is mounted (systemd,
        // containers): a place for files, though it is spelt under /dev.
        let shm = Path::new("/dev/shm");
        let mounted = |p: &Path| fs::metadata(p).map(|m| m.dev()).ok();
        if shm.is_dir() && mounted(shm) != mounted(Path::new("/dev")) {
            assert!(!replaces_system_name(&shm.join("out.osm.pbf")));
        }
        assert!(
            !replaces_system_name(Path::new("/dev/gone/x.pbf")),
            "no such directory"
        );
        assert!(holds_system_names(Path::new("/dev")));
        assert!(!holds_system_names(dir.path()));
        let link = dir.path().join("shm");
        std::os::unix::fs::symlink("/dev", &link).expect("link");
        assert!(replaces_system_name(&link.join("null")), "a link into /dev");
    }

    #[test]
    fn a_named_temporary_file_is_marked_and_moved_onto_out() {
        let dir = tempfile::tempdir().expect("dir");
        let out = dir.path().join("out.osm.pbf");
        let temp = Temp::create(dir.path(), std::ffi::OsStr::new("out.osm.pbf")).expect("temp");
        let named = temp
            .into_named(std::ffi::OsStr::new("out.osm.pbf"))
            .expect("named");
        let tname = named
            .path()
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        assert!(
            tname.starts_with(".out.osm.pbf.pbf-sort.") && tname.ends_with(".tmp"),
            "{tname}"
        );
        assert_eq!(entries(dir.path()), [tname]);
        named.persist(&out, false).expect("persist");
        assert_eq!(entries(dir.path()), ["out.osm.pbf"]);
    }

    #[test]
    fn commit_checked_writes_out_only_when_the_check_says_yes() {
        let dir = tempfile::tempdir().expect("dir");
        let out = dir.path().join("out.osm.pbf");
        for overwrite in [false, true] {
            let mut o = OutputFile::create(&out, &opts(overwrite, &[])).expect("create");
            o.write_all(b"complete").expect("write");
            let mut seen = None;
            let mut refuse = |p: &Path| {
                seen = Some(fs::read(p).expect("the check reads the file"));
                Err(Error::invalid("check", "no"))
            };
            let err = o.commit_checked(&mut refuse).expect_err("refused");
            assert_eq!(err.to_string(), "check: no");
            assert_eq!(seen.as_deref(), Some(&b"complete"[..]));
            let left = entries(dir.path());
            assert!(left.iter().all(|e| e == "out.osm.pbf"), "{left:?}");
            let mut o = OutputFile::create(&out, &opts(overwrite, &[])).expect("create");
            o.write_all(b"checked").expect("write");
            o.commit_checked(&mut |_| Ok(())).expect("commit");
            assert_eq!(fs::read(&out).expect("out"), b"checked");
            assert_eq!(entries(dir.path()), ["out.osm.pbf"]);
            fs::remove_file(&out).expect("rm");
        }
    }

    #[test]
    fn the_temporary_file_goes_into_temp_dir() {
        let dir = tempfile::tempdir().expect("dir");
        let work = dir.path().join("work");
        fs::create_dir(&work).expect("work");
        let out = dir.path().join("out.pbf");
        let o = OutputOptions {
            temp_dir: Some(work.clone()),
            ..OutputOptions::default()
        };
        let mut f = OutputFile::create(&out, &o).expect("create");
        assert_eq!(f.temp_dir(), Some(work.as_path()));
        f.write_all(b"x").expect("write");
        f.commit().expect("commit");
        assert_eq!(fs::read(&out).expect("out"), b"x");
        assert!(entries(&work).is_empty());
    }

    #[test]
    fn drop_removes_the_temp_file() {
        let dir = tempfile::tempdir().expect("dir");
        let out = dir.path().join("out.pbf");
        let mut o = OutputFile::create(&out, &opts(false, &[])).expect("create");
        o.write_all(b"partial").expect("write");
        drop(o);
        assert!(entries(dir.path()).is_empty());
    }

    #[test]
    fn refuses_to_overwrite_without_permission() {
        let dir = tempfile::tempdir().expect("dir");
        let out = dir.path().join("out.pbf");
        fs::write(&out, b"old").expect("old");
        let err = OutputFile::create(&out, &opts(false, &[])).expect_err("exists");
        assert!(matches!(err.kind(), ErrorKind::Exists), "{err}");
        assert!(err.to_string().contains("-O/--overwrite"), "{err}");
        assert_eq!(entries(dir.path()), ["out.pbf"]);
        let mut o = OutputFile::create(&out, &opts(true, &[])).expect("overwrite");
        o.write_all(b"new").expect("write");
        assert_eq!(fs::read(&out).expect("still old"), b"old");
        o.commit().expect("commit");
        assert_eq!(fs::read(&out).expect("new"), b"new");
    }

    #[test]
    fn out_appearing_meanwhile_is_not_clobbered() {
        let dir = tempfile::tempdir().expect("dir");
        let out = dir.path().join("out.pbf");
        let mut o = OutputFile::create(&out, &opts(false, &[])).expect("create");
        o.write_all(b"ours").expect("write");
        fs::write(&out, b"theirs").expect("race");
        let err = o.commit().expect_err("exists");
        assert!(matches!(err.kind(), ErrorKind::Exists), "{err}");
        assert_eq!(fs::read(&out).expect("theirs"), b"theirs");
        assert_eq!(entries(dir.path()), ["out.pbf"]);
    }

    #[test]
    fn refuses_an_input_as_output() {
        let dir = tempfile::tempdir().expect("dir");
        let input = dir.path().join("in.pbf");
        fs::write(&input, b"data").expect("in");
        let link = dir.path().join("hard.pbf");
        fs::hard_link(&input, &link).expect("link");
        for out in [&input, &link] {
            let err = OutputFile::create(out, &opts(true, &[&input])).expect_err("same");
            assert!(matches!(err.kind(), ErrorKind::SameAsInput(_)), "{err}");
        }
        let dotted = dir.path().join(".").join("in.pbf");
        let err = OutputFile::create(&dotted, &opts(true, &[&input])).expect_err("same path");
        assert!(matches!(err.kind(), ErrorKind::SameAsInput(_)), "{err}");
        let missing = dir.path().join("spool.pbf");
        let err = OutputFile::create(&missing, &opts(false, &[&missing])).expect_err("spool");
        assert!(matches!(err.kind(), ErrorKind::SameAsInput(_)), "{err}");
        assert_eq!(fs::read(&input).expect("input"), b"data");
        assert_eq!(entries(dir.path()), ["hard.pbf", "in.pbf"]);
    }

    #[test]
    fn restart_overwrites_and_the_commit_cuts_the_rest() {
        let dir = tempfile::tempdir().expect("dir");
        let out = dir.path().join("out.pbf");
        let mut o = OutputFile::create(&out, &opts(false, &[])).expect("create");
        o.write_all(b"old header and data").expect("write");
        o.restart().expect("restart");
        assert_eq!((o.position(), o.stats().written_bytes), (0, 0));
        o.write_all(b"new").expect("write");
        o.commit().expect("commit");
        assert_eq!(fs::read(&out).expect("out"), b"new");
        let (_r, w) = nix::unistd::pipe().expect("pipe");
        let mut s = OutputFile::stream(File::from(w), "pipe".into());
        s.restart().expect("nothing sent yet");
        s.write_all(b"x").expect("write");
        let err = s.restart().expect_err("sent");
        assert!(err.to_string().contains("cannot start over"), "{err}");
        s.commit().expect("commit");
    }

    #[test]
    fn a_failed_stream_is_poisoned_and_a_finished_one_is_not() {
        for commit in [false, true] {
            let (r, w) = nix::unistd::pipe().expect("pipe");
            let mut o = OutputFile::stream(File::from(w), "pipe".into());
            o.write_all(b"frame").expect("write");
            if commit {
                o.commit().expect("commit");
            } else {
                drop(o);
            }
            let mut got = Vec::new();
            std::io::Read::read_to_end(&mut File::from(r), &mut got).expect("read");
            let want: &[u8] = if commit {
                b"frame"
            } else {
                b"frame\xff\xff\xff\xff"
            };
            assert_eq!(got, want);
        }
    }

    #[test]
    fn check_room_counts_what_the_file_holds_and_names_the_directory() {
        let dir = tempfile::tempdir().expect("dir");
        let out = dir.path().join("out.pbf");
        let mut o = OutputFile::create(&out, &opts(false, &[])).expect("create");
        o.check_room(0).expect("nothing needed");
        let err = o
            .check_room(u64::MAX)
            .expect_err("no filesystem is that big");
        let ErrorKind::NoSpace { needed, free } = *err.kind() else {
            panic!("{err}");
        };
        assert!(needed == u64::MAX && free < needed, "{err}");
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("{}: not enough free space", dir.path().display())),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("{needed} bytes more"))
                && msg.contains(&format!("{free} bytes free")),
            "{msg}"
        );
        o.write_all(&vec![7; 1 << 16]).expect("write");
        o.file().sync_all().expect("sync");
        let err = o.check_room(u64::MAX).expect_err("still too big");
        assert!(
            matches!(err.kind(), ErrorKind::NoSpace { needed, .. } if *needed < u64::MAX),
            "{err}"
        );
        let (_r, w) = nix::unistd::pipe().expect("pipe");
        let s = OutputFile::stream(File::from(w), "pipe".into());
        s.check_room(u64::MAX).expect("a pipe takes any size");
    }

    #[test]
    fn refuses_a_directory_and_a_missing_directory() {
        let dir = tempfile::tempdir().expect("dir");
        let err = OutputFile::create(dir.path(), &opts(true, &[])).expect_err("dir");
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let out = dir.path().join("no/such/dir/out.pbf");
        let err = OutputFile::create(&out, &opts(false, &[])).expect_err("missing dir");
        assert!(
            err.to_string().contains("cannot create a temporary file"),
            "{err}"
        );
    }

    /// Run the same appends on a buffered and an unbuffered output: ranges of
    /// a source of every length (within a block, across blocks and across
    /// buffers), bytes from memory, bytes another handle writes past the
    /// position (`advance`), and a restart.
    fn appends(dir: &Path, src: &Path, buffered: bool) -> (Vec<u8>, CopyStats) {
        let out = dir.join(if buffered { "buffered" } else { "kernel" });
        let mut o = OutputFile::create(&out, &opts(false, &[])).expect("create");
        if buffered && !o.buffer_appends() {
            eprintln!("SKIPPED: no O_DIRECT on {}: buffered as not", dir.display());
        }
        let f = File::open(src).expect("open");
        let size = f.metadata().expect("stat").len();
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for round in 0..60 {
            let len = match round % 4 {
                0 => next(4096),
                1 => next(200_000),
                2 => next(3 << 20),
                _ => next(9 << 20),
            };
            let offset = next(size - len);
            o.copy_from(&f, src, offset, len).expect("copy");
            o.write_all(&round.to_string().into_bytes()).expect("write");
            if round == 20 {
                o.restart().expect("restart");
            }
            if round % 17 == 5 {
                let at = o.position();
                o.file().write_all_at(b"cloned", at).expect("clone");
                o.advance(6).expect("advance");
            }
        }
        o.flush().expect("flush");
        let stats = o.stats();
        o.commit().expect("commit");
        (fs::read(&out).expect("out"), stats)
    }

    #[test]
    fn buffered_appends_make_the_bytes_of_appends_through_the_kernel() {
        let dir = tempfile::tempdir().expect("dir");
        let src = dir.path().join("src");
        let bytes: Vec<u8> = (0..20u32 << 20).map(|i| (i * 7 + i / 4099) as u8).collect();
        fs::write(&src, &bytes).expect("src");
        let (kernel, kernel_stats) = appends(dir.path(), &src, false);
        let (buffered, buffered_stats) = appends(dir.path(), &src, true);
        assert!(
            kernel == buffered,
            "{} and {} bytes",
            kernel.len(),
            buffered.len()
        );
        assert_eq!(kernel_stats.direct_bytes, 0);
        assert_eq!(kernel_stats.copied(), buffered_stats.copied());
        if buffered_stats.direct_bytes > 0 {
            assert_eq!(buffered_stats.kernel_bytes, 6 * 3, "{buffered_stats:?}");
        }
    }

    #[test]
    fn a_buffered_copy_from_a_short_source_names_it_and_the_range() {
        let dir = tempfile::tempdir().expect("dir");
        let src = dir.path().join("src");
        fs::write(&src, b"0123456789").expect("src");
        let f = File::open(&src).expect("open");
        let mut o = OutputFile::create(&dir.path().join("out"), &opts(false, &[])).expect("out");
        if !o.buffer_appends() {
            eprintln!("SKIPPED: no O_DIRECT on {}", dir.path().display());
            return;
        }
        o.write_all(b"abc").expect("write");
        let err = o.copy_from(&f, &src, 4, 10).expect_err("short").to_string();
        assert!(err.contains("bytes 4..14") && err.contains("src"), "{err}");
        assert!(err.contains("offset 10"), "{err}");
        // The buffer holds nothing of the failed copy: an output that goes on
        // stays whole.
        o.write_all(b"def").expect("write");
        o.commit().expect("commit");
        assert_eq!(fs::read(dir.path().join("out")).expect("out"), b"abcdef");
    }
}
