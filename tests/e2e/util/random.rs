//! What the randomised tests draw from: bench's seeded generator (the one
//! `pbf-gen` shuffles and permutes with), so every case is reproducible from
//! its seed, and the seeds and budgets the environment may set.

pub use pbf_bench_gen::rng::Rng;

/// A seed or budget from the environment variable `var`, else `default`.
pub fn env_budget(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
