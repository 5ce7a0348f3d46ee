//! Source identity: a stream names files by path, size, mtime and ctime, and
//! every consumer re-checks them, so a file that changed since it was
//! indexed is refused instead of being copied at stale offsets: when a
//! stage opens it ([`check_source`]), and once more when a copier has read
//! everything and is about to put its output in place ([`check_unchanged`]),
//! which catches a file rewritten in place while the stages read it.
//! [`SourceFiles`] holds a plan's sources open on those checks, in the one
//! shape pbf-merge and the copiers share.
//!
//! The ctime is what makes the check worth having: a rewrite that keeps the
//! size (`dd conv=notrunc`) and puts the mtime back (`touch -d`) still moves
//! the ctime, which no user can set. A change of content with no change of
//! size, mtime or ctime is not seen; the kernel moves the ctime on every
//! write. Streams without a ctime (older or hand-written ones) are checked
//! by size and mtime alone.

use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use pbf_format::frame::PbfFile;

use crate::error::Error;

use crate::records::{FileIdentity, SourceRef};

/// Modification and status change time of a file as the streams record
/// them: seconds since the epoch and nanoseconds past them (each exact in a
/// JSON reader's double).
fn times(meta: &Metadata) -> [(i64, u32); 2] {
    let nsec = |n: i64| u32::try_from(n).unwrap_or(0);
    [
        (meta.mtime(), nsec(meta.mtime_nsec())),
        (meta.ctime(), nsec(meta.ctime_nsec())),
    ]
}

impl FileIdentity {
    /// The identity of the file at `path` as `meta` describes it now, named
    /// `given` on the command line (if that is not `path`).
    pub fn of(path: &Path, meta: &Metadata, given: Option<&Path>) -> FileIdentity {
        let [(mtime, mtime_nsec), (ctime, ctime_nsec)] = times(meta);
        FileIdentity {
            path: path.to_path_buf(),
            size: meta.len(),
            mtime,
            mtime_nsec,
            ctime: Some(ctime),
            ctime_nsec: Some(ctime_nsec),
            given: given.map(Path::to_path_buf),
        }
    }

    /// A file whose size and times are not recorded (zero, no ctime): a
    /// spool that grows while the plan streams, whose ranges are checked
    /// against its size as they are read instead.
    pub fn unrecorded(path: &Path) -> FileIdentity {
        FileIdentity {
            path: path.to_path_buf(),
            ..FileIdentity::default()
        }
    }

    /// The file as messages name it: as given to pbf-index when the stream
    /// says, else by its path.
    pub fn name(&self) -> String {
        match &self.given {
            Some(g) if g.as_os_str() == "-" => "standard input".into(),
            Some(g) => g.display().to_string(),
            None => self.path.display().to_string(),
        }
    }
}

impl SourceRef {
    /// The file as messages name it ([`FileIdentity::name`]).
    pub fn name(&self) -> String {
        self.file.name()
    }
}

/// Open a source and check that its size, mtime and ctime (when recorded)
/// are those in the stream.
pub fn check_source(src: &FileIdentity) -> Result<File, Error> {
    let path = &src.path;
    let changed = |why: String| Error::invalid(format!("{}: {why}", src.name()));
    // Refuse a FIFO or device before opening it: opening a FIFO blocks until
    // a writer appears, so a plan naming one would hang the stage.
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(changed("not a regular file".into()));
    }
    let file = File::open(path).map_err(|e| changed(format!("cannot open: {e}")))?;
    let differs = differences(src, &file.metadata()?);
    if !differs.is_empty() {
        return Err(changed(format!(
            "changed since it was indexed ({}); re-run pbf-index",
            differs.join(", ")
        )));
    }
    Ok(file)
}

/// Check that `file`, the open source `src`, still has the size, mtime and
/// ctime the stream recorded: after every byte was read from it, before an
/// output made of those bytes is put in place.
pub fn check_unchanged(src: &FileIdentity, file: &File) -> Result<(), Error> {
    let differs = differences(src, &file.metadata()?);
    if differs.is_empty() {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "{}: changed during the run ({}): what was read of it may be part old, part new",
        src.name(),
        differs.join(", ")
    )))
}

/// The files a plan reads from, by id: the one shape in which pbf-merge
/// and the copiers hold them. Each ordinary source is opened and checked
/// against the plan's record ([`check_source`]) when this is opened; a
/// spool, which `pbf-merge` writes while the plan streams, is opened when
/// first read ([`SourceFile::file`]), and a range read from it is checked
/// against its size at that moment ([`SourceFiles::range`]).
#[derive(Debug)]
pub struct SourceFiles {
    list: Vec<SourceFile>,
}

/// One source of a plan: its record and, once open, its file.
#[derive(Debug)]
pub struct SourceFile {
    /// The plan's record of it: what it must still be at the end.
    pub recorded: SourceRef,
    /// Named in messages as given to pbf-index ([`SourceRef::name`]).
    file: OnceLock<Arc<PbfFile>>,
}

impl SourceFiles {
    /// Open and check every ordinary source of a plan.
    pub fn open(sources: &[SourceRef]) -> Result<SourceFiles, Error> {
        let mut list = Vec::with_capacity(sources.len());
        for s in sources {
            let source = SourceFile {
                recorded: s.clone(),
                file: OnceLock::new(),
            };
            if !s.spool {
                let file = check_source(&s.file)?;
                let file = PbfFile::from_file(file, &s.file.path).map_err(format_error)?;
                let _ = source.file.set(Arc::new(file.named(s.name())));
            }
            list.push(source);
        }
        Ok(SourceFiles { list })
    }

    /// Every source, in the plan's order.
    pub fn iter(&self) -> impl Iterator<Item = &SourceFile> {
        self.list.iter()
    }

    /// Source `id`, refused when the plan names no such source.
    pub fn source(&self, id: u32) -> Result<&SourceFile, Error> {
        let found = self.list.iter().find(|s| s.recorded.id == id);
        found.ok_or_else(|| Error::invalid(format!("plan: op names unknown source {id}")))
    }

    /// The file of source `id` for reading `offset..offset + len`: a spool
    /// must hold the range now.
    pub fn range(&self, id: u32, offset: u64, len: u64) -> Result<&SourceFile, Error> {
        let source = self.source(id)?;
        if source.recorded.spool {
            let name = source.recorded.file.path.display();
            let size = source.file()?.file().metadata().map_err(Error::from)?.len();
            let end = offset.saturating_add(len);
            if end > size {
                return Err(Error::invalid(format!(
                    "{name}: spool holds {size} bytes, the plan copies {offset}..{end} \
                     (pbf-merge died or the spool was truncated?)"
                )));
            }
        }
        Ok(source)
    }

    /// Check that no ordinary source changed since it was opened: its
    /// size, mtime and ctime must still be the plan's ([`check_unchanged`]).
    pub fn check_unchanged(&self) -> Result<(), Error> {
        for s in self.list.iter().filter(|s| !s.recorded.spool) {
            if let Some(file) = s.opened() {
                check_unchanged(&s.recorded.file, file.file())?;
            }
        }
        Ok(())
    }
}

impl SourceFile {
    /// The file, opened now if it is a spool not read before (a FIFO would
    /// block the open: a spool must be a regular file).
    pub fn file(&self) -> Result<&Arc<PbfFile>, Error> {
        if let Some(file) = self.file.get() {
            return Ok(file);
        }
        let s = &self.recorded;
        let path = &s.file.path;
        if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
            let msg = format!("{}: spool is not a regular file", path.display());
            return Err(Error::invalid(msg));
        }
        let file = File::open(path)
            .map_err(|e| Error::invalid(format!("{}: open spool: {e}", path.display())))?;
        let file = PbfFile::from_file(file, path).map_err(format_error)?;
        Ok(self.file.get_or_init(|| Arc::new(file.named(s.name()))))
    }

    /// The file, if it is open.
    pub fn opened(&self) -> Option<&Arc<PbfFile>> {
        self.file.get()
    }
}

/// A source that could not be opened as a PBF file (the error names it).
fn format_error(e: pbf_format::Error) -> Error {
    Error::invalid(e.to_string())
}

/// What differs between the recorded identity and the file's, in words
/// ("size 10 -> 11", "ctime 1.000000000 -> 2.000000000"); empty when
/// nothing does. A ctime without nanoseconds compares its seconds.
fn differences(src: &FileIdentity, meta: &Metadata) -> Vec<String> {
    let mut differs = Vec::new();
    if meta.len() != src.size {
        differs.push(format!("size {} -> {}", src.size, meta.len()));
    }
    let [mtime, ctime] = times(meta);
    let times = [
        ("mtime", Some(src.mtime), Some(src.mtime_nsec), mtime),
        ("ctime", src.ctime, src.ctime_nsec, ctime),
    ];
    for (what, sec, nsec, now) in times {
        let Some(sec) = sec else { continue };
        let was = (sec, nsec.unwrap_or(now.1));
        if was != now {
            differs.push(format!("{what} {} -> {}", time(was), time(now)));
        }
    }
    differs
}

fn time((sec, nsec): (i64, u32)) -> String {
    format!("{sec}.{nsec:09}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn recorded(path: &Path, given: Option<&str>) -> FileIdentity {
        let meta = std::fs::metadata(path).expect("meta");
        FileIdentity::of(path, &meta, given.map(Path::new))
    }

    /// Wait until the clock the filesystem stamps files with has moved.
    fn tick() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    #[test]
    fn a_rewrite_that_keeps_size_and_mtime_is_seen_by_its_ctime() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("in.osm.pbf");
        std::fs::write(&path, b"0123456789").expect("write");
        let src = recorded(&path, Some("in.osm.pbf"));
        let file = check_source(&src).expect("unchanged");
        check_unchanged(&src, &file).expect("still unchanged");
        tick();
        let mtime_before = std::fs::metadata(&path)
            .expect("meta")
            .modified()
            .expect("mtime");
        std::fs::write(&path, b"abcdefghij").expect("rewrite");
        File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(mtime_before))
            .expect("mtime set back");
        let err = check_unchanged(&src, &file).expect_err("ctime moved");
        let msg = err.to_string();
        assert!(
            msg.starts_with("in.osm.pbf: changed during the run (ctime "),
            "{msg}"
        );
        assert!(!msg.contains("size") && !msg.contains("mtime"), "{msg}");
        let err = check_source(&src).expect_err("changed since indexed");
        assert!(
            err.to_string()
                .contains("changed since it was indexed (ctime"),
            "{err}"
        );
    }

    #[test]
    fn every_difference_is_named_and_a_stream_without_ctime_checks_the_rest() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("in.osm.pbf");
        std::fs::write(&path, b"0123456789").expect("write");
        let mut src = recorded(&path, Some("-"));
        let file = File::open(&path).expect("open");
        tick();
        std::fs::write(&path, b"01234567890").expect("grow");
        let msg = check_unchanged(&src, &file)
            .expect_err("changed")
            .to_string();
        assert!(
            msg.starts_with("standard input: changed during the run (size 10 -> 11, mtime "),
            "{msg}"
        );
        assert!(msg.contains(", ctime "), "{msg}");
        src = recorded(&path, None);
        let meta = std::fs::metadata(&path).expect("meta");
        src.ctime = None;
        src.ctime_nsec = None;
        File::options()
            .write(true)
            .open(&path)
            .and_then(|f| f.set_modified(meta.modified().expect("mtime")))
            .expect("ctime moves, mtime stays");
        check_unchanged(&src, &file).expect("no ctime recorded: size and mtime agree");
        src.size = 3;
        let msg = check_unchanged(&src, &file).expect_err("size").to_string();
        assert!(
            msg.starts_with(&format!("{}: changed", path.display())),
            "{msg}"
        );
    }
}
