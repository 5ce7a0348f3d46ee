//! The files a plan reads from, as a copier reads them: the plan's
//! [`SourceFiles`] (every ordinary source checked against the size, mtime
//! and ctime the plan recorded before anything is written, a spool checked
//! against its size as each range is read), checked again once everything
//! was read, before the output is put in place
//! ([`CopySources::check_unchanged`]: a file rewritten in place while it was
//! read gave bytes part old, part new), and the spools' removal, and the
//! freeing of their bytes as the copy passes them
//! ([`CopySources::passed`], see [`SpoolHoles`]).
//!
//! A spool is useless once its plan has been executed, or has failed: opened
//! to remove spools ([`CopySources::open`]), a spool that proves to be one when it is first
//! opened (a regular file that starts with an OSMData frame) is removed when
//! the `CopySources` is dropped, on a signal ([`pbf_output::cleanup`]) and, after a
//! commit, by [`CopySources::finish_spools`], which removes only spools whose
//! every byte went to the output and keeps (and names) any other.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use pbf_format::frame::BlobType;
use pbf_stream::{PlanHeader, SourceFiles};

use crate::frames;
use pbf_output::cleanup::{Registration, remove_on_signal};
use pbf_output::{Error, ErrorKind, Punched, Result, punch_hole};

/// A spool of the plan, and what the copier did with it.
#[derive(Debug, Default)]
struct Spool {
    id: u32,
    path: PathBuf,
    /// Ranges read, for [`CopySources::finish_spools`].
    used: Vec<(u64, u64)>,
    /// Removes the spool on a signal, once it proved to be one.
    on_signal: Option<Registration>,
    /// Its handle for punching out what was copied ([`SpoolHoles::punch`]).
    writer: Option<Option<File>>,
}

/// The plan's source files and its spools' removal.
#[derive(Debug)]
pub struct CopySources {
    files: SourceFiles,
    spools: Vec<Spool>,
    remove_spools: bool,
    /// What freeing the spools' copied ranges did ([`CopySources::passed`]).
    pub holes: SpoolHoles,
    /// [`CopySources::finish_spools`] ran: the drop leaves spools alone.
    finished: bool,
}

/// A plan source's error, named by the source.
fn stream_error(e: pbf_stream::Error) -> Error {
    Error::new("", ErrorKind::Stream(e))
}

impl CopySources {
    /// Check and open every non-spool source of `plan` (spools are opened
    /// when first used). With `remove_spools`, the spools are removed once
    /// they are no longer needed: on a signal or a failure (when this is
    /// dropped), and after a commit through [`CopySources::finish_spools`].
    pub fn open(plan: &PlanHeader, remove_spools: bool) -> Result<CopySources> {
        let files = SourceFiles::open(&plan.sources).map_err(stream_error)?;
        let spools = plan.sources.iter().filter(|s| s.spool);
        let spools = spools.map(|s| Spool {
            id: s.id,
            path: s.file.path.clone(),
            ..Spool::default()
        });
        Ok(CopySources {
            spools: spools.collect(),
            files,
            remove_spools,
            holes: SpoolHoles::default(),
            finished: false,
        })
    }

    /// After the output was committed: remove each spool whose bytes all went
    /// to the output, exactly once; returns the others with the reason each
    /// is kept. A spool that was never used and does not exist (pbf-merge
    /// removes a spool nothing was merged into) is not mentioned.
    pub fn finish_spools(&mut self) -> Vec<(PathBuf, String)> {
        let mut kept = Vec::new();
        self.finished = true;
        for src in &mut self.spools {
            src.on_signal = None;
            let unused_and_gone =
                src.used.is_empty() && std::fs::symlink_metadata(&src.path).is_err();
            if !self.remove_spools || unused_and_gone {
                continue;
            }
            let removed = provably_copied_spool(&src.path, &src.used)
                .and_then(|()| std::fs::remove_file(&src.path).map_err(|e| e.to_string()));
            if let Err(why) = removed {
                kept.push((src.path.clone(), why));
            }
        }
        kept
    }

    /// Check that no ordinary source changed since it was opened and
    /// checked: its size, mtime and ctime must still be the plan's. Called
    /// once every byte was read, before the output is put in place.
    pub fn check_unchanged(&self) -> Result<()> {
        self.files.check_unchanged().map_err(stream_error)
    }

    /// Every source path (for refusing an output that is one of them).
    pub fn paths(&self) -> Vec<PathBuf> {
        let paths = self.files.iter().map(|s| s.recorded.file.path.clone());
        paths.collect()
    }

    /// The spool sources.
    pub fn spools(&self) -> impl Iterator<Item = &Path> {
        self.spools.iter().map(|s| s.path.as_path())
    }

    /// True when source `id` is a spool (false for an unknown id, which
    /// [`CopySources::range`] refuses).
    pub fn is_spool(&self, id: u32) -> bool {
        self.spools.iter().any(|s| s.id == id)
    }

    /// The open non-spool sources with their ids (spools are not open yet).
    pub fn files(&self) -> impl Iterator<Item = (u32, &File, &Path)> {
        let ordinary = self.files.iter().filter(|s| !s.recorded.spool);
        ordinary.filter_map(|s| {
            let file = s.opened()?.file();
            Some((s.recorded.id, file, s.recorded.file.path.as_path()))
        })
    }

    /// The sum of the sizes of the non-spool sources (a progress estimate).
    pub fn known_bytes(&self) -> u64 {
        self.files()
            .filter_map(|(_, f, _)| f.metadata().ok())
            .map(|m| m.len())
            .sum()
    }

    /// The open file and path of source `id`, for reading `offset..offset+len`.
    /// A spool is opened now if needed and must already hold the range.
    pub fn range(&mut self, id: u32, offset: u64, len: u64) -> Result<(&File, &Path)> {
        if let Some(spool) = self.spools.iter_mut().find(|s| s.id == id) {
            let first = spool.used.is_empty();
            spool.used.push((offset, offset.saturating_add(len)));
            if first && self.remove_spools && starts_with_data_frame(&spool.path) {
                spool.on_signal = remove_on_signal(&spool.path).ok();
            }
        }
        let source = self.files.range(id, offset, len).map_err(stream_error)?;
        let file = source.file().map_err(stream_error)?.file();
        Ok((file, source.recorded.file.path.as_path()))
    }

    /// The `len` bytes at `offset` of source `id` are in the output: free
    /// their blocks when it is a spool to remove ([`SpoolHoles`]).
    pub fn passed(&mut self, id: u32, offset: u64, len: u64) -> anyhow::Result<()> {
        let (Some(spool), Some(read)) = (
            (self.spools.iter_mut()).find(|s| s.id == id && self.remove_spools),
            self.files.source(id).ok().and_then(|s| s.opened()),
        ) else {
            return Ok(());
        };
        let read = (spool.path.as_path(), read.file());
        self.holes.punch(&mut spool.writer, read, offset, len)
    }
}

impl Drop for CopySources {
    /// A failure or an early return (before [`CopySources::finish_spools`]):
    /// remove the spools, each only if it is one.
    fn drop(&mut self) {
        if !self.remove_spools || self.finished {
            return;
        }
        for src in &mut self.spools {
            if starts_with_data_frame(&src.path) {
                let _ = std::fs::remove_file(&src.path);
            }
            src.on_signal = None;
        }
    }
}

/// A regular file (not a symlink) whose first frame is an OSMData frame, as
/// every spool of pbf-merge is and no PBF file (OSMHeader first) or text is.
fn starts_with_data_frame(path: &Path) -> bool {
    let regular = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file());
    regular
        && pbf_format::frame::PbfFile::open(path)
            .and_then(|f| f.frame_header_at(0))
            .is_ok_and(|h| h.blob_type == BlobType::OsmData)
}

fn provably_copied_spool(path: &Path, used: &[(u64, u64)]) -> std::result::Result<(), String> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let not_pbf = |e: pbf_format::Error| format!("it does not start with a PBF frame: {e}");
    let spool = pbf_format::frame::PbfFile::open(path).map_err(not_pbf)?;
    let first = spool.frame_header_at(0).map_err(not_pbf)?;
    if first.blob_type != BlobType::OsmData {
        return Err(format!(
            "it starts with a {} frame, a spool holds OSMData frames only",
            first.blob_type.as_str()
        ));
    }
    let mut ranges = used.to_vec();
    ranges.sort_unstable();
    let mut at = 0;
    for (start, end) in ranges {
        // pbf-merge --align leaves padding frames between runs, never copied.
        if start < at || !only_padding(&spool, at, start) {
            return Err(format!(
                "the plan did not copy it exactly once (gap or overlap at byte {at})"
            ));
        }
        at = end;
    }
    if at != meta.len() && !only_padding(&spool, at, meta.len()) {
        return Err(format!("the plan copied {at} of its {} bytes", meta.len()));
    }
    Ok(())
}

/// True when `start..end` of `spool` is whole padding frames (or empty).
fn only_padding(spool: &pbf_format::frame::PbfFile, start: u64, end: u64) -> bool {
    let mut at = start;
    while at < end {
        let Ok(fh) = spool.frame_header_at(at) else {
            return false;
        };
        let raw = spool
            .read_body(&fh)
            .and_then(|body| pbf_format::compress::decode_blob(&body));
        let padding = raw.is_ok_and(|r| pbf_format::padding::is_padding_block(&r));
        if fh.blob_type != BlobType::OsmData || fh.end() > end || !padding {
            return false;
        }
        at = fh.end();
    }
    true
}

/// Bytes at the start of a spool that are never punched: they hold its
/// first frame header (a BlobHeader is at most 64 KiB).
const KEEP_HEAD: u64 = 64 << 10;

/// Freeing a spool's bytes as the copy passes them
/// ([`CopySources::passed`]). A spool (pbf-merge's
/// merged blobs) is read once, op by op, and removed after the commit; until
/// then, the bytes already copied into the output took their room twice. So
/// once an op's range of a spool is in the output (copied or cloned), its
/// whole blocks are punched out of the spool (`fallocate` punch-hole, size
/// kept). Nothing reads them again: a copier reads each spool byte once (a
/// plan that copies a byte twice is refused), the copy ahead and a restart
/// of the output read only ordinary sources, and the removal after the
/// commit reads only the first frame header and the padding frames no op
/// copies.
///
/// Not with `--keep-spools` (a kept spool is replayed), not in a file that
/// is a spool by the plan's word only (it must be a regular file starting
/// with an OSMData frame, as the removal demands), and never the first
/// `KEEP_HEAD` bytes, whose frame header is how a spool is recognised for
/// removal. A filesystem that cannot punch holes is counted for `-v`, not
/// an error.
///
/// What freeing the spools' copied ranges did.
#[derive(Clone, Copy, Debug, Default)]
pub struct SpoolHoles {
    /// Bytes punched out of spools.
    pub freed: u64,
    /// Ranges not punched because the filesystem cannot (or the spool could
    /// not be opened for writing).
    pub unsupported: u64,
}

impl SpoolHoles {
    /// Free the `len` bytes at `offset` of the spool at `path`, read
    /// through `read`, which are in the output. `writer` is the spool's
    /// handle for punching: `None` until first used, then `Some(None)`
    /// where the spool is not to be punched.
    pub(crate) fn punch(
        &mut self,
        writer: &mut Option<Option<File>>,
        (path, read): (&Path, &File),
        offset: u64,
        len: u64,
    ) -> anyhow::Result<()> {
        let Some(w) = writer.get_or_insert_with(|| open_writer(path, read)) else {
            self.unsupported += 1;
            return Ok(());
        };
        let start = offset.max(KEEP_HEAD);
        let end = offset + len;
        if end <= start {
            return Ok(());
        }
        match punch_hole(w, start, end - start)
            .with_context(|| format!("{}: freeing copied bytes", path.display()))?
        {
            Punched::Freed(n) => self.freed += n,
            Punched::Unsupported => self.unsupported += 1,
        }
        Ok(())
    }

    /// The `-v` words: bytes freed, and ranges the filesystem kept.
    pub fn verbose_words(&self) -> String {
        match self.unsupported {
            0 => format!("{} spool bytes freed", self.freed),
            n => format!(
                "{} spool bytes freed ({n} ranges not: no hole punching there)",
                self.freed
            ),
        }
    }
}

/// A write handle on the spool at `path` that `read` reads, when it is one
/// to punch: the same file (device and inode), regular, starting with an
/// OSMData frame.
fn open_writer(path: &Path, read: &File) -> Option<File> {
    let w = OpenOptions::new().write(true).open(path).ok()?;
    let (a, b) = (w.metadata().ok()?, read.metadata().ok()?);
    let same = a.dev() == b.dev() && a.ino() == b.ino() && a.is_file();
    let first = frames::first_frame(read, path)?;
    (same && first.blob_type == BlobType::OsmData).then_some(w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pbf_format::header::Header;
    use pbf_stream::SourceRef;

    fn plan(sources: Vec<SourceRef>) -> PlanHeader {
        PlanHeader {
            schema: pbf_stream::PLAN_SCHEMA.into(),
            version: pbf_stream::SCHEMA_VERSION,
            sources,
            header: Header::default(),
            early: false,
            copy_bytes: None,
        }
    }

    fn source_ref(id: u32, path: &Path, spool: bool) -> SourceRef {
        let meta = std::fs::metadata(path).expect("meta");
        SourceRef {
            id,
            file: pbf_stream::FileIdentity::of(path, &meta, None),
            spool,
        }
    }

    #[test]
    fn changed_source_is_refused_and_spools_are_checked_per_range() {
        let dir = tempfile::tempdir().expect("dir");
        let a = dir.path().join("a.pbf");
        let spool = dir.path().join("spool.pbf");
        std::fs::write(&a, b"0123456789").expect("a");
        std::fs::write(&spool, b"abc").expect("spool");
        let p = plan(vec![source_ref(0, &a, false), source_ref(1, &spool, true)]);
        let mut s = CopySources::open(&p, false).expect("open");
        assert!(s.range(0, 0, 10).is_ok());
        let err = s.range(1, 0, 10).expect_err("spool too short");
        assert!(err.to_string().contains("spool holds 3 bytes"), "{err}");
        std::fs::write(&spool, b"abcdefghijkl").expect("spool grows");
        assert!(s.range(1, 0, 10).is_ok());
        assert_eq!(s.spools().collect::<Vec<_>>(), [spool.as_path()]);
        s.check_unchanged().expect("nothing changed; a spool grows");
        std::fs::write(&a, b"01234567890").expect("a changes");
        let err = s.check_unchanged().expect_err("changed while open");
        assert!(
            err.to_string()
                .contains("changed during the run (size 10 -> 11"),
            "{err}"
        );
        // Named once, by the name the stream gives it.
        let name = a.display().to_string();
        let said = err.to_string();
        assert!(said.starts_with(&format!("{name}: ")), "{said}");
        assert_eq!(said.matches(&name).count(), 1, "{said}");
        let err = CopySources::open(&p, false).expect_err("changed");
        assert!(
            err.to_string().contains("changed since it was indexed"),
            "{err}"
        );
    }

    /// A directory, the path of a spool in it (not written yet), and one
    /// OSMData frame to write there.
    fn spool_and_frame() -> (tempfile::TempDir, std::path::PathBuf, Vec<u8>) {
        let dir = tempfile::tempdir().expect("dir");
        let spool = dir.path().join("spool.pbf");
        let data = pbf_format::frame::encode_frame(
            &pbf_format::frame::BlobType::OsmData,
            None,
            b"not decoded",
        )
        .expect("frame");
        (dir, spool, data)
    }

    #[test]
    fn an_aligned_spool_is_removed_when_every_data_frame_was_copied() {
        let (_dir, spool, data) = spool_and_frame();
        let pad = pbf_format::padding::padding(4096 - data.len() as u64).expect("padding");
        let bytes = [data.as_slice(), &pad, &data].concat();
        let n = data.len() as u64;
        std::fs::write(&spool, &bytes).expect("spool");
        let p = plan(vec![source_ref(0, &spool, true)]);
        let mut s = CopySources::open(&p, true).expect("open");
        s.range(0, 0, n).expect("first frame");
        s.range(0, 4096, n).expect("second frame");
        assert!(s.finish_spools().is_empty());
        assert!(!spool.exists(), "copied spool removed");

        std::fs::write(&spool, &bytes).expect("spool");
        let mut s = CopySources::open(&p, true).expect("open");
        s.range(0, 4096, n).expect("second frame only");
        let kept = s.finish_spools();
        assert!(kept[0].1.contains("gap"), "{kept:?}");
        drop(s);
        assert!(
            spool.exists(),
            "a spool not copied whole is kept after a commit"
        );

        // A data frame where padding would be is a gap.
        std::fs::write(&spool, [data.as_slice(), &data, &data].concat()).expect("spool");
        let mut s = CopySources::open(&p, true).expect("open");
        s.range(0, 0, n).expect("first");
        s.range(0, 2 * n, n).expect("third");
        assert_eq!(s.finish_spools().len(), 1);
    }

    #[test]
    fn a_failure_removes_spools_but_never_a_file_that_is_not_one() {
        let (_dir, spool, data) = spool_and_frame();
        std::fs::write(&spool, &data).expect("spool");
        let p = plan(vec![source_ref(0, &spool, true)]);
        let mut s = CopySources::open(&p, true).expect("open");
        s.range(0, 0, 4).expect("a range");
        drop(s);
        assert!(!spool.exists(), "spool removed when the copy fails");

        std::fs::write(&spool, &data).expect("spool");
        let mut s = CopySources::open(&p, false).expect("open");
        s.range(0, 0, 4).expect("a range");
        drop(s);
        assert!(spool.exists(), "spools are kept unless removed");

        std::fs::write(&spool, b"root:x:0:0:root:/root:/bin/bash\n").expect("not a spool");
        let mut s = CopySources::open(&p, true).expect("open");
        s.range(0, 0, 4).expect("a range");
        drop(s);
        assert!(
            spool.exists(),
            "a file that is not a spool is never removed"
        );

        std::fs::remove_file(&spool).expect("rm");
        let mut s = CopySources::open(&p, true).expect("open");
        assert!(
            s.finish_spools().is_empty(),
            "an unused spool that is gone is not news"
        );
    }

    /// Freeing spools' copied bytes ([`SpoolHoles`]).
    mod holes {
        use super::*;
        use pbf_stream::{PlanHeader, SourceRef};
        use std::path::PathBuf;

        /// The sources of a plan of `path` (`remove`: spools are removed, and
        /// punched as copied), with the range `0..len` read and copied.
        fn passed(path: &Path, spool: bool, remove: bool, len: u64) -> CopySources {
            let mut sources = CopySources::open(&plan(path, spool), remove).expect("open");
            sources.range(0, 0, len).expect("range");
            sources.passed(0, 0, len).expect("punch");
            sources
        }

        /// A plan header naming `path` as source 0, a spool or not.
        fn plan(path: &std::path::Path, spool: bool) -> PlanHeader {
            let meta = std::fs::metadata(path).expect("meta");
            PlanHeader {
                schema: pbf_stream::PLAN_SCHEMA.into(),
                version: pbf_stream::SCHEMA_VERSION,
                sources: vec![SourceRef {
                    id: 0,
                    file: pbf_stream::FileIdentity::of(path, &meta, None),
                    spool,
                }],
                header: Default::default(),
                early: false,
                copy_bytes: None,
            }
        }

        /// A file of OSMData frames, half a MiB (`osmheader`: an OSMHeader first).
        fn spool_file(dir: &std::path::Path, osmheader: bool) -> (PathBuf, Vec<u8>) {
            let path = dir.join("spool.pbf");
            let mut bytes = Vec::new();
            if osmheader {
                bytes.extend(frames::header_frame(&Default::default()).expect("header"));
            }
            while bytes.len() < 512 << 10 {
                let frame = pbf_format::frame::encode_frame(&BlobType::OsmData, None, &[7u8; 4096]);
                bytes.extend(frame.expect("frame"));
            }
            std::fs::write(&path, &bytes).expect("write");
            (path, bytes)
        }

        #[test]
        fn a_copied_range_of_a_spool_is_freed_past_its_head() {
            let dir = tempfile::tempdir().expect("dir");
            let (path, bytes) = spool_file(dir.path(), false);
            let sources = passed(&path, true, true, bytes.len() as u64);
            let holes = sources.holes;
            let after = std::fs::read(&path).expect("read");
            assert_eq!(after.len(), bytes.len());
            let head = KEEP_HEAD as usize;
            assert_eq!(after[..head], bytes[..head]);
            if holes.unsupported == 0 {
                assert!(
                    holes.freed >= (bytes.len() - head - 8192) as u64,
                    "{holes:?}"
                );
                let block = std::fs::metadata(&path).expect("stat").blksize() as usize;
                let end = bytes.len() / block * block;
                assert!(after[head..end].iter().all(|&b| b == 0));
            }
            assert!(holes.verbose_words().contains("spool bytes freed"));
        }

        #[test]
        fn kept_spools_and_files_that_are_no_spool_are_left_whole() {
            let dir = tempfile::tempdir().expect("dir");
            for (remove, spool, osmheader) in [
                (false, true, false),
                (true, false, false),
                (true, true, true),
            ] {
                let (path, bytes) = spool_file(dir.path(), osmheader);
                let len = bytes.len() as u64;
                assert_eq!(passed(&path, spool, remove, len).holes.freed, 0);
                assert_eq!(std::fs::read(&path).expect("read"), bytes);
            }
        }
    }
}
