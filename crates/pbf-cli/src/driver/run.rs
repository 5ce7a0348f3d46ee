//! The driver's description of its run: what only `pbf-sort` knows of it,
//! read by [`super::summary`] (the `--summary-json` object).
//!
//! The driver is a bash script, which can write any word it holds but no
//! JSON, so it describes the run as NUL-terminated `NAME=VALUE` fields (the
//! format of `/proc/PID/environ`, which holds any path), an empty value
//! standing for one it did not learn. For the summary, the run's fields
//! come first:
//!
//! - `exit`: the run's status; `started`: when it started, in microseconds
//!   since the epoch; `failed_stage`: the role of the stage named as the
//!   cause of a failure;
//! - `output` as given to `-o`; `committed`: 1 once the copier put the
//!   output in place; `copier`: the copy stage's program;
//! - per input, `input` (as given) followed by `file` (the file read for
//!   it: the saved copy of standard input or of a pipe).
//!
//! Then each stage of the pipeline in order, from a `stage` field naming its
//! role (`index`, `planning`, `merge`, `copy`, or `--keep-plan` for a `tee`
//! that keeps a stream) to the next: its `pid`, `exit`, `ended` (in
//! microseconds since the epoch) and its command, one `arg` per word.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};

/// A run as the driver described it.
#[derive(Debug, Default)]
pub struct Run {
    /// The fields before the first stage.
    pub fields: Fields,
    /// Each stage's fields, in pipeline order.
    pub stages: Vec<Fields>,
}

impl Run {
    /// The description in the file at `path`.
    pub fn read(path: &Path) -> Result<Run> {
        let bytes = std::fs::read(path).with_context(|| format!("{}", path.display()))?;
        Run::parse(&bytes).with_context(|| format!("{}", path.display()))
    }

    /// The description in `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<Run> {
        let mut run = Run::default();
        for field in bytes.split(|&b| b == 0).filter(|f| !f.is_empty()) {
            let Some(eq) = field.iter().position(|&b| b == b'=') else {
                bail!("a field without '=': {:?}", String::from_utf8_lossy(field));
            };
            let name = String::from_utf8_lossy(&field[..eq]).into_owned();
            let value = OsStr::from_bytes(&field[eq + 1..]).to_owned();
            if name == "stage" {
                run.stages.push(Fields::default());
            }
            let fields = run.stages.last_mut().unwrap_or(&mut run.fields);
            fields.0.push((name, value));
        }
        Ok(run)
    }
}

/// Fields in the order written.
#[derive(Debug, Default)]
pub struct Fields(Vec<(String, OsString)>);

impl Fields {
    /// The last value of `name`, unless empty (not learnt).
    pub fn get(&self, name: &str) -> Option<&OsStr> {
        let value = self.0.iter().rev().find(|(n, _)| n == name)?;
        Some(value.1.as_os_str()).filter(|v| !v.is_empty())
    }

    /// [`Fields::get`] as text (a byte that is no UTF-8 replaced).
    pub fn text(&self, name: &str) -> Option<String> {
        self.get(name).map(|v| v.to_string_lossy().into_owned())
    }

    /// Every value of `name`, in order.
    pub fn all(&self, name: &str) -> Vec<&OsStr> {
        let values = self.0.iter().filter(|(n, _)| n == name);
        values.map(|(_, v)| v.as_os_str()).collect()
    }

    /// True when `name` is 1.
    pub fn flag(&self, name: &str) -> bool {
        self.get(name) == Some(OsStr::new("1"))
    }

    /// The number `name` holds, if it was learnt.
    pub fn number(&self, name: &str) -> Result<Option<u64>> {
        let parse = |v: String| v.parse().map_err(|_| anyhow!("{name}={v}: not a number"));
        self.text(name).map(parse).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runs_fields_come_before_its_stages() {
        let bytes = b"exit=0\0output=a=b.pbf\0input=x\0input=\0stage=index\0exit=1\0arg=p\0\
                      arg=\0stage=copy\0pid=\0";
        let run = Run::parse(bytes).expect("parse");
        assert_eq!(run.fields.number("exit").expect("n"), Some(0));
        assert_eq!(run.fields.text("output").as_deref(), Some("a=b.pbf"));
        assert_eq!(run.fields.all("input"), [OsStr::new("x"), OsStr::new("")]);
        assert_eq!(run.stages.len(), 2);
        assert_eq!(run.stages[0].text("stage").as_deref(), Some("index"));
        assert_eq!(run.stages[0].number("exit").expect("n"), Some(1));
        assert_eq!(run.stages[0].all("arg"), [OsStr::new("p"), OsStr::new("")]);
        assert_eq!(run.stages[1].get("pid"), None, "empty: not learnt");
        assert!(!run.fields.flag("committed"));
    }

    #[test]
    fn a_field_is_a_name_and_a_value() {
        assert!(Run::parse(b"exit=0\0no equals sign\0").is_err());
        let run = Run::parse(b"exit=x\0").expect("parse");
        assert!(run.fields.number("exit").is_err());
        // Any byte but NUL is a value's.
        let run = Run::parse(b"output=\xff\n\0").expect("parse");
        assert_eq!(
            run.fields.get("output").map(OsStr::as_bytes),
            Some(&b"\xff\n"[..])
        );
    }
}
