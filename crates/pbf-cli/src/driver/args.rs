//! The driver's command line, parsed by its clap [`super::command`] with
//! the tools' own value parsers, and the files it names judged
//! ([`super::check`]), before a stage starts (`pbf-index --driver-args
//! ARG...`). The script gets back bash to evaluate: an assignment to its
//! `opt` table for each option given (a flag: 1; `-v`: the count; of
//! `--progress` and `--no-progress`, the one that won), and its `inputs`;
//! only `opt[help]=1` or `opt[version]=1` when either is asked for.
//! Standard input is read at most once, and a file given twice once with
//! `--dedupe` (refused without: its objects would be written twice). A
//! command line that cannot work is a [`crate::Usage`] error.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::Result;

use super::check::same_file;
use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{ArgAction, ArgMatches};

/// The command line `words` (without the program's name), as bash
/// assignments, once its files are judged: the regular files it reads by
/// `is_pbf` too.
pub fn parse(
    words: impl IntoIterator<Item = OsString>,
    is_pbf: impl Fn(&Path) -> Result<()>,
) -> Result<Vec<u8>> {
    let words = std::iter::once(OsString::from("pbf-sort")).chain(words);
    // The driver names a missing output itself: only it can see whether
    // the shell's '>' made its standard output a file.
    let parser = super::command().mut_arg("output", |a| a.required(false));
    let m = match parser.infer_long_args(true).try_get_matches_from(words) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::DisplayHelp => return Ok(b"opt[help]=1\n".into()),
        Err(e) if e.kind() == ErrorKind::DisplayVersion => return Ok(b"opt[version]=1\n".into()),
        Err(e) => {
            let line = ambiguity(&e).unwrap_or_else(|| crate::clap_line(&e));
            return Err(crate::usage(format!("{line} (see 'pbf-sort --help')")));
        }
    };
    let raw = |id| m.get_raw(id).and_then(|mut v| v.next());
    if m.get_flag("recompress") && raw("copier").is_some_and(|c| c == "reflink") {
        let why = "--recompress rewrites every copied blob: not with --copier reflink";
        return Err(crate::usage(why));
    }
    if m.get_flag("check") && raw("output").is_some_and(|o| o == "-") {
        return Err(crate::usage("--check needs -o FILE to read back"));
    }
    let dedupe = m.get_flag("dedupe") || m.get_flag("latest");
    let inputs = read_once(&m, dedupe)?;
    if let Some(output) = raw("output") {
        super::check::files(&super::check::Files {
            output,
            inputs: inputs.clone(),
            overwrite: m.get_flag("overwrite"),
            tmpdir: raw("tmpdir"),
            keep_plan: raw("keep-plan"),
            summary_json: raw("summary-json"),
            space_check: !m.get_flag("no-space-check"),
            stdin_size: std::fs::metadata("/dev/stdin")
                .ok()
                .filter(|s| s.is_file())
                .map(|s| s.len()),
            dedupe,
            latest: m.get_flag("latest"),
        })?;
    }
    for input in inputs.iter().map(Path::new).filter(|i| i.is_file()) {
        is_pbf(input)?;
    }
    Ok(assignments(&m, &inputs))
}

/// For an unknown `--WORD` that abbreviates more than one long option,
/// the line naming them all: clap takes it as unknown and offers one.
fn ambiguity(e: &clap::Error) -> Option<String> {
    use clap::error::{ContextKind, ContextValue};
    let Some(ContextValue::String(arg)) = e.get(ContextKind::InvalidArg) else {
        return None;
    };
    let word = arg.strip_prefix("--")?.split('=').next()?;
    let command = super::command();
    let longs = command.get_arguments().filter_map(|a| a.get_long());
    let meant: Vec<String> = longs
        .filter(|l| l.starts_with(word))
        .map(|l| format!("'--{l}'"))
        .collect();
    let could = meant.join(" or ");
    (meant.len() > 1).then(|| format!("option '--{word}' is ambiguous: it could be {could}"))
}

/// The inputs of `m` as they are read: `-` at most once, and with
/// `dedupe` each file once (a notice names one given again).
fn read_once(m: &ArgMatches, dedupe: bool) -> Result<Vec<&OsStr>> {
    let mut once: Vec<&OsStr> = Vec::new();
    for input in m.get_raw("input").into_iter().flatten() {
        if input == "-" && once.contains(&input) {
            let why = "standard input (-) can be given only once (see 'pbf-sort --help')";
            return Err(crate::usage(why));
        }
        let Some(&first) = once.iter().find(|&&f| same_file(f, input)) else {
            once.push(input);
            continue;
        };
        let mut shown = input.to_string_lossy().into_owned();
        if first != input {
            shown += &format!(" (as {})", first.to_string_lossy());
        }
        if !dedupe {
            let why =
                "given twice: its objects would be written twice; with --dedupe it is read once";
            return Err(crate::usage(format!("{shown}: {why}")));
        }
        if !m.get_flag("quiet") {
            let notice = format!("notice: {shown}: given twice; --dedupe reads it once");
            crate::warn("pbf-sort", notice);
        }
    }
    Ok(once)
}

/// `opt[NAME]=VALUE` for each option given, then `inputs=(...)`.
fn assignments(m: &ArgMatches, inputs: &[&OsStr]) -> Vec<u8> {
    let mut out = Vec::new();
    for arg in super::command().get_arguments() {
        let id = arg.get_id().as_str();
        if m.value_source(id) != Some(ValueSource::CommandLine) || id == "input" {
            continue;
        }
        let value = match arg.get_action() {
            ArgAction::SetTrue => b"1".to_vec(),
            ArgAction::Count => m.get_count(id).to_string().into_bytes(),
            _ => m
                .get_raw(id)
                .into_iter()
                .flatten()
                .flat_map(quoted)
                .collect(),
        };
        out.extend([format!("opt[{id}]=").as_bytes(), &value, b"\n"].concat());
    }
    out.extend_from_slice(b"inputs=(");
    for input in inputs {
        out.extend([&quoted(input)[..], b" "].concat());
    }
    out.extend_from_slice(b")\n");
    out
}

/// `word` in single quotes, as bash reads it back whatever it holds.
fn quoted(word: impl AsRef<OsStr>) -> Vec<u8> {
    // Each quote inside ends the quoted word, is escaped, and starts it again.
    let parts: Vec<&[u8]> = word.as_ref().as_bytes().split(|&b| b == b'\'').collect();
    [&b"'"[..], &parts.join(&b"'\\''"[..]), b"'"].concat()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(words: &[&str]) -> String {
        let words = words.iter().map(OsString::from);
        let parsed = parse(words, |_| Ok(())).expect("parsed");
        String::from_utf8(parsed).expect("utf-8")
    }

    fn refused(words: &[&str]) -> String {
        let words = words.iter().map(OsString::from);
        parse(words, |_| Ok(())).expect_err("refused").to_string()
    }

    #[test]
    fn options_come_back_as_bash_assignments_and_inputs_as_typed() {
        let got = parsed(&[
            "-vv",
            "--dedupe",
            "--no-progress",
            "--tmp",
            "a'b",
            "--",
            "-x",
            "-",
        ]);
        assert_eq!(
            got,
            "opt[dedupe]=1\nopt[tmpdir]='a'\\''b'\nopt[no-progress]=1\n\
             opt[verbose]=2\ninputs=('-x' '-' )\n"
        );
        assert_eq!(parsed(&["-h"]), "opt[help]=1\n");
        assert_eq!(parsed(&["x", "--version"]), "opt[version]=1\n");
    }

    #[test]
    fn values_are_judged_by_the_tools_parsers() {
        assert!(refused(&["x", "--jobs", "0"]).contains("'--jobs <N>'"));
        assert!(refused(&["x", "--memory", "0"]).contains("64k"));
        assert!(refused(&["x", "--compression", "zstd:99"]).contains("'--compression <C>'"));
        assert!(refused(&["x", "--lastest"]).contains("'--latest'"));
        assert!(
            refused(&["x", "--over"])
                .starts_with("option '--over' is ambiguous: it could be '--overwrite' or "),
            "{}",
            refused(&["x", "--over"])
        );
        let both = refused(&["x", "-o", "-", "--check"]);
        assert_eq!(both, "--check needs -o FILE to read back");
    }
}
