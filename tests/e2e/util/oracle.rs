//! The oracle: what osmium says of a file (its objects as OPL, its
//! fileinfo, whether they are ordered), and the checks built on it.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::util::{bin, osmium, run_with_input, succeeds};

/// `osmium cat -f opl` of a file.
pub fn opl(path: &Path) -> String {
    let mut c = osmium();
    c.args(["cat", "-f", "opl"]).arg(path);
    String::from_utf8(succeeds(c)).expect("opl is UTF-8")
}

/// `osmium fileinfo -e -j` of a file, parsed.
pub fn fileinfo(path: &Path) -> serde_json::Value {
    let mut c = osmium();
    c.args(["fileinfo", "-e", "-j"]).arg(path);
    serde_json::from_slice(&succeeds(c)).expect("fileinfo JSON")
}

/// Whether `osmium fileinfo -e` says the objects of `path` are ordered.
pub fn osmium_ordered(path: &Path) -> bool {
    fileinfo(path)["data"]["objects_ordered"]
        .as_bool()
        .expect("objects_ordered")
}

/// `osmium sort` of the inputs, as OPL. Written as OPL directly: osmium's PBF
/// writer drops `visible=false` (the deleted flag of history objects) when
/// the output's header lacks HistoricalInformation; its OPL writer keeps what
/// it read.
pub fn osmium_sorted_opl(inputs: &[&Path], dir: &Path) -> String {
    let out = dir.join("osmium-sorted.opl");
    let mut c = osmium();
    c.arg("sort").args(inputs).arg("-o").arg(&out).arg("-O");
    succeeds(c);
    std::fs::read_to_string(&out).expect("read osmium OPL")
}

/// Check that `out` holds the objects `osmium sort` makes of `inputs`, that
/// osmium finds them ordered and the header says Sort.Type_then_ID; returns
/// osmium's fileinfo of `out`.
pub fn assert_sorted_like_osmium(
    out: &Path,
    inputs: &[&Path],
    dir: &Path,
    what: &str,
) -> serde_json::Value {
    assert_eq!(
        opl(out),
        osmium_sorted_opl(inputs, dir),
        "{what}: objects differ from osmium sort"
    );
    let info = fileinfo(out);
    assert_eq!(
        info["data"]["objects_ordered"],
        serde_json::Value::Bool(true),
        "{what}: not ordered"
    );
    let sorting = &info["header"]["option"]["sorting"];
    assert_eq!(
        sorting.as_str(),
        Some("Type_then_ID"),
        "{what}: header lacks Sort.Type_then_ID"
    );
    info
}

/// Is `out` a sorted PBF file? osmium's answer when osmium reads `input`;
/// when even osmium refuses the (corrupt) input, our own index of the output
/// must pass `pbf-overlap --check` (the output is as readable as the input).
pub fn output_is_sorted(out: &Path, input: &Path) -> Result<(), String> {
    let osmium_reads = |p: &Path| {
        Command::new("osmium")
            .args(["fileinfo", "-e", "-j"])
            .arg(p)
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
    };
    if osmium_reads(input).is_some() {
        let info = osmium_reads(out).ok_or("osmium cannot read the output")?;
        return match info["data"]["objects_ordered"].as_bool() {
            Some(true) => Ok(()),
            _ => Err(format!("osmium: output not ordered: {}", info["data"])),
        };
    }
    let index = Command::new(env!("CARGO_BIN_EXE_pbf-index"))
        .arg("-q")
        .arg(out)
        .output()
        .map_err(|e| e.to_string())?;
    if !index.status.success() {
        return Err(format!(
            "pbf-index of the output: {}",
            String::from_utf8_lossy(&index.stderr)
        ));
    }
    let mut c = bin("pbf-overlap");
    c.arg("--check");
    let o = run_with_input(c, &index.stdout);
    if !o.status.success() {
        return Err(format!(
            "pbf-overlap --check: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    Ok(())
}
