//! The driver's clap `Command` (`pbf_man::driver::command`, the source of
//! its completions) declares exactly the options the `pbf-sort` script takes:
//! the long options of its getopt `long=` list and of its `--help` text are
//! the `Command`'s, with the same short forms (getopt's short list), value
//! names (`--help`) and values where getopt wants one; and the values it
//! offers for `--copier` and `--compression` are ones the driver accepts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn script() -> String {
    std::fs::read_to_string(repo().join("pbf-sort")).expect("read the pbf-sort script")
}

/// One option as a source describes it: its short form and its value name
/// (`Some("")` where the source says only that it takes a value).
#[derive(Debug, PartialEq, Eq, Clone)]
struct Opt {
    short: Option<char>,
    value: Option<String>,
}

/// The options getopt parses: the `long=` / `long+=` lines of `parse_args`
/// (a trailing `:` takes a value) and the short list after `-o`.
fn getopt_options() -> BTreeMap<String, Opt> {
    let script = script();
    let mut longs = Vec::new();
    let mut shorts = None;
    for line in script.lines().map(str::trim) {
        let list = line
            .strip_prefix("local long=")
            .or_else(|| line.strip_prefix("long+="));
        if let Some(list) = list {
            longs.extend(list.split(',').filter(|s| !s.is_empty()).map(str::to_owned));
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
    let shorts = shorts.expect("the script's getopt short list (-o SPEC -l \"$long\")");
    // Short options: a letter, ':' after it when it takes a value.
    let mut short_values = BTreeMap::new();
    let chars: Vec<char> = shorts.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c != ':' {
            short_values.insert(c, chars.get(i + 1) == Some(&':'));
        }
    }
    // getopt does not say which short belongs to which long: the --help
    // text does; here a short counts when the help pairs it with a long.
    let help = help_options();
    let mut out = BTreeMap::new();
    for l in longs {
        let (name, takes) = match l.strip_suffix(':') {
            Some(n) => (n.to_owned(), true),
            None => (l.clone(), false),
        };
        let short = help.get(&name).and_then(|o| o.short);
        if let Some(s) = short {
            let short_takes = short_values
                .remove(&s)
                .unwrap_or_else(|| panic!("-{s} (--{name} in --help) is not in getopt's -o list"));
            assert_eq!(
                short_takes, takes,
                "getopt: -{s} and --{name} disagree on taking a value"
            );
        }
        out.insert(
            name,
            Opt {
                short,
                value: takes.then(String::new),
            },
        );
    }
    assert!(
        short_values.is_empty(),
        "getopt's -o list has short options that --help pairs with no long one: {short_values:?}"
    );
    out
}

/// The options `pbf-sort --help` lists: lines in the option column,
/// `  -o, --output FILE  text` or `      --dedupe  text`.
fn help_options() -> BTreeMap<String, Opt> {
    let out = Command::new("bash")
        .arg(repo().join("pbf-sort"))
        .arg("--help")
        .output()
        .expect("run pbf-sort --help");
    assert!(out.status.success(), "pbf-sort --help failed");
    let help = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut opts = BTreeMap::new();
    for line in help.lines() {
        let indent = line.len() - line.trim_start().len();
        let rest = line.trim_start();
        if !(2..=6).contains(&indent) || !rest.starts_with('-') {
            continue;
        }
        let mut words = rest.split_whitespace().peekable();
        let mut short = None;
        if let Some(w) = words.next_if(|w| !w.starts_with("--")) {
            let s = w.trim_end_matches(',');
            assert!(s.len() == 2, "--help: cannot read the option line {line:?}");
            short = s.chars().nth(1);
        }
        let long = words
            .next()
            .and_then(|w| w.strip_prefix("--"))
            .unwrap_or_else(|| panic!("--help: no long option on the line {line:?}"));
        // A value name is the word after the option, in capitals, before the
        // two spaces that start the description.
        let head = rest.split("  ").next().unwrap_or(rest);
        let value = head
            .split_whitespace()
            .last()
            .filter(|w| w.chars().all(|c| c.is_ascii_uppercase()))
            .map(str::to_owned);
        opts.insert(long.to_owned(), Opt { short, value });
    }
    assert!(
        opts.len() > 10,
        "found only {opts:?} in pbf-sort --help's option lines"
    );
    opts
}

/// The options of the driver's `Command` (help and version included).
fn command_options() -> BTreeMap<String, Opt> {
    let mut cmd = pbf_man::driver::command();
    cmd.build();
    cmd.get_arguments()
        .filter(|a| !a.is_positional())
        .map(|a| {
            let long = a
                .get_long()
                .unwrap_or_else(|| panic!("{} has no long form", a.get_id()));
            let value = a
                .get_action()
                .takes_values()
                .then(|| a.get_value_names().map(|n| n.join(" ")).unwrap_or_default());
            (
                long.to_owned(),
                Opt {
                    short: a.get_short(),
                    value,
                },
            )
        })
        .collect()
}

fn names(m: &BTreeMap<String, Opt>) -> Vec<&str> {
    m.keys().map(String::as_str).collect()
}

#[test]
fn command_has_the_long_options_of_getopt_and_help() {
    let command = command_options();
    let getopt = getopt_options();
    let help = help_options();
    assert_eq!(
        names(&command),
        names(&getopt),
        "driver::command() and the script's getopt long= list"
    );
    assert_eq!(
        names(&command),
        names(&help),
        "driver::command() and pbf-sort --help"
    );
}

#[test]
fn command_has_the_short_forms_and_values_of_the_script() {
    let getopt = getopt_options();
    let help = help_options();
    for (long, c) in command_options() {
        let h = help
            .get(&long)
            .unwrap_or_else(|| panic!("--{long} not in --help"));
        assert_eq!(c, *h, "--{long}: driver::command() and pbf-sort --help");
        let g = getopt
            .get(&long)
            .unwrap_or_else(|| panic!("--{long} not in getopt"));
        assert_eq!(
            (c.short, c.value.is_some()),
            (g.short, g.value.is_some()),
            "--{long}: driver::command() and getopt (short form, takes a value)"
        );
    }
}

#[test]
fn command_takes_inputs_as_the_usage_line_says() {
    let cmd = pbf_man::driver::command();
    let inputs: Vec<_> = cmd.get_positionals().collect();
    assert_eq!(inputs.len(), 1, "one positional, INPUT...");
    let input = inputs[0];
    assert_eq!(
        input.get_value_names().map(|n| n.join(" ")).as_deref(),
        Some("INPUT")
    );
    assert!(input.get_num_args().is_some_and(|n| n.max_values() > 1));
    assert!(
        script().contains("Usage: pbf-sort [OPTIONS] INPUT... -o OUTPUT"),
        "the usage line changed: check the positional of driver::command()"
    );
}

/// The values a completion offers for `--NAME`.
fn offered(long: &str) -> Vec<String> {
    let cmd = pbf_man::driver::command();
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
/// exist, a value it accepts ends at "no such file", one it refuses earlier.
fn driver_refuses(args: &[&str]) -> Option<String> {
    let dir = tempfile::tempdir().expect("temporary directory");
    let out = Command::new("bash")
        .arg(repo().join("pbf-sort"))
        .args(args)
        .arg(dir.path().join("missing.osm.pbf"))
        .arg("-o")
        .arg(dir.path().join("out.osm.pbf"))
        .output()
        .expect("run pbf-sort");
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "pbf-sort {args:?}: {err}");
    (!err.contains("missing.osm.pbf: no such file")).then_some(err)
}

#[test]
fn copier_values_are_the_drivers() {
    let values = offered("copier");
    assert_eq!(values, ["auto", "copy", "reflink"]);
    for v in &values {
        assert_eq!(
            driver_refuses(&["--copier", v]),
            None,
            "pbf-sort refuses --copier {v}"
        );
    }
    let refused = driver_refuses(&["--copier", "clone"]).expect("pbf-sort takes --copier clone");
    assert!(refused.contains("--copier"), "{refused}");
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
