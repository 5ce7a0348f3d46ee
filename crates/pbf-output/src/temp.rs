//! The output's temporary file. Where the filesystem allows it (`O_TMPFILE`:
//! ext4, XFS, btrfs, tmpfs), the file has no name at all until the commit
//! links it under OUT's: nothing of it can be left behind, not even by
//! SIGKILL or a power cut. Elsewhere it is `.OUT.pbf-sort.XXXXXX.tmp` in its
//! directory ([`TEMP_MARKER`]), registered for removal on a signal
//! ([`crate::cleanup`]) and removed when dropped.
//!
//! An unnamed file is given such a name only when it needs one before OUT:
//! for a check that reads the complete file by path, and to replace an
//! existing OUT (`rename(2)` moves a name; a link cannot replace one).

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::fcntl::AtFlags;
use nix::unistd::linkat;
use tempfile::{Builder, NamedTempFile};

use crate::cleanup::{Registration, remove_on_signal};
use crate::error::{Error, Result};

/// Every named temporary output is `.` + OUT's file name + this marker + six
/// random characters + `.tmp`, e.g. `.out.osm.pbf.pbf-sort.Ab3xZ9.tmp`:
/// hidden, never ending in `.pbf`, recognisable by cleanup scripts.
pub const TEMP_MARKER: &str = ".pbf-sort.";

/// The temporary file of an output.
#[derive(Debug)]
pub(crate) enum Temp {
    /// No name yet (`O_TMPFILE` in `dir`).
    Unnamed { file: File, dir: PathBuf },
    /// A name in its directory.
    Named(Named),
}

/// A temporary file with a name: removed when dropped or on a signal.
#[derive(Debug)]
pub(crate) struct Named {
    // A NamedTempFile removes its file before it drops the open file and,
    // with it, the registration: the file is gone before the signal
    // handler forgets its path.
    temp: NamedTempFile<(File, Registration)>,
}

impl Temp {
    /// A new empty temporary file in `dir` for the output named `out_name`.
    pub(crate) fn create(dir: &Path, out_name: &OsStr) -> Result<Temp> {
        // Absolute, so a name given to it later is too (and reads well).
        let dir = &std::path::absolute(dir).map_err(|e| cannot_create(dir, e))?;
        // Read and write, mode 0666 (less the umask), unnamed or named.
        let mut rw = OpenOptions::new();
        rw.read(true).write(true).mode(0o666);
        let opened = rw.clone().custom_flags(nix::libc::O_TMPFILE).open(dir);
        match opened {
            Ok(file) => Ok(Temp::Unnamed {
                file,
                dir: dir.to_path_buf(),
            }),
            // The filesystem (or kernel) has no unnamed files.
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(nix::libc::EOPNOTSUPP | nix::libc::EISDIR)
                ) =>
            {
                Named::create(dir, out_name, |path| rw.clone().create_new(true).open(path))
                    .map(Temp::Named)
            }
            Err(e) => Err(cannot_create(dir, e)),
        }
    }

    /// The open file.
    pub(crate) fn file(&self) -> &File {
        match self {
            Temp::Unnamed { file, .. } => file,
            Temp::Named(n) => &n.temp.as_file().0,
        }
    }

    /// The directory the file is (or will be) in.
    pub(crate) fn dir(&self) -> &Path {
        match self {
            Temp::Unnamed { dir, .. } => dir,
            Temp::Named(n) => n.temp.path().parent().unwrap_or(Path::new(".")),
        }
    }

    /// Link the file under `dest` when it has no name yet, refusing an
    /// existing `dest`; `Err(self)` for a named file, which is moved by
    /// [`Named::persist`] instead.
    pub(crate) fn link_as(self, dest: &Path) -> std::result::Result<io::Result<()>, Temp> {
        match self {
            Temp::Unnamed { file, .. } => Ok(link_fd(&file, dest)),
            named => Err(named),
        }
    }

    /// The file under a temporary name in its directory.
    pub(crate) fn into_named(self, out_name: &OsStr) -> Result<Named> {
        match self {
            Temp::Named(n) => Ok(n),
            Temp::Unnamed { file, dir } => Named::create(&dir, out_name, |path| {
                link_fd(&file, path)?;
                file.try_clone()
            }),
        }
    }
}

impl Named {
    /// Create `.NAME.pbf-sort.XXXXXX.tmp` in `dir` with `make`, registered
    /// for removal on a signal before it exists.
    fn create(
        dir: &Path,
        out_name: &OsStr,
        mut make: impl FnMut(&Path) -> io::Result<File>,
    ) -> Result<Named> {
        let mut prefix = OsString::from(".");
        prefix.push(out_name);
        prefix.push(TEMP_MARKER);
        let mut failure = None;
        let temp = Builder::new()
            .prefix(&prefix)
            .suffix(".tmp")
            .rand_bytes(6)
            .make_in(dir, |path| {
                let registration = remove_on_signal(path).map_err(|e| {
                    let msg = e.to_string();
                    failure = Some(e);
                    io::Error::other(msg)
                })?;
                Ok((make(path)?, registration))
            });
        match (temp, failure) {
            (Ok(temp), _) => Ok(Named { temp }),
            (Err(_), Some(e)) => Err(e),
            (Err(e), None) => Err(cannot_create(dir, e)),
        }
    }

    /// The file's name.
    pub(crate) fn path(&self) -> &Path {
        self.temp.path()
    }

    /// Move the file onto `dest`: replacing it with `overwrite`, else only
    /// when `dest` does not exist. On failure the file is removed.
    pub(crate) fn persist(self, dest: &Path, overwrite: bool) -> io::Result<()> {
        let persisted = match overwrite {
            true => self.temp.persist(dest),
            false => self.temp.persist_noclobber(dest),
        };
        persisted.map(drop).map_err(|e| e.error)
    }
}

/// Give the open file `file` the name `dest` (which must not exist).
fn link_fd(file: &File, dest: &Path) -> io::Result<()> {
    let proc_path = format!("/proc/self/fd/{}", file.as_raw_fd());
    let flags = AtFlags::AT_SYMLINK_FOLLOW;
    linkat(None, Path::new(&proc_path), None, dest, flags).map_err(io::Error::from)
}

fn cannot_create(dir: &Path, e: io::Error) -> Error {
    Error::io(
        format!("cannot create a temporary file in {}", dir.display()),
        e,
    )
}
