//! The generators behind `pbf-gen` (`src/main.rs` holds its command line):
//! large benchmark inputs built from the small real extracts of
//! `tests/fixtures/`. A library too, so the end-to-end tests build their
//! permuted inputs with the same code and the same seeded generator.

pub mod encode;
pub mod frames;
pub mod history;
pub mod input;
pub mod output;
pub mod rng;
pub mod shift;
pub mod shuffle;
pub mod tile;
