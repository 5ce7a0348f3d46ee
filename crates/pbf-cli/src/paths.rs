//! Why a path given on the command line cannot be used, said in the words
//! of the `pbf-sort` driver (`FILE: no such file`, `DIR: no such directory
//! (--spool)`, `OUT: is a directory; name the output file`), so a tool run
//! alone and the driver refuse the same argument alike. Each refusal is a
//! [`crate::Usage`] error (exit 2), found before any work.

use std::io;
use std::path::{Component, Path};

use crate::usage;

/// The cause of `e`, met opening or inspecting the path a user gave, in
/// words: `no such file`, `is a directory`, `not readable`, else the
/// system's text.
pub fn io_cause(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => "no such file".into(),
        io::ErrorKind::IsADirectory => "is a directory".into(),
        io::ErrorKind::PermissionDenied => "not readable".into(),
        _ => without_os_errors(&e.to_string()),
    }
}

/// `PATH: CAUSE` for an input that cannot be opened ([`io_cause`]).
pub fn io_line(path: impl std::fmt::Display, e: &io::Error) -> String {
    format!("{path}: {}", io_cause(e))
}

/// The text without Rust's ` (os error N)` after a system's message,
/// wherever one is: the words say it, the number is noise to a user.
pub(crate) fn without_os_errors(text: &str) -> String {
    const MARK: &str = " (os error ";
    let mut pieces = text.split(MARK);
    let mut out = pieces.next().unwrap_or_default().to_owned();
    for piece in pieces {
        let digits = piece.bytes().take_while(u8::is_ascii_digit).count();
        match piece[digits..].strip_prefix(')') {
            Some(rest) if digits > 0 => out.push_str(rest),
            _ => out.extend([MARK, piece]),
        }
    }
    out
}

/// The free space of `dir`'s filesystem as anyone may use it (`statvfs`:
/// `f_bavail * f_frsize`); `None` where it cannot be read.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    let fs = nix::sys::statvfs::statvfs(dir).ok()?;
    // The counts are C unsigned longs: u64 here, narrower on 32-bit targets.
    #[allow(clippy::unnecessary_cast)]
    Some((fs.blocks_available() as u64).saturating_mul(fs.fragment_size() as u64))
}

/// The directory a file named `path` goes into, as typed: `out` for
/// `out/x.pbf`, `/` for `/x.pbf`, and `.` for `x.pbf`.
pub fn dir_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ if path.has_root() => Path::new("/"),
        _ => Path::new("."),
    }
}

/// A directory in a message: as typed, except the current directory,
/// which is named in words (a bare `.` reads as punctuation).
pub fn dir_words(dir: &Path) -> String {
    if dir.components().all(|c| c == Component::CurDir) {
        "the current directory".into()
    } else {
        dir.display().to_string()
    }
}

/// `dir` must be a directory the run can create files in, and not one of
/// the system's device and process names ([`pbf_output::holds_system_names`]);
/// `what` (an option such as `--spool`) says which argument named it.
pub fn check_dir(what: &str, dir: impl AsRef<Path>) -> anyhow::Result<()> {
    use nix::unistd::{AccessFlags, access};
    let dir = dir.as_ref();
    let why = match std::fs::metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => "no such directory".into(),
        Err(e) if e.kind() == io::ErrorKind::NotADirectory => "not a directory".into(),
        Err(e) => io_cause(&e),
        Ok(m) if !m.is_dir() => "not a directory".into(),
        Ok(_) if pbf_output::holds_system_names(dir) => {
            "holds the system's names for devices and processes, not files".into()
        }
        Ok(_) if access(dir, AccessFlags::W_OK | AccessFlags::X_OK).is_err() => {
            "directory is not writable".into()
        }
        Ok(_) => return Ok(()),
    };
    Err(usage(format!("{}: {why} ({what})", dir_words(dir))))
}

/// `dir` (`--tmpdir`) can hold the temporary file of the output `out`:
/// a writable directory ([`check_dir`]) on `out`'s filesystem, since the
/// output is renamed into place, never copied. Any will do for `-`.
pub fn check_temp_dir(dir: &Path, out: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::MetadataExt;
    check_dir("--tmpdir", dir)?;
    if out == Path::new("-") {
        return Ok(());
    }
    // The output is written through a symbolic link, into its target's directory.
    let real = std::fs::canonicalize(out).unwrap_or_else(|_| out.to_path_buf());
    let device = |p: &Path| std::fs::metadata(p).map(|m| m.dev()).ok();
    if device(dir) == device(dir_of(&real)) {
        return Ok(());
    }
    let (dir, output_dir) = (dir_words(dir), dir_words(dir_of(&real)));
    Err(usage(format!(
        "{dir}: not on the filesystem of {output_dir} (--tmpdir: the output is renamed into \
         place, never copied)"
    )))
}

/// Why `-o -` is refused where standard output is a terminal (as gzip and
/// zstd refuse it): PBF would fill the screen with bytes.
pub const TERMINAL_OUTPUT: &str =
    "standard output is a terminal, and PBF is binary: redirect -o - (> FILE) or pipe it";

/// `out` (`-o`) can name the output file: not a directory, device or process
/// path ([`pbf_output::replaces_system_name`]), in a directory the run can
/// write, and not an existing file unless `overwrite`. `-` (standard
/// output) can unless it is a terminal.
pub fn check_output(out: &Path, overwrite: bool) -> anyhow::Result<()> {
    if out == Path::new("-") {
        if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            return Err(usage(TERMINAL_OUTPUT));
        }
        return Ok(());
    }
    let refuse = |why: &str| Err(usage(format!("{}: {why}", out.display())));
    if out.is_dir() {
        return refuse("is a directory; name the output file");
    }
    if out.as_os_str().as_encoded_bytes().ends_with(b"/") {
        return refuse("names a directory, and there is none; name the output file");
    }
    // A copier writes through a link, to a file that must be there.
    let link = out
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink());
    if link && !out.exists() {
        return refuse("a symbolic link to a file that does not exist");
    }
    // A copier puts a file in place: at a device's or process's name it
    // would replace the name, not write to it, and through a link it puts
    // the file where the link points. pbf_output refuses only an existing
    // OUT that is not a regular file: the system's names are refused here.
    let special = out.metadata().is_ok_and(|m| !m.is_file());
    let target = std::fs::canonicalize(out).ok().filter(|_| link);
    let system = [Some(out), target.as_deref()]
        .into_iter()
        .flatten()
        .any(pbf_output::replaces_system_name);
    let what = match special {
        true => Some("is a device, process or other special file"),
        false => system.then_some("is in a directory of device and process names"),
    };
    if let Some(what) = what {
        return refuse(&format!(
            "{what}, which an output file would replace; use -o - to write to standard output \
             (or a device, with >)"
        ));
    }
    check_dir("output", dir_of(out))?;
    if !overwrite && out.exists() {
        return refuse("exists (use -O/--overwrite to replace it)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(r: anyhow::Result<()>) -> String {
        let e = r.expect_err("refused");
        assert!(e.downcast_ref::<crate::Usage>().is_some(), "{e}");
        e.to_string()
    }

    #[test]
    fn io_causes_are_words() {
        let missing = std::fs::File::open("/nonexistent/x.pbf").expect_err("missing");
        assert_eq!(io_line("x.pbf", &missing), "x.pbf: no such file");
        let other = io::Error::from_raw_os_error(nix::libc::EIO);
        assert_eq!(io_cause(&other), "Input/output error");
    }

    #[test]
    fn os_error_numbers_are_left_out_wherever_they_are() {
        assert_eq!(
            without_os_errors("a (os error x) b (os error 5)"),
            "a (os error x) b"
        );
        assert_eq!(
            without_os_errors("a (os error 2)b (os error "),
            "ab (os error "
        );
    }

    #[test]
    fn directories_are_named_as_typed() {
        assert_eq!(dir_of(Path::new("out/x.pbf")), Path::new("out"));
        assert_eq!(dir_of(Path::new("/x.pbf")), Path::new("/"));
        assert_eq!(dir_of(Path::new("x.pbf")), Path::new("."));
        assert_eq!(dir_words(Path::new(".")), "the current directory");
        assert_eq!(dir_words(Path::new("./")), "the current directory");
        assert_eq!(dir_words(Path::new("out")), "out");
    }

    #[test]
    fn outputs_that_cannot_be_written_are_refused_in_the_drivers_words() {
        let dir = tempfile::tempdir().expect("tempdir");
        let d = dir.path().display();
        assert_eq!(
            line(check_output(dir.path(), true)),
            format!("{d}: is a directory; name the output file")
        );
        let gone = dir.path().join("gone");
        assert_eq!(
            line(check_output(&gone.join("x.pbf"), false)),
            format!("{d}/gone: no such directory (output)")
        );
        assert_eq!(
            line(check_output(Path::new(&format!("{d}/gone/")), false)),
            format!("{d}/gone/: names a directory, and there is none; name the output file")
        );
        let file = dir.path().join("x.pbf");
        std::fs::write(&file, b"").expect("write");
        assert_eq!(
            line(check_output(&file, false)),
            format!("{d}/x.pbf: exists (use -O/--overwrite to replace it)")
        );
        assert_eq!(
            line(check_dir("--spool", &file)),
            format!("{d}/x.pbf: not a directory (--spool)")
        );
        assert_eq!(
            line(check_output(Path::new("/dev/null"), true)),
            "/dev/null: is a device, process or other special file, which an output file \
             would replace; use -o - to write to standard output (or a device, with >)"
        );
        assert!(
            line(check_output(Path::new("/dev/x.pbf"), true)).starts_with(
                "/dev/x.pbf: is in a directory of device and process names, which an output"
            )
        );
        let dangling = dir.path().join("dangling.pbf");
        std::os::unix::fs::symlink("gone.pbf", &dangling).expect("link");
        assert_eq!(
            line(check_output(&dangling, true)),
            format!("{d}/dangling.pbf: a symbolic link to a file that does not exist")
        );
        let to_proc = dir.path().join("version.pbf");
        std::os::unix::fs::symlink("/proc/version", &to_proc).expect("link");
        assert!(
            line(check_output(&to_proc, true)).contains("in a directory of device and process"),
            "a link to a regular file in /proc"
        );
        assert_eq!(
            line(check_dir("--tmpdir", Path::new("/proc"))),
            "/proc: holds the system's names for devices and processes, not files (--tmpdir)"
        );
        check_output(&file, true).expect("overwritten");
        check_temp_dir(dir.path(), &file).expect("same filesystem");
        check_temp_dir(dir.path(), Path::new("-")).expect("standard output");
        if let Ok(shm) = tempfile::tempdir_in("/dev/shm") {
            let other = line(check_temp_dir(shm.path(), &file));
            assert!(other.contains(": not on the filesystem of "), "{other}");
        }
        match std::io::IsTerminal::is_terminal(&std::io::stdout()) {
            true => assert_eq!(line(check_output(Path::new("-"), false)), TERMINAL_OUTPUT),
            false => check_output(Path::new("-"), false).expect("standard output"),
        }
    }
}
