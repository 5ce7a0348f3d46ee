//! The committed shell completions are what the code generates (no drift),
//! every binary and the driver have one per shell, and they work: each bash
//! completion, loaded in bash, offers its command's options and the fixed
//! values and files of an option's argument; the fish ones do the same in
//! fish and the zsh ones parse in zsh, where those shells are installed
//! (neither is a dependency of the tests).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn dir() -> PathBuf {
    repo().join("completions")
}

#[test]
fn generated_completions_match_the_committed_ones() {
    let mut stale = Vec::new();
    for (name, text) in pbf_man::completions::render_all() {
        let committed = std::fs::read_to_string(dir().join(&name)).unwrap_or_default();
        if committed != text {
            stale.push(name);
        }
    }
    assert!(
        stale.is_empty(),
        "completions out of date: {stale:?}; run `make man` and commit the result"
    );
}

#[test]
fn every_program_has_a_completion_per_shell_and_nothing_else_is_there() {
    let generated: BTreeSet<String> = pbf_man::completions::render_all()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    let present: BTreeSet<String> = std::fs::read_dir(dir())
        .expect("completions/")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        present, generated,
        "completions/ holds exactly the generated files"
    );
    let programs: Vec<&str> = pbf_man::TOOLS.iter().map(|p| p.name).collect();
    assert!(
        programs.contains(&"pbf-sort"),
        "the driver has no completions"
    );
    for name in programs {
        for file in [
            format!("{name}.bash"),
            format!("_{name}"),
            format!("{name}.fish"),
        ] {
            assert!(generated.contains(&file), "no completions/{file}");
        }
    }
}

/// What the bash completion of `program` offers for the command line
/// `words` (the last word is the one being completed), run in `cwd`. The
/// function is the one the file registers for `program` (`complete -p`).
fn bash_complete(program: &str, words: &[&str], cwd: &Path) -> Vec<String> {
    const SCRIPT: &str = r#"
type compgen >/dev/null 2>&1 || {
    echo "this bash has no programmable completion (built without readline; nixpkgs: bashInteractive)" >&2
    exit 6
}
source "$1" || exit 3
name=$2
shift 2
spec=$(complete -p "$name") || { echo "no completion for $name" >&2; exit 4; }
[[ "$spec" =~ -F\ ([^ ]+) ]] || { echo "no function in: $spec" >&2; exit 5; }
COMP_WORDS=("$@")
COMP_CWORD=$(($# - 1))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
prev=""
((COMP_CWORD == 0)) || prev=${COMP_WORDS[COMP_CWORD - 1]}
# compopt, which only works while readline completes, may complain.
"${BASH_REMATCH[1]}" "$name" "${COMP_WORDS[COMP_CWORD]}" "$prev" 2>/dev/null
printf '%s\n' "${COMPREPLY[@]}"
"#;
    let file = dir().join(format!("{program}.bash"));
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c", SCRIPT, "bash"])
        .arg(&file)
        .arg(program)
        .args(words)
        .current_dir(cwd)
        .output()
        .expect("run bash");
    assert!(
        out.status.success(),
        "bash completion of {program} {words:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The `-x` and `--long` forms of every option of a program's `Command`.
fn option_words(program: &str) -> BTreeSet<String> {
    let p = pbf_man::TOOLS
        .iter()
        .find(|p| p.name == program)
        .expect("program");
    let mut cmd = (p.command)();
    cmd.build();
    let mut words = BTreeSet::new();
    for a in cmd.get_arguments().filter(|a| !a.is_positional()) {
        words.extend(a.get_short().map(|s| format!("-{s}")));
        words.extend(a.get_long().map(|l| format!("--{l}")));
        words.extend(
            a.get_visible_aliases()
                .into_iter()
                .flatten()
                .map(|l| format!("--{l}")),
        );
    }
    words
}

/// A directory with a file and a subdirectory to complete.
fn files() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary directory");
    std::fs::write(dir.path().join("in.osm.pbf"), b"").expect("file");
    std::fs::create_dir(dir.path().join("index-dir")).expect("directory");
    dir
}

#[test]
fn bash_offers_every_option_of_each_program() {
    let cwd = files();
    for p in pbf_man::TOOLS {
        let offered: BTreeSet<String> = bash_complete(p.name, &[p.name, "-"], cwd.path())
            .into_iter()
            .collect();
        assert_eq!(offered, option_words(p.name), "{} -<TAB>", p.name);
    }
}

#[test]
fn bash_completes_the_drivers_options_and_values() {
    let cwd = files();
    let c = |words: &[&str]| bash_complete("pbf-sort", words, cwd.path());
    assert_eq!(c(&["pbf-sort", "--comp"]), ["--compression"]);
    assert_eq!(
        c(&["pbf-sort", "--co"]),
        ["--compression", "--copier", "--copy-cmd"]
    );
    assert_eq!(
        c(&["pbf-sort", "in.osm.pbf", "--copier", ""]),
        ["auto", "copy", "reflink"]
    );
    assert_eq!(c(&["pbf-sort", "--copier", "re"]), ["reflink"]);
    assert_eq!(
        c(&["pbf-sort", "--compression", ""]),
        ["zlib", "zstd", "lz4", "none"]
    );
    assert_eq!(c(&["pbf-sort", "--compression", "z"]), ["zlib", "zstd"]);
    // -o and --output complete file names; -j a number, not a file.
    assert_eq!(c(&["pbf-sort", "-o", "in."]), ["in.osm.pbf"]);
    let mut both = c(&["pbf-sort", "--output", "i"]);
    both.sort();
    assert_eq!(both, ["in.osm.pbf", "index-dir"]);
    assert_eq!(c(&["pbf-sort", "-j", "i"]), ["i"]);
}

#[test]
fn bash_completes_a_tools_options_and_values() {
    let cwd = files();
    let c = |words: &[&str]| bash_complete("pbf-index", words, cwd.path());
    assert_eq!(c(&["pbf-index", "--tr"]), ["--trust-indexdata"]);
    assert_eq!(c(&["pbf-index", "--io", ""]), ["pread", "uring"]);
    assert_eq!(c(&["pbf-index", "--trust-indexdata", ""]), ["pbfhogg"]);
    let c = |words: &[&str]| bash_complete("pbf-merge", words, cwd.path());
    assert_eq!(c(&["pbf-merge", "--comp"]), ["--compression"]);
    assert_eq!(c(&["pbf-merge", "--spool", "in."]), ["in.osm.pbf"]);
}

/// `--compression` (`--recompress` in pbf-copy) completes the codec names,
/// as `--compression z` and as `--compression=z`, which bash splits into
/// the words `--compression`, `=` and `z` (`=` is in `COMP_WORDBREAKS`):
/// the words below are as bash hands them to the completion.
#[test]
fn bash_completes_compression_values_after_a_space_and_after_equals() {
    let cwd = files();
    let all = ["zlib", "zstd", "lz4", "none"];
    for (program, option) in [
        ("pbf-sort", "--compression"),
        ("pbf-merge", "--compression"),
        ("pbf-copy", "--recompress"),
    ] {
        let c = |words: &[&str]| bash_complete(program, words, cwd.path());
        assert_eq!(c(&[program, option, ""]), all, "{program} {option} <TAB>");
        assert_eq!(c(&[program, option, "z"]), ["zlib", "zstd"], "{option} z");
        assert_eq!(c(&[program, option, "="]), all, "{option}=<TAB>");
        assert_eq!(
            c(&[program, option, "=", "z"]),
            ["zlib", "zstd"],
            "{option}=z"
        );
        assert_eq!(c(&[program, option, "=", "l"]), ["lz4"], "{option}=l");
    }
    // Other options with a value after '=' complete as after a space.
    let c = |words: &[&str]| bash_complete("pbf-sort", words, cwd.path());
    assert_eq!(c(&["pbf-sort", "--copier", "=", "re"]), ["reflink"]);
    assert_eq!(c(&["pbf-sort", "--output", "=", "in."]), ["in.osm.pbf"]);
}

fn installed(shell: &str) -> bool {
    let found = Command::new(shell)
        .args(["-c", "exit 0"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        eprintln!("{shell} is not installed: its completions are not run");
    }
    found
}

#[test]
fn zsh_completions_parse() {
    if !installed("zsh") {
        return;
    }
    for p in pbf_man::TOOLS {
        let file = dir().join(format!("_{}", p.name));
        let out = Command::new("zsh")
            .arg("-n")
            .arg(&file)
            .output()
            .expect("run zsh");
        assert!(
            out.status.success(),
            "zsh -n {}: {}",
            file.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn fish_completes_the_drivers_values() {
    if !installed("fish") {
        return;
    }
    let cwd = files();
    let complete = |line: &str| {
        let script = format!(
            "source {}; complete -C '{line}'",
            dir()
                .join(format!("{}.fish", line.split(' ').next().unwrap_or(line)))
                .display()
        );
        let out = Command::new("fish")
            .args(["--no-config", "-c", &script])
            .current_dir(cwd.path())
            .output()
            .expect("run fish");
        assert!(
            out.status.success(),
            "fish: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.split('\t').next().unwrap_or(l).to_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(complete("pbf-sort --comp"), ["--compression"]);
    assert_eq!(complete("pbf-sort --compression z"), ["zlib", "zstd"]);
    assert_eq!(
        complete("pbf-sort --compression=z"),
        ["--compression=zlib", "--compression=zstd"]
    );
    assert_eq!(
        complete("pbf-merge --compression=z"),
        ["--compression=zlib", "--compression=zstd"]
    );
    assert_eq!(complete("pbf-copy --recompress l"), ["lz4"]);
    assert_eq!(complete("pbf-sort --copier "), ["auto", "copy", "reflink"]);
    assert_eq!(complete("pbf-sort --keep-plan "), ["index-dir/"]);
    for p in pbf_man::TOOLS {
        let file = dir().join(format!("{}.fish", p.name));
        let out = Command::new("fish")
            .args(["--no-config", "-n"])
            .arg(&file)
            .output()
            .expect("run fish");
        assert!(out.status.success(), "fish -n {}", file.display());
    }
}
