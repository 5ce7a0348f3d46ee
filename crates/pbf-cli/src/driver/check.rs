//! The files a `pbf-sort` run reads and writes, judged before a stage
//! starts (as its command line is parsed: [`super::args`]): the inputs it
//! reads as they are named, and the output, `--tmpdir`, the directory of
//! temporary files for `-o -`, `--keep-plan` and `--summary-json`. A file
//! the run could not use as given is a [`crate::Usage`] error (exit 2).
//! Whether an input is PBF is `pbf-index --validate`'s to judge.
//!
//! It also refuses, unless `--no-space-check`, a copy of standard input
//! that cannot fit where it is saved, and an output that the inputs' sizes
//! alone show cannot fit beside it.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use anyhow::Result;

use crate::paths::check_dir;

/// Names a PBF output must not end in, lower case: they say another format.
const OTHER_FORMATS: &[&str] = &[
    "osm", "osh", "osc", "opl", "o5m", "o5c", "xml", "gz", "bz2", "xz", "zst",
];

/// What a run reads and writes, as its command line names them.
#[derive(Debug, Default)]
pub struct Files<'a> {
    /// `-o`, `-` for standard output.
    pub output: &'a OsStr,
    /// As given, `-` for standard input.
    pub inputs: Vec<&'a OsStr>,
    /// `-O`.
    pub overwrite: bool,
    /// `--tmpdir`.
    pub tmpdir: Option<&'a OsStr>,
    /// `--keep-plan`.
    pub keep_plan: Option<&'a OsStr>,
    /// `--summary-json`.
    pub summary_json: Option<&'a OsStr>,
    /// Not `--no-space-check`.
    pub space_check: bool,
    /// The size of standard input, when it is a regular file.
    pub stdin_size: Option<u64>,
    /// `--dedupe`.
    pub dedupe: bool,
    /// `--latest`.
    pub latest: bool,
}

/// Refuse what the run of `run` could not read or write.
pub fn files(run: &Files) -> Result<()> {
    let (output, inputs) = (run.output, &run.inputs);
    for &input in inputs.iter().filter(|&&i| i != "-") {
        check_input(input)?;
    }
    if output != "-" {
        check_output(output, inputs, run.overwrite)?;
    }
    let saved = check_temporary(run.tmpdir, output)?;
    let room_asked = inputs.contains(&OsStr::new("-")) && run.space_check;
    if let Some(size) = run.stdin_size.filter(|_| room_asked) {
        room(&saved, size, "the copy of standard input needs")?;
    }
    if output != "-" && run.space_check && !run.latest {
        let needs = "the output of these inputs needs at least";
        room(directory_of(output), output_needs(run), needs)?;
    }
    // The driver makes it where there is none, in a directory that is.
    if let Some(keep) = run.keep_plan {
        let made = Path::new(keep).exists();
        check_dir("--keep-plan", if made { keep } else { directory_of(keep) })?;
    }
    if let Some(summary) = run.summary_json {
        check_summary(summary, output, inputs)?;
    }
    Ok(())
}

/// `--tmpdir`, and for `-o -` without it the directory of temporary
/// files; returns where standard input and pipes are saved: beside the
/// output, or for `-o -` with the temporary files.
fn check_temporary(tmpdir: Option<&OsStr>, output: &OsStr) -> Result<OsString> {
    if let Some(tmpdir) = tmpdir {
        check_dir("--tmpdir", tmpdir)?;
    }
    if output != "-" {
        return Ok(directory_of(output).to_owned());
    }
    let saved = temporary_dir(tmpdir);
    if tmpdir.is_none() {
        check_dir("temporary files", &saved)?;
    }
    Ok(saved)
}

/// An input: a file that can be read.
fn check_input(input: &OsStr) -> Result<()> {
    use nix::unistd::{AccessFlags, access};
    let path = Path::new(input);
    let why = if !path.exists() {
        "no such file"
    } else if path.is_dir() {
        "is a directory"
    } else if access(path, AccessFlags::R_OK).is_err() {
        "not readable"
    } else if is_terminal(path) {
        "is a terminal; pipe a PBF file into 'pbf-sort -'"
    } else {
        return Ok(());
    };
    refuse(input, why)
}

/// Whether `path` is a terminal (`/dev/tty`, `/dev/pts/N`): saved as a
/// pipe would be, it would read what the user types until Ctrl-D. Opened
/// without waiting and without becoming the controlling terminal.
fn is_terminal(path: &Path) -> bool {
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    if !std::fs::metadata(path).is_ok_and(|m| m.file_type().is_char_device()) {
        return false;
    }
    let flags = nix::libc::O_NOCTTY | nix::libc::O_NONBLOCK;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path);
    opened.is_ok_and(|f| std::io::IsTerminal::is_terminal(&f))
}

/// The output: no input, a file name, of PBF, in a directory the run can
/// write, and new unless it may be replaced.
fn check_output(output: &OsStr, inputs: &[&OsStr], overwrite: bool) -> Result<()> {
    if inputs.iter().any(|&input| same_file(input, output)) {
        let why = "the output is also an input; write it elsewhere (-O never replaces an input)";
        refuse(output, why)?;
    }
    let lower = output.to_string_lossy().to_lowercase();
    let ext = lower.rsplit_once('.').map(|(_, ext)| ext);
    if ext.is_some_and(|ext| OTHER_FORMATS.contains(&ext)) {
        let why = "the name says another format than PBF, which is all pbf-sort writes (and \
                   what osmium would expect); name it .osm.pbf (or .osh.pbf)";
        refuse(output, why)?;
    }
    // What every copier asks of its output file (`-o`).
    crate::paths::check_output(Path::new(output), overwrite)
}

/// The summary: a file of its own, in a directory the run can write,
/// replacing at most a previous summary (see [`replaceable_summary`]).
fn check_summary(summary: &OsStr, output: &OsStr, inputs: &[&OsStr]) -> Result<()> {
    if Path::new(summary).is_dir() {
        refuse(summary, "is a directory (--summary-json)")?;
    }
    check_dir("--summary-json", directory_of(summary))?;
    let mut taken = [OsStr::new("-"), output]
        .into_iter()
        .chain(inputs.iter().copied());
    if taken.any(|f| f == summary || same_file(f, summary)) {
        let why = "standard output, the output or an input (--summary-json)";
        refuse(summary, why)?;
    }
    // The summary is renamed into place: it would replace a link, a FIFO
    // or a device, not write to it.
    if Path::new(summary)
        .symlink_metadata()
        .is_ok_and(|m| !m.is_file())
    {
        let why = "exists and is not a regular file (--summary-json replaces only a previous \
                   summary; a link, FIFO or device would be replaced, not written to)";
        refuse(summary, why)?;
    }
    replaceable_summary(summary)
}

/// Bytes of an existing `--summary-json` file read to judge it.
const SUMMARY_SNIFF: u64 = 64 * 1024;

/// An existing regular file given to `--summary-json` must be a previous
/// summary (its first non-blank byte is `{`) or hold nothing but blanks:
/// a forgotten argument (`--summary-json in.osm.pbf other.osm.pbf`) must
/// not replace the user's data with JSON.
fn replaceable_summary(summary: &OsStr) -> Result<()> {
    use std::io::Read;
    let path = Path::new(summary);
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return Ok(());
    }
    let shown = summary.to_string_lossy();
    let in_words = |e: std::io::Error| crate::usage(crate::paths::io_line(&shown, &e));
    let mut head = Vec::new();
    let file = std::fs::File::open(path).map_err(in_words)?;
    file.take(SUMMARY_SNIFF)
        .read_to_end(&mut head)
        .map_err(in_words)?;
    let blank = head.len() < SUMMARY_SNIFF as usize;
    match head.trim_ascii_start().first() {
        Some(b'{') => Ok(()),
        None if blank => Ok(()),
        _ => refuse(
            summary,
            "exists and is not a summary (--summary-json replaces only a previous one)",
        ),
    }
}

/// Where the temporary files of `-o -` go: `--tmpdir`, else `$TMPDIR`,
/// else `/tmp`.
fn temporary_dir(tmpdir: Option<&OsStr>) -> OsString {
    let env = std::env::var_os("TMPDIR").filter(|t| !t.is_empty());
    let dir = tmpdir.map(OsStr::to_owned).or(env);
    dir.unwrap_or_else(|| "/tmp".into())
}

/// Room in `dir`'s filesystem for `needed` bytes, which `needs` says
/// what needs (free space as `statvfs` gives it to anyone: `f_bavail *
/// f_frsize`).
fn room(dir: &OsStr, needed: u64, needs: &str) -> Result<()> {
    match crate::paths::free_bytes(Path::new(dir)) {
        Some(free) if needed > free => {
            let why = format!(
                "not enough free space: {needs} {needed} bytes there, the filesystem has {free} \
                 bytes free (--no-space-check writes anyway)"
            );
            refuse(dir, &why)
        }
        _ => Ok(()),
    }
}

/// What share of its inputs' bytes an output needs at least: it holds
/// every object, and no compression of ours makes a blob much smaller
/// than the input's (raw blobs shrink 2.4 times as zlib:6, on the test
/// file of raw blobs).
const OUTPUT_SHARE: u64 = 4;

/// The room beside the output for a quarter of the inputs' bytes (of the largest
/// input with `--dedupe`, which drops repeats) and the copy of standard
/// input, known before any is indexed. `--latest` may leave out most of a
/// history file: its output is known only once planned (the copier checks
/// it then).
fn output_needs(run: &Files) -> u64 {
    let stdin = run
        .stdin_size
        .filter(|_| run.inputs.contains(&OsStr::new("-")));
    let sizes: Vec<u64> = run
        .inputs
        .iter()
        .filter(|&&i| i != "-")
        .filter_map(|i| std::fs::metadata(i).ok().filter(|m| m.is_file()))
        .map(|m| m.len())
        .chain(stdin)
        .collect();
    let inputs_need = match run.dedupe {
        true => sizes.iter().copied().max().unwrap_or(0),
        false => sizes.iter().sum(),
    } / OUTPUT_SHARE;
    inputs_need + stdin.unwrap_or(0)
}

/// The directory `file` names: what comes before its last `/` (`/` for
/// none), or `.` without one.
fn directory_of(file: &OsStr) -> &OsStr {
    let bytes = file.as_bytes();
    match bytes.iter().rposition(|&b| b == b'/') {
        Some(0) => OsStr::new("/"),
        Some(at) => OsStr::from_bytes(&bytes[..at]),
        None => OsStr::new("."),
    }
}

/// True when `a` and `b` are one existing file (as bash's `-ef`), `-`
/// standard input.
pub(super) fn same_file(a: &OsStr, b: &OsStr) -> bool {
    let stdin = |f| [f, OsStr::new("/dev/stdin")][usize::from(f == "-")];
    match (std::fs::metadata(stdin(a)), std::fs::metadata(stdin(b))) {
        (Ok(a), Ok(b)) => (a.dev(), a.ino()) == (b.dev(), b.ino()),
        _ => false,
    }
}

/// `NAME: WHY`, as a usage error.
fn refuse(name: &OsStr, why: &str) -> Result<()> {
    // An empty name is shown as the shell takes it, not as nothing.
    let name = match name.to_string_lossy() {
        n if n.is_empty() => "''".into(),
        n => n,
    };
    Err(crate::usage(format!("{name}: {why}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line refusing the run of `words` (`NAME=VALUE`, as the fields
    /// of [`Files`] are named), if any.
    fn refused(words: &[&str]) -> Option<String> {
        let mut run = Files::default();
        for word in words {
            let (name, value) = word.split_once('=').expect("NAME=VALUE");
            let (text, on) = (Some(OsStr::new(value)), value == "1");
            match name {
                "output" => run.output = OsStr::new(value),
                "input" => run.inputs.push(OsStr::new(value)),
                "overwrite" => run.overwrite = on,
                "tmpdir" => run.tmpdir = text,
                "keep_plan" => run.keep_plan = text,
                "summary_json" => run.summary_json = text,
                "space_check" => run.space_check = on,
                "stdin_size" => run.stdin_size = Some(value.parse().expect("size")),
                "dedupe" => run.dedupe = on,
                "latest" => run.latest = on,
                _ => panic!("{name}"),
            }
        }
        files(&run).err().map(|e| e.to_string())
    }

    #[test]
    fn the_output_is_a_new_pbf_file_in_a_writable_directory() {
        let t = tempfile::tempdir().expect("dir");
        let dir = t.path().to_str().expect("utf-8");
        let exists = format!("{dir}/old.osm.pbf");
        std::fs::write(&exists, b"x").expect("file");
        let out = |name: &str| format!("output={name}");
        assert_eq!(refused(&[&out(&format!("{dir}/new.osm.pbf"))]), None);
        assert_eq!(refused(&[&out(&exists), "overwrite=1"]), None);
        assert_eq!(refused(&["output=-"]), None);
        let cases = [
            (exists.clone(), "exists (use -O/--overwrite to replace it)"),
            (dir.to_owned(), "is a directory; name the output file"),
            (
                format!("{dir}/sub/"),
                "names a directory, and there is none",
            ),
            (
                format!("{dir}/x.OSM.BZ2"),
                "the name says another format than PBF",
            ),
            (format!("{exists}/x.pbf"), "not a directory (output)"),
        ];
        for (name, why) in cases {
            let line = refused(&[&out(&name)]).unwrap_or_else(|| panic!("{name} taken"));
            assert!(line.contains(why), "{name}: {line}");
        }
        let line = refused(&[&out(&format!("{dir}/no/x.pbf"))]).expect("refused");
        assert_eq!(line, format!("{dir}/no: no such directory (output)"));
        let line = refused(&[&out(&exists), &format!("input={exists}")]).expect("refused");
        assert!(line.contains("the output is also an input"), "{line}");
    }

    #[test]
    fn a_device_or_process_path_is_no_output() {
        for special in ["/dev/null", "/dev/stdout", "/proc/self/fd/1"] {
            let line = refused(&[&format!("output={special}"), "overwrite=1"]).expect(special);
            assert!(
                line.contains("use -o - to write to standard output"),
                "{line}"
            );
        }
    }

    #[test]
    fn the_summary_is_a_file_of_its_own() {
        let t = tempfile::tempdir().expect("dir");
        let dir = t.path().to_str().expect("utf-8");
        let input = format!("{dir}/in.osm.pbf");
        std::fs::write(&input, b"x").expect("file");
        let words = |summary: &str| {
            let fields = [format!("summary_json={summary}"), format!("input={input}")];
            refused(&["output=-", &fields[0], &fields[1]])
        };
        assert_eq!(words(&format!("{dir}/run.json")), None);
        for taken in ["-", &input, dir] {
            assert!(
                words(taken).is_some_and(|l| l.contains("(--summary-json)")),
                "{taken}"
            );
        }
        let line = words(&format!("{dir}/none/run.json")).expect("refused");
        assert_eq!(
            line,
            format!("{dir}/none: no such directory (--summary-json)")
        );
        let line = refused(&["output=-", "tmpdir=/nonexistent"]).expect("refused");
        assert_eq!(line, "/nonexistent: no such directory (--tmpdir)");
        let kept = format!("keep_plan={input}");
        let line = refused(&["output=-", "tmpdir=/tmp", &kept]).expect("refused");
        assert_eq!(line, format!("{input}: not a directory (--keep-plan)"));
        for (option, system) in [
            ("tmpdir", "/proc"),
            ("keep_plan", "/dev"),
            ("tmpdir", "/sys"),
        ] {
            let line = refused(&["output=-", &format!("{option}={system}")]).expect(system);
            assert!(
                line.starts_with(&format!("{system}: holds the system's")),
                "{line}"
            );
        }
        let kept = format!("keep_plan={dir}/not-yet");
        assert_eq!(refused(&["output=-", "tmpdir=/tmp", &kept]), None);
        let kept = format!("keep_plan={dir}/none/not-yet");
        let line = refused(&["output=-", "tmpdir=/tmp", &kept]).expect("refused");
        assert_eq!(line, format!("{dir}/none: no such directory (--keep-plan)"));
    }

    #[test]
    fn the_summary_replaces_only_a_previous_summary() {
        let t = tempfile::tempdir().expect("dir");
        let dir = t.path().to_str().expect("utf-8");
        let words = |summary: &str| refused(&["output=-", &format!("summary_json={summary}")]);
        let file = |name: &str, bytes: &[u8]| {
            let path = format!("{dir}/{name}");
            std::fs::write(&path, bytes).expect("file");
            path
        };
        for (name, bytes) in [
            ("old.json", &b"{\"exit\":0}\n"[..]),
            ("spaced.json", b"\n  {}"),
            ("empty.json", b""),
        ] {
            assert_eq!(words(&file(name, bytes)), None, "{name}");
        }
        let pbf = file("in.osm.pbf", b"\0\0\0\x0d\x0a\x09OSMHeader\x18\x10");
        let line = words(&pbf).expect("refused");
        assert_eq!(
            line,
            format!(
                "{pbf}: exists and is not a summary (--summary-json replaces only a previous one)"
            )
        );
        assert!(words(&file("notes.txt", b"hello")).is_some());
        // Renamed into place, the summary would replace these, not write to them.
        let link = format!("{dir}/link.json");
        std::os::unix::fs::symlink(file("real.json", b"{}"), &link).expect("link");
        let fifo = format!("{dir}/fifo.json");
        nix::unistd::mkfifo(fifo.as_str(), nix::sys::stat::Mode::S_IRWXU).expect("fifo");
        for special in [&link, &fifo] {
            let line = words(special).expect(special);
            assert!(
                line.starts_with(&format!("{special}: exists and is not a regular file")),
                "{line}"
            );
        }
        for system in ["/dev/x.json", "/dev/null", "/dev/stdout"] {
            assert_eq!(
                words(system).expect(system),
                "/dev: holds the system's names for devices and processes, not files \
                 (--summary-json)"
            );
        }
        let long_blank = file("blank.json", &vec![b' '; SUMMARY_SNIFF as usize + 1]);
        assert!(words(&long_blank).is_some());
    }

    #[test]
    fn an_input_is_a_readable_file() {
        let t = tempfile::tempdir().expect("dir");
        let dir = t.path().to_str().expect("utf-8");
        let line = |input: &str| refused(&["output=-", &format!("input={input}")]);
        assert_eq!(line("-"), None);
        let missing = format!("{dir}/missing.osm.pbf");
        assert_eq!(line(&missing), Some(format!("{missing}: no such file")));
        assert_eq!(line(""), Some("'': no such file".into()));
        assert_eq!(line(dir), Some(format!("{dir}: is a directory")));
    }

    #[test]
    fn a_copy_of_standard_input_must_fit() {
        let t = tempfile::tempdir().expect("dir");
        let out = format!("output={}/out.osm.pbf", t.path().to_str().expect("utf-8"));
        let run = |size: u64, check: &str| {
            let size = format!("stdin_size={size}");
            refused(&[&out, check, &size, "input=-"])
        };
        assert_eq!(run(1, "space_check=1"), None);
        let line = run(u64::MAX, "space_check=1").expect("refused");
        assert!(
            line.contains("not enough free space: the copy of standard input"),
            "{line}"
        );
        assert_eq!(run(u64::MAX, "space_check=0"), None);
        let no_stdin = refused(&[&out, "space_check=1", "stdin_size=99999999999999999"]);
        assert_eq!(no_stdin, None, "standard input is no input");
    }

    #[test]
    fn an_output_the_input_sizes_show_cannot_fit_is_refused() {
        let t = tempfile::tempdir().expect("dir");
        let dir = t.path().to_str().expect("utf-8");
        let out = format!("output={dir}/out.osm.pbf");
        let big = t.path().join("big.osm.pbf");
        let free = crate::paths::free_bytes(t.path()).expect("statvfs");
        // A sparse file four times the free space and a bit.
        let file = std::fs::File::create(&big).expect("create");
        file.set_len(free.saturating_mul(4).saturating_add(1 << 30))
            .expect("set_len");
        let input = format!("input={}", big.display());
        let run = |extra: &[&str]| refused(&[&[out.as_str(), &input][..], extra].concat());
        let line = run(&["space_check=1"]).expect("refused");
        assert!(
            line.starts_with(&format!(
                "{dir}: not enough free space: the output of these inputs"
            )),
            "{line}"
        );
        assert_eq!(run(&["space_check=0"]), None, "--no-space-check");
        assert_eq!(run(&["space_check=1", "latest=1"]), None, "--latest");
        assert!(run(&["space_check=1", "dedupe=1"]).is_some(), "--dedupe");
    }

    #[test]
    fn a_files_directory_is_before_its_last_slash() {
        let dir = |f: &str| directory_of(OsStr::new(f)).to_owned();
        assert_eq!(dir("a/b/c"), "a/b");
        assert_eq!(dir("/c"), "/");
        assert_eq!(dir("c"), ".");
    }
}
