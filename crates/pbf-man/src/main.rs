//! `cargo run -p pbf-man -- man/ --completions completions/` (`make man`)
//! regenerates the generated man pages in `man/` and every shell completion in
//! `completions/`; with `--check` it writes nothing and fails when a
//! committed file differs from what the code would generate (the drift tests
//! do the same).
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "Usage: pbf-man [--check] [MAN_DIR] [--completions DIR]";

fn main() -> ExitCode {
    let mut check = false;
    let mut man = None;
    let mut completions = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--check" => check = true,
            "--completions" => match args.next() {
                Some(dir) => completions = Some(PathBuf::from(dir)),
                None => return usage("--completions needs a DIR"),
            },
            "-h" | "--help" => {
                println!(
                    "{USAGE}\n\nWrite the generated man pages into MAN_DIR and the shell completions \
                     into DIR (or, with --check, fail when they differ)."
                );
                return ExitCode::SUCCESS;
            }
            _ if man.is_none() && !arg.starts_with('-') => man = Some(PathBuf::from(arg)),
            _ => return usage(&format!("unexpected argument '{arg}'")),
        }
    }
    if man.is_none() && completions.is_none() {
        return usage("no MAN_DIR and no --completions DIR given");
    }
    match write(man, completions, check) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("pbf-man: error: {e}");
            ExitCode::from(1)
        }
    }
}

/// Write (or with `check` compare) the pages in `man` and the completions
/// in `completions`; false when `check` found a difference.
fn write(man: Option<PathBuf>, completions: Option<PathBuf>, check: bool) -> Result<bool, String> {
    let mut same = true;
    if let Some(dir) = man {
        same &= run(&dir, pbf_man::render_all()?, check)?;
    }
    if let Some(dir) = completions {
        same &= run(&dir, pbf_man::completions::render_all(), check)?;
    }
    Ok(same)
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("pbf-man: {msg}\n{USAGE}");
    ExitCode::from(2)
}

/// Write or compare every file in `dir`; false when `check` found a difference.
fn run(dir: &Path, files: Vec<(String, String)>, check: bool) -> Result<bool, String> {
    let mut same = true;
    for (name, text) in files {
        let path = dir.join(&name);
        let old = std::fs::read_to_string(&path).ok();
        if old.as_deref() == Some(text.as_str()) {
            continue;
        }
        if check {
            eprintln!("pbf-man: {} is out of date; run: make man", path.display());
            same = false;
        } else {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!("pbf-man: wrote {}", path.display());
        }
    }
    Ok(same)
}
