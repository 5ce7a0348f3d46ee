//! The driver's clap `Command` (`pbf_cli::driver::command`, the source of
//! its help and completions) declares exactly the options the `pbf-sort`
//! script takes: the long options of its getopt `long=` list are the
//! `Command`'s, with values where getopt wants one, and getopt's short list
//! is the `Command`'s short forms; the values it offers for `--copier` and
//! `--compression` are ones the driver accepts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn script() -> String {
    std::fs::read_to_string(repo().join("pbf-sort")).expect("read the pbf-sort script")
}

/// What getopt parses: each long option of the `long=` / `long+=` lines of
/// `parse_args` and each letter of its short list after `-o`, with whether
/// it takes a value (a `:` after it).
struct Getopt {
    longs: BTreeMap<String, bool>,
    shorts: BTreeMap<char, bool>,
}

fn getopt() -> Getopt {
    let script = script();
    let mut longs = BTreeMap::new();
    let mut shorts = None;
    for line in script.lines().map(str::trim) {
        let list = line
            .strip_prefix("local long=")
            .or_else(|| line.strip_prefix("long+="));
        for l in list
            .into_iter()
            .flat_map(|l| l.split(','))
            .filter(|s| !s.is_empty())
        {
            let name = l.trim_end_matches(':');
            longs.insert(name.to_owned(), name.len() < l.len());
        }
        if line.contains("-l \"$long\"") {
            if let Some((_, rest)) = line.split_once(" -o ") {
                shorts = rest.split_whitespace().next().map(str::to_owned);
            }
        }
    }
    assert!(
        longs.len() > 10,
        "found only {longs:?} in the script's getopt long= list (parse_args)"
    );
    let shorts: Vec<char> = shorts
        .expect("the script's getopt short list (-o SPEC -l \"$long\")")
        .chars()
        .collect();
    let shorts = shorts
        .iter()
        .enumerate()
        .filter(|&(_, &c)| c != ':')
        .map(|(i, &c)| (c, shorts.get(i + 1) == Some(&':')))
        .collect();
    Getopt { longs, shorts }
}

/// The options of the driver's `Command` (help and version included): long
/// name, short form, whether it takes a value.
fn command_options() -> Vec<(String, Option<char>, bool)> {
    let mut cmd = pbf_cli::driver::command();
    cmd.build();
    cmd.get_arguments()
        .filter(|a| !a.is_positional())
        .map(|a| {
            let long = a
                .get_long()
                .unwrap_or_else(|| panic!("{} has no long form", a.get_id()));
            (
                long.to_owned(),
                a.get_short(),
                a.get_action().takes_values(),
            )
        })
        .collect()
}

#[test]
fn command_has_the_options_of_getopt() {
    let getopt = getopt();
    let command = command_options();
    let longs: BTreeMap<String, bool> = command
        .iter()
        .map(|(long, _, takes)| (long.clone(), *takes))
        .collect();
    assert_eq!(
        longs, getopt.longs,
        "driver::command() and the script's getopt long= list (name, takes a value)"
    );
    let shorts: BTreeMap<char, bool> = command
        .iter()
        .filter_map(|(_, short, takes)| Some(((*short)?, *takes)))
        .collect();
    assert_eq!(
        shorts, getopt.shorts,
        "driver::command()'s short forms and getopt's -o list (letter, takes a value)"
    );
    // getopt does not pair a letter with its long option: the script's
    // table does (long_of, the variable each option sets).
    let script = script();
    for (long, short, _) in &command {
        if let Some(s) = short {
            let pair = format!("[-{s}]=--{long}");
            assert!(
                script.contains(&pair),
                "-{s} is not --{long} in the script ({pair})"
            );
        }
    }
}

#[test]
fn command_takes_inputs_as_the_usage_line_says() {
    let cmd = pbf_cli::driver::command();
    let inputs: Vec<_> = cmd.get_positionals().collect();
    assert_eq!(inputs.len(), 1, "one positional, INPUT...");
    let input = inputs[0];
    assert_eq!(
        input.get_value_names().map(|n| n.join(" ")).as_deref(),
        Some("INPUT")
    );
    assert!(input.get_num_args().is_some_and(|n| n.max_values() > 1));
    assert!(
        pbf_cli::driver::help().contains("Usage: pbf-sort [OPTIONS] INPUT... -o OUTPUT"),
        "the usage line changed: check the positional of driver::command()"
    );
}

/// The values a completion offers for `--NAME`.
fn offered(long: &str) -> Vec<String> {
    let cmd = pbf_cli::driver::command();
    let arg = cmd
        .get_arguments()
        .find(|a| a.get_long() == Some(long))
        .unwrap_or_else(|| panic!("no --{long}"));
    arg.get_possible_values()
        .iter()
        .map(|v| v.get_name().to_owned())
        .collect()
}

/// Run the driver up to its option checks: with an input that does not
/// exist, a value it refuses ends the run at once, with a line naming the
/// option (`--NAME`); one it accepts goes on to the files, which the
/// toolkit's pbf-index judges ("no such file", or, where this test finds no
/// toolkit on PATH, that pbf-index is not found).
fn driver_refuses(long: &str, value: &str) -> Option<String> {
    let args = [format!("--{long}"), value.to_owned()];
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = Command::new("bash")
        .arg(repo().join("pbf-sort"))
        .args(&args)
        .arg(dir.path().join("missing.osm.pbf"))
        .arg("-o")
        .arg(dir.path().join("out.osm.pbf"))
        .output()
        .expect("run pbf-sort");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "pbf-sort {args:?}: {err}");
    err.contains(&format!("--{long}")).then_some(err)
}

#[test]
fn copier_values_are_the_drivers() {
    let values = offered("copier");
    assert_eq!(values, ["auto", "copy", "reflink"]);
    for v in &values {
        assert_eq!(
            driver_refuses("copier", v),
            None,
            "pbf-sort refuses --copier {v}"
        );
    }
    let refused = driver_refuses("copier", "clone").expect("pbf-sort takes --copier clone");
    assert!(refused.contains("--copier must be"), "{refused}");
}

/// The driver hands `--compression` to `pbf-merge --validate`: the values
/// offered are the forms its parser accepts, and every form it names when it
/// refuses a value ("expected none, zlib[:0-9], ...") is offered.
#[test]
fn compression_values_are_pbf_merges_forms() {
    let parse = |v: &str| {
        pbf_merge::command().try_get_matches_from(["pbf-merge", "--validate", "--compression", v])
    };
    let values = offered("compression");
    for v in &values {
        assert!(parse(v).is_ok(), "pbf-merge refuses --compression {v}");
    }
    let err = parse("bogus")
        .expect_err("pbf-merge takes --compression bogus")
        .to_string();
    let expected = err
        .split_once("expected ")
        .and_then(|(_, rest)| rest.split_once(')'))
        .map(|(list, _)| list.to_owned())
        .unwrap_or_else(|| panic!("pbf-merge names no expected forms: {err}"));
    let forms: Vec<String> = expected
        .split([',', ' '])
        .filter(|w| !w.is_empty() && *w != "or")
        .map(|w| w.split('[').next().unwrap_or(w).to_owned())
        .collect();
    assert!(forms.len() >= 4, "read {forms:?} from {err}");
    let mut sorted_forms = forms.clone();
    sorted_forms.sort();
    let mut sorted_values = values.clone();
    sorted_values.sort();
    assert_eq!(
        sorted_values, sorted_forms,
        "--compression values offered vs the forms pbf-merge names ({expected})"
    );
}
