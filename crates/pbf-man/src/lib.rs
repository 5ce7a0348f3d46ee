//! The man pages of the tools and of the `pbf-sort` driver, generated so the
//! OPTIONS and SYNOPSIS sections can never drift from the flags a program
//! really accepts (uutils' `uudoc`, ripgrep's man template). Each page is a
//! hand-written roff template in `templates/` whose marker lines are replaced
//! by sections that `clap_mangen` renders from the program's `Command`:
//!
//! - `.\" @DESCRIPTION@`: `.SH DESCRIPTION` and the command's long help;
//! - `.\" @OPTIONS@`: `.SH OPTIONS` with every argument and flag, then a
//!   section for each help heading.
//!
//! The title, NAME and SYNOPSIS always open the page. The driver is a bash
//! script; its `Command` is `pbf_cli::driver::command`, which also gives its
//! help. `pbf-stream.5` (a file format) has no clap definition and is written
//! by hand in `man/`; [`HAND_WRITTEN`] names it for the lint test.
//!
//! The same definitions give the shell completions in `completions/`
//! ([`completions`]).
//!
//! To add a tool: add its crate to this crate's `Cargo.toml`, write
//! `templates/<tool>.1`, and add one line to [`TOOLS`].
#![deny(missing_docs)]

pub mod completions;

use clap::Command;
use clap_mangen::Man;

/// The [`Tool`] `name` whose `command()` is `command`, defined in `source`
/// (a tool crate's `src/lib.rs` by default), with `templates/<name>.1`.
macro_rules! tool {
    ($name:literal, $command:path) => {
        tool!($name, $command, concat!("tools/", $name, "/src/lib.rs"))
    };
    ($name:literal, $command:path, $source:expr) => {
        Tool {
            name: $name,
            command: $command,
            source: $source,
            template: include_str!(concat!("../templates/", $name, ".1")),
        }
    };
}

/// Every program with a generated page and completions: name, its clap
/// definition, where that lives, and its template.
pub const TOOLS: &[Tool] = &[
    tool!("pbf-index", pbf_index::command),
    tool!("pbf-overlap", pbf_overlap::command),
    tool!("pbf-merge", pbf_merge::command),
    tool!("pbf-copy", pbf_copy::command),
    tool!("pbf-reflink", pbf_reflink::command),
    tool!(
        "pbf-sort",
        pbf_cli::driver::command,
        "crates/pbf-cli/src/driver/mod.rs"
    ),
];

/// Pages in `man/` that are written by hand, not generated.
pub const HAND_WRITTEN: &[&str] = &["pbf-stream.5"];

/// The date in every generated page's title line. Bump it with the version
/// when a page changes in substance.
pub const DATE: &str = "2026-11-22";

/// The footer naming the package (`.TH` source).
const SOURCE: &str = concat!("pbf-sort ", env!("CARGO_PKG_VERSION"));

/// The manual's title (`.TH` manual).
const MANUAL: &str = "pbf-sort manual";

/// One tool with a generated page.
#[derive(Clone, Copy)]
pub struct Tool {
    /// Binary name, also the page name (`<name>.1`).
    pub name: &'static str,
    /// The tool's `command()`.
    pub command: fn() -> Command,
    /// The file holding that definition (named in each completion's header).
    pub source: &'static str,
    /// The hand-written part of the page, with marker lines.
    pub template: &'static str,
}

impl Tool {
    /// The page's file name.
    pub fn file_name(&self) -> String {
        format!("{}.1", self.name)
    }
}

/// The complete roff source of one tool's page; an error says which
/// template lacks a marker line or has it twice.
pub fn render_tool(t: &Tool) -> Result<String, String> {
    let man = Man::new((t.command)())
        .title(t.name.to_uppercase())
        .section("1")
        .date(DATE)
        .source(SOURCE)
        .manual(MANUAL);
    type Render = fn(&Man, &mut dyn std::io::Write) -> std::io::Result<()>;
    let section = |f: Render, first: bool| {
        let mut out = Vec::new();
        f(&man, &mut out).map_err(|e| format!("rendering failed: {e}"))?;
        Ok::<String, String>(tidy(&String::from_utf8_lossy(&out), first))
    };
    let mut page = section(Man::render_title, true)?;
    // No hyphenation: an option split at a line's end cannot be copied.
    page.push_str(".nh\n");
    page.push_str(&section(Man::render_name_section, false)?);
    page.push_str(&synopsis(&(t.command)()));
    let mut body = t.template.to_owned();
    let sections: [(&str, Render); 2] = [
        // The marker lines of the crate's documentation.
        (".\\\" @DESCRIPTION@", Man::render_description_section),
        (".\\\" @OPTIONS@", Man::render_options_section),
    ];
    for (marker, render) in sections {
        body = replace_marker(t.name, &body, marker, &section(render, false)?)?;
    }
    page.push_str(&body);
    Ok(page)
}

/// Replace the one line equal to `marker` in the template of `tool` by `text`.
fn replace_marker(tool: &str, template: &str, marker: &str, text: &str) -> Result<String, String> {
    let mut found = 0;
    let out = template.split_inclusive('\n').map(|line| {
        if line.trim_end() == marker {
            found += 1;
            text
        } else {
            line
        }
    });
    let out: String = out.collect();
    if found != 1 {
        return Err(format!(
            "template of {tool} must hold the line {marker:?} once"
        ));
    }
    Ok(out)
}

/// The SYNOPSIS section. `clap_mangen`'s own omits option values (`-j`
/// instead of `-j N`) and repetition (`FILE` instead of `FILE ...`), so it is
/// rendered here: short form when there is one, brackets unless required,
/// help and version left to OPTIONS, options under a heading of their own to
/// their section.
fn synopsis(cmd: &Command) -> String {
    let mut out = format!(".SH SYNOPSIS\n.B {}\n", escape(cmd.get_name()));
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        let apart = arg.get_help_heading().is_some();
        if arg.is_hide_set() || arg.is_positional() || apart || id == "help" || id == "version" {
            continue;
        }
        let flag = match (arg.get_short(), arg.get_long()) {
            (Some(s), _) => format!("\\-{s}"),
            (None, Some(l)) => format!("\\-\\-{}", escape(l)),
            (None, None) => continue,
        };
        let value = value_names(arg)
            .map(|v| format!(" \\fI{v}\\fR"))
            .unwrap_or_default();
        let text = format!("\\fB{flag}\\fR{value}");
        out.push_str(&bracketed(arg, text));
    }
    for arg in cmd.get_positionals().filter(|a| !a.is_hide_set()) {
        let name = value_names(arg).unwrap_or_else(|| escape(arg.get_id().as_str()));
        let many = if arg.get_num_args().is_some_and(|n| n.max_values() > 1) {
            "\\ ..."
        } else {
            ""
        };
        out.push_str(&bracketed(arg, format!("\\fI{name}\\fR{many}")));
    }
    out
}

/// One SYNOPSIS line: `text`, in brackets unless `arg` is required.
fn bracketed(arg: &clap::Arg, text: String) -> String {
    if arg.is_required_set() {
        format!("{text}\n")
    } else {
        format!("[{text}]\n")
    }
}

/// An argument's value names, escaped and joined, when it takes a value.
fn value_names(arg: &clap::Arg) -> Option<String> {
    if !arg.get_action().takes_values() {
        return None;
    }
    let names: Vec<String> = arg.get_value_names()?.iter().map(|n| escape(n)).collect();
    Some(names.join(" "))
}

/// Escape text for roff: hyphens become `\-` (a real minus, so flags can be
/// searched and copied), backslashes `\e`.
fn escape(s: &str) -> String {
    s.replace('\\', "\\e").replace('-', "\\-")
}

/// Longest text line before [`tidy`] breaks it (mandoc's style limit).
const MAX_TEXT_LINE: usize = 80;

/// Post-process `clap_mangen` output until `mandoc -Tlint` is clean (the
/// uutils `uudoc` approach): the `Aq` string definition it repeats before
/// every section is kept once, blank lines (paragraph breaks to roff), empty
/// paragraphs after a heading and repeated line breaks are dropped, and text lines longer than
/// 80 bytes are broken between words (roff refills them).
fn tidy(roff: &str, first: bool) -> String {
    let mut out = String::with_capacity(roff.len());
    let mut prev = "";
    for line in roff.lines() {
        let aq = line.starts_with(".ie \\n(.g .ds Aq") || line.starts_with(".el .ds Aq");
        if line.trim().is_empty() || (aq && !first) {
            continue;
        }
        let repeated_break = line == ".br" && prev == ".br";
        if repeated_break || (line == ".PP" && (prev.starts_with(".SH") || prev == ".PP")) {
            continue;
        }
        if line.starts_with('.') || line.len() <= MAX_TEXT_LINE {
            out.push_str(line.trim_end());
            out.push('\n');
        } else {
            wrap(line, &mut out);
        }
        prev = line;
    }
    out
}

/// Break a long text line at spaces into lines of at most [`MAX_TEXT_LINE`]
/// bytes where possible, never after an escaped space (`\ `). A piece that
/// would start with `.` or `'` (a roff control character) gets a `\&` guard.
fn wrap(line: &str, out: &mut String) {
    let mut current = String::new();
    for word in line.split(' ').filter(|w| !w.is_empty()) {
        let escaped_space = current.ends_with('\\');
        if !current.is_empty() && !escaped_space && current.len() + 1 + word.len() > MAX_TEXT_LINE {
            out.push_str(&current);
            out.push('\n');
            current.clear();
        }
        if current.is_empty() {
            if word.starts_with(['.', '\'']) {
                current.push_str("\\&");
            }
        } else {
            current.push(' ');
        }
        current.push_str(word);
    }
    if !current.is_empty() {
        out.push_str(&current);
        out.push('\n');
    }
}

/// Every generated page: (file name, roff source).
pub fn render_all() -> Result<Vec<(String, String)>, String> {
    TOOLS
        .iter()
        .map(|t| Ok((t.file_name(), render_tool(t)?)))
        .collect()
}
