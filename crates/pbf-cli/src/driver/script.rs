//! `pbf-sort --dry-run`: the run as a bash script that behaves like it: it
//! refuses a terminal as `-` or `-o -` and an existing output (exit 2),
//! saves standard input and pipes, runs the same pipeline, names a failure
//! by its cause and exits with the driver's status (2 where the cause is a
//! stage's usage error, such as an input that is not PBF; else 1), and
//! removes its own files on exit and on a signal. Those files are named as
//! the driver's, with the script's process id (`$$`) where the driver's
//! stands.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;

use super::run::{Fields, Run};

/// The script of the run `run` describes.
pub fn render(run: &Run) -> Vec<u8> {
    let facts = &run.fields;
    let pid = facts.text("driver_pid").unwrap_or_default();
    let q = Quote {
        mark: format!("/.pbf-sort.{pid}."),
    };
    let mut s = Vec::new();
    s.extend_from_slice(b"#!/usr/bin/env bash\n# pbf-sort --dry-run: this run as a script\n");
    s.extend_from_slice(b"set -uo pipefail\n");
    s.extend_from_slice(b"fail() { echo \"pbf-sort: error: $*\" >&2; exit 1; }\n");
    refuse_terminals(&mut s, &q, facts);
    refuse_an_existing_output(&mut s, &q, facts);
    line(&mut s, &[b"files=(", &q.words(&facts.all("remove")), b")"]);
    s.extend_from_slice(b"trap 'rm -f -- \"${files[@]}\"' EXIT\n");
    s.extend_from_slice(b"trap \"exit 130\" INT; trap \"exit 143\" TERM; trap \"exit 129\" HUP\n");
    save_inputs(&mut s, &q, facts);
    pipeline(&mut s, &q, run);
    s
}

/// Standard input read as `-`, and standard output written as `-o -`, on
/// a terminal: refused as the driver refuses them (exit 2), since the
/// script may run where the driver did not.
fn refuse_terminals(s: &mut Vec<u8>, q: &Quote, facts: &Fields) {
    let help = " (see 'pbf-sort --help')";
    let stdin = "standard input is a terminal; pipe a PBF file into 'pbf-sort -'";
    let stdout = crate::paths::TERMINAL_OUTPUT;
    let reads = facts.all("save").contains(&OsStr::new("-"));
    let writes = facts.get("output") == Some(OsStr::new("-"));
    for (fd, why) in [(b"0", stdin)]
        .into_iter()
        .filter(|_| reads)
        .chain([(b"1", stdout)].into_iter().filter(|_| writes))
    {
        let why = q.word(OsStr::new(&format!("pbf-sort: error: {why}{help}")));
        line(
            s,
            &[b"[[ ! -t ", fd, b" ]] || { echo ", &why, b" >&2; exit 2; }"],
        );
    }
}

/// Unless `-O` (or `-o -`): an output that exists is refused, as the driver
/// refuses it (exit 2).
fn refuse_an_existing_output(s: &mut Vec<u8>, q: &Quote, facts: &Fields) {
    let output = facts.get("output").unwrap_or_default();
    if facts.flag("overwrite") || output == "-" {
        return;
    }
    let exists = b": exists (use -O/--overwrite to replace it)";
    let why = q.word(&said(b"pbf-sort: error: ", output, exists));
    let test = [b"[[ ! -e ", &q.word(output)[..], b" ]]"].concat();
    line(s, &[&test, b" || { echo ", &why, b" >&2; exit 2; }"]);
}

/// Standard input and pipes saved as the driver saves them; and the
/// `--keep-plan` directory made, without the last run's spool.
fn save_inputs(s: &mut Vec<u8>, q: &Quote, facts: &Fields) {
    for (source, to) in facts.all("save").into_iter().zip(facts.all("to")) {
        let why = q.word(&said(b"", source, b": cannot save it"));
        let (source, to) = (q.word(source), q.word(to));
        line(s, &[b"cat -- ", &source, b" > ", &to, b" || fail ", &why]);
    }
    if let Some(keep) = facts.get("keep_plan") {
        line(s, &[b"mkdir -p -- ", &q.word(keep), b" || exit 2"]);
        let spool = facts.get("spool").unwrap_or_default();
        line(s, &[b"rm -f -- ", &q.word(spool)]);
    }
}

/// The stages, one a line, the first reading the copy of standard input;
/// then the failure, if any, named by its cause.
fn pipeline(s: &mut Vec<u8>, q: &Quote, run: &Run) {
    failed_stage(s, q, run);
    // As under the driver: a stage whose input was cut short by a failure
    // upstream says nothing (the cause speaks), and each dies with the script.
    s.extend_from_slice(b"export PBF_SORT_DRIVER_PID=$$\n");
    for (i, stage) in run.stages.iter().enumerate() {
        if i > 0 {
            s.extend_from_slice(b" |\n    ");
        }
        s.extend_from_slice(&q.words(&stage.all("arg")));
        if let (0, Some(stdin)) = (i, run.fields.get("stdin")) {
            s.extend_from_slice(b" < ");
            s.extend_from_slice(&q.word(stdin));
        }
    }
    s.extend_from_slice(b"\nfailed \"${PIPESTATUS[@]}\"\n");
}

/// `failed STATUS...`: the stages' roles and names, and the driver's rule
/// for the cause of a failure: the first stage to fail other than by
/// SIGPIPE (stages upstream of a failure die of it), else the first to
/// fail; exit 2 when the cause exited 2 (its usage error), else 1. With
/// `-o -`, a copier ended by SIGPIPE (the reader stopped early) ends the
/// script by SIGPIPE as well.
fn failed_stage(s: &mut Vec<u8>, q: &Quote, run: &Run) {
    let field = |f: &str| -> Vec<&OsStr> {
        run.stages
            .iter()
            .map(|st| st.get(f).unwrap_or_default())
            .collect()
    };
    line(s, &[b"roles=(", &q.words(&field("stage")), b")"]);
    line(s, &[b"names=(", &q.words(&field("name")), b")"]);
    let to_stdout = run.fields.get("output") == Some(OsStr::new("-"));
    let lost: &[u8] = match to_stdout {
        true => b"what went to standard output is not a complete output",
        false => b"no output was written",
    };
    s.extend_from_slice(
        b"failed() { # each stage's exit status, in pipeline order\n    \
          local i c=-1 s=(\"$@\")\n    \
          for i in \"${!s[@]}\"; do\n        \
          ((s[i])) || continue; ((c >= 0)) || c=$i; ((s[i] == 141)) || { c=$i; break; }\n    \
          done\n    \
          ((c >= 0)) || return 0\n",
    );
    if to_stdout {
        s.extend_from_slice(
            b"    [[ \"${roles[c]} ${s[c]}\" != \"copy 141\" ]] ||\n        \
              { rm -f -- \"${files[@]}\"; trap - EXIT PIPE; kill -s PIPE $$; }\n",
        );
    }
    s.extend_from_slice(b"    [[ ! -t 2 ]] || printf '\\r\\033[2K' >&2\n");
    line(
        s,
        &[
            b"    echo \"pbf-sort: error: ${roles[c]} stage '${names[c]}' failed (exit ${s[c]}); ",
            lost,
            b"\" >&2",
        ],
    );
    s.extend_from_slice(b"    exit $((s[c] == 2 ? 2 : 1))\n}\n");
}

/// A message naming `name`: `before`, `name`, `after`.
fn said(before: &[u8], name: &OsStr, after: &[u8]) -> OsString {
    OsStr::from_bytes(&[before, name.as_bytes(), after].concat()).to_owned()
}

/// `parts`, then a newline, onto `s`.
fn line(s: &mut Vec<u8>, parts: &[&[u8]]) {
    parts.iter().for_each(|p| s.extend_from_slice(p));
    s.push(b'\n');
}

/// Quoting for bash, where the driver's own files take the script's pid.
struct Quote {
    /// `/.pbf-sort.PID.`, PID the driver's.
    mark: String,
}

impl Quote {
    /// `words`, each quoted, separated by blanks.
    fn words(&self, words: &[&OsStr]) -> Vec<u8> {
        let quoted: Vec<Vec<u8>> = words.iter().map(|w| self.word(w)).collect();
        quoted.join(&b' ')
    }

    /// One word as bash reads it back, with `$$` for the driver's pid in
    /// the names of its files.
    fn word(&self, word: &OsStr) -> Vec<u8> {
        let (word, mark) = (word.as_bytes(), self.mark.as_bytes());
        if word.is_empty() {
            return b"''".to_vec();
        }
        let mut out = Vec::new();
        let mut rest = word;
        while let Some(at) = rest.windows(mark.len()).position(|w| w == mark) {
            out.extend_from_slice(&quote(&rest[..at]));
            out.extend_from_slice(b"/.pbf-sort.$$.");
            rest = &rest[at + mark.len()..];
        }
        out.extend_from_slice(&quote(rest));
        out
    }
}

/// `bytes` as bash reads them back: as they are when every byte is one that
/// bash takes as a word's own and the word cannot be an assignment (`NAME=`
/// as a command's first word), else in single quotes.
fn quote(bytes: &[u8]) -> Vec<u8> {
    let plain = |b: &u8| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(b);
    let named = bytes
        .first()
        .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_');
    if bytes.iter().all(plain) && !(named && bytes.contains(&b'=')) {
        return bytes.to_vec();
    }
    let mut out = vec![b'\''];
    for &b in bytes {
        match b {
            b'\'' => out.extend_from_slice(b"'\\''"),
            _ => out.push(b),
        }
    }
    out.push(b'\'');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn script(fields: &[&str]) -> String {
        let bytes: Vec<u8> = fields
            .iter()
            .flat_map(|f| [f.as_bytes(), b"\0"].concat())
            .collect();
        let run = Run::parse(&bytes).expect("description");
        String::from_utf8(render(&run)).expect("utf-8")
    }

    /// What bash makes of `words` (one per line).
    fn bash_reads(words: &str) -> Vec<String> {
        let out = std::process::Command::new("bash")
            .args(["-c", &format!("printf '%s\\n' {words}")])
            .output()
            .expect("bash");
        let text = String::from_utf8(out.stdout).expect("utf-8");
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn a_word_reads_back_as_it_was() {
        let q = Quote {
            mark: "/.pbf-sort.77.".into(),
        };
        for word in [
            "plain/path.pbf",
            "a b",
            "it's",
            "$HOME",
            "--jobs=2",
            "*",
            "é",
            "!x",
        ] {
            let quoted = String::from_utf8(q.word(OsStr::new(word))).expect("utf-8");
            assert_eq!(bash_reads(&quoted), [word], "{quoted}");
        }
        assert_eq!(q.word(OsStr::new("")), b"''");
        assert_eq!(q.word(OsStr::new("x=1")), b"'x=1'");
        assert_eq!(q.word(OsStr::new("--jobs=2")), b"--jobs=2");
    }

    #[test]
    fn the_drivers_files_take_the_scripts_pid() {
        let q = Quote {
            mark: "/.pbf-sort.77.".into(),
        };
        let word = q.word(OsStr::new("/a b/.pbf-sort.77.stdin.osm.pbf"));
        assert_eq!(word, b"'/a b'/.pbf-sort.$$.stdin.osm.pbf");
        let pid = std::process::id();
        let read = bash_reads(&format!("{} $$", String::from_utf8(word).expect("utf-8")));
        assert_eq!(read[0], format!("/a b/.pbf-sort.{}.stdin.osm.pbf", read[1]));
        assert_ne!(read[1], pid.to_string(), "bash's own pid");
    }

    #[test]
    fn a_run_is_a_pipeline_of_its_stages() {
        let s = script(&[
            "driver_pid=9",
            "output=out.osm.pbf",
            "overwrite=0",
            "remove=/d/.pbf-sort.9.stdin.osm.pbf",
            "remove=/d/.pbf-sort.9.spool.pbf",
            "save=-",
            "to=/d/.pbf-sort.9.stdin.osm.pbf",
            "stdin=/d/.pbf-sort.9.stdin.osm.pbf",
            "keep_plan=",
            "stage=index",
            "name=pbf-index",
            "arg=pbf-index",
            "arg=-",
            "stage=copy",
            "name=my copier",
            "arg=pbf-copy",
            "arg=-o",
            "arg=out.osm.pbf",
        ]);
        let expected = "#!/usr/bin/env bash\n\
            # pbf-sort --dry-run: this run as a script\n\
            set -uo pipefail\n\
            fail() { echo \"pbf-sort: error: $*\" >&2; exit 1; }\n\
            [[ ! -t 0 ]] || { echo 'pbf-sort: error: standard input is a terminal; pipe a PBF \
            file into '\\''pbf-sort -'\\'' (see '\\''pbf-sort --help'\\'')' >&2; exit 2; }\n\
            [[ ! -e out.osm.pbf ]] || { echo 'pbf-sort: error: out.osm.pbf: exists (use \
            -O/--overwrite to replace it)' >&2; exit 2; }\n\
            files=(/d/.pbf-sort.$$.stdin.osm.pbf /d/.pbf-sort.$$.spool.pbf)\n\
            trap 'rm -f -- \"${files[@]}\"' EXIT\n\
            trap \"exit 130\" INT; trap \"exit 143\" TERM; trap \"exit 129\" HUP\n\
            cat -- - > /d/.pbf-sort.$$.stdin.osm.pbf || fail '-: cannot save it'\n\
            roles=(index copy)\n\
            names=(pbf-index 'my copier')\n\
            failed() { # each stage's exit status, in pipeline order\n    \
            local i c=-1 s=(\"$@\")\n    \
            for i in \"${!s[@]}\"; do\n        \
            ((s[i])) || continue; ((c >= 0)) || c=$i; ((s[i] == 141)) || { c=$i; break; }\n    \
            done\n    \
            ((c >= 0)) || return 0\n    \
            [[ ! -t 2 ]] || printf '\\r\\033[2K' >&2\n    \
            echo \"pbf-sort: error: ${roles[c]} stage '${names[c]}' failed (exit ${s[c]}); no \
            output was written\" >&2\n    \
            exit $((s[c] == 2 ? 2 : 1))\n\
            }\n\
            export PBF_SORT_DRIVER_PID=$$\n\
            pbf-index - < /d/.pbf-sort.$$.stdin.osm.pbf |\n    \
            pbf-copy -o out.osm.pbf\n\
            failed \"${PIPESTATUS[@]}\"\n";
        assert_eq!(s, expected);
    }

    #[test]
    fn a_kept_plan_is_made_and_an_overwrite_checks_nothing() {
        let s = script(&[
            "output=out.osm.pbf",
            "overwrite=1",
            "keep_plan=plans",
            "spool=/w/plans/spool.pbf",
            "stage=index",
            "arg=pbf-index",
        ]);
        assert!(!s.contains("[[ ! -e"), "{s}");
        assert!(s.contains("files=()\n"), "{s}");
        assert!(
            s.contains("mkdir -p -- plans || exit 2\nrm -f -- /w/plans/spool.pbf\n"),
            "{s}"
        );
        let to_stdout = script(&["output=-", "stage=copy", "arg=pbf-copy"]);
        assert!(!to_stdout.contains("[[ ! -e"), "{to_stdout}");
        assert!(to_stdout.contains("\"copy 141\" ]] ||\n"), "{to_stdout}");
        assert!(
            to_stdout.contains("what went to standard output is not a complete output"),
            "{to_stdout}"
        );
    }
}
