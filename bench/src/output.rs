//! The generators' output is the product's: `pbf_output::OutputFile` (a
//! temporary file beside the target, fsynced and renamed only when complete,
//! removed on an error or signal), so an interrupted generator never leaves a
//! short file that a later benchmark would time. A generator replaces an
//! existing output, as a rerun of `bench/run.sh` needs, but never an input.

use std::path::{Path, PathBuf};

use anyhow::Result;
use pbf_output::{OutputFile, OutputOptions};

/// Start writing `out`, which must not be one of `inputs`.
pub fn create(out: &Path, inputs: &[PathBuf]) -> Result<OutputFile> {
    let opts = OutputOptions {
        overwrite: true,
        inputs: inputs.to_vec(),
        temp_dir: None,
    };
    Ok(OutputFile::create(out, &opts)?)
}

/// Commit the output; returns its length.
pub fn finish(output: OutputFile) -> Result<u64> {
    let written = output.position();
    output.commit()?;
    Ok(written)
}
