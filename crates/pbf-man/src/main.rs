//! `cargo run -p pbf-man -- man/` regenerates the tools' man pages in `man/`;
//! with `--check` it writes nothing and fails when a committed page differs
//! from what the code would generate (the drift test does the same).
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut check = false;
    let mut dir = None;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--check" => check = true,
            "-h" | "--help" => {
                println!(
                    "Usage: pbf-man [--check] DIR\n\nWrite the generated man pages into DIR (or, with --check, fail when they differ)."
                );
                return ExitCode::SUCCESS;
            }
            _ if dir.is_none() && !arg.starts_with('-') => dir = Some(PathBuf::from(arg)),
            _ => return usage(&format!("unexpected argument '{arg}'")),
        }
    }
    let Some(dir) = dir else {
        return usage("no DIR given");
    };
    match run(&dir, check) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("pbf-man: error: {e}");
            ExitCode::from(1)
        }
    }
}

fn usage(msg: &str) -> ExitCode {
    eprintln!("pbf-man: {msg}\nUsage: pbf-man [--check] DIR");
    ExitCode::from(2)
}

/// Write or compare every page; false when `check` found a difference.
fn run(dir: &Path, check: bool) -> Result<bool, Box<dyn std::error::Error>> {
    let mut same = true;
    for (name, page) in pbf_man::render_all()? {
        let path = dir.join(&name);
        let old = std::fs::read_to_string(&path).ok();
        if old.as_deref() == Some(page.as_str()) {
            continue;
        }
        if check {
            eprintln!(
                "pbf-man: {} is out of date; run: cargo run -p pbf-man -- man/",
                path.display()
            );
            same = false;
        } else {
            std::fs::write(&path, page).map_err(|e| format!("{}: {e}", path.display()))?;
            eprintln!("pbf-man: wrote {}", path.display());
        }
    }
    Ok(same)
}
