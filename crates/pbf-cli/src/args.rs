//! Builders of the two shapes of option every tool defines, so a tool's
//! command line reads as a list of its options: a switch (`--NAME`), and an
//! option that takes a value (`--NAME VALUE`). Both are named by their long
//! name; anything else (a parser, a default, a conflict) chains on.

use clap::{Arg, ArgAction};

/// `--ID`: a switch, true when given.
pub fn flag(id: &'static str, help: &'static str) -> Arg {
    Arg::new(id).long(id).help(help).action(ArgAction::SetTrue)
}

/// `--ID VALUE`: an option that takes a value, shown as `value_name`.
pub fn option(id: &'static str, value_name: &'static str, help: &'static str) -> Arg {
    Arg::new(id).long(id).value_name(value_name).help(help)
}
