#!/usr/bin/env bash
# Run every fuzz target for SECONDS each (default 30) and print how many
# inputs each executed. cargo fuzz needs nightly flags (-Z sanitizer=...);
# stable rustc accepts them with RUSTC_BOOTSTRAP=1, set here. The corpora
# (fuzz/corpus/TARGET, or $PBF_SORT_FUZZ_CORPUS) are seeded from the real
# files by seed.py on first use and grow across runs. A crash fails the run
# (exit 1) and leaves the input in fuzz/artifacts/TARGET/: turn it into a
# unit test next to the code it broke.
set -euo pipefail
cd "$(dirname "$0")"
secs=${1:-30}
targets=(frame blob block scan streams)
command -v cargo-fuzz >/dev/null || {
    echo "fuzz: cargo-fuzz is not installed (cargo install cargo-fuzz)" >&2
    exit 1
}
export RUSTC_BOOTSTRAP=1
corpus=${PBF_SORT_FUZZ_CORPUS:-corpus}
[[ -d "$corpus/frame" ]] || python3 seed.py "$corpus" ../target/debug
cargo fuzz build -O >/dev/null
for t in "${targets[@]}"; do
    mkdir -p "$corpus/$t"
    log=$(mktemp)
    rc=0
    cargo fuzz run -O "$t" "$corpus/$t" -- -max_total_time="$secs" -rss_limit_mb=2560 \
        -max_len=262144 -timeout=20 -print_final_stats=1 >"$log" 2>&1 || rc=$?
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
    if ((rc != 0)); then
        tail -40 "$log" >&2
        echo "fuzz: $t FAILED after $execs executions (exit $rc); input in fuzz/artifacts/$t/" >&2
        rm -f "$log"
        exit 1
    fi
    echo "fuzz: $t: $execs executions in ${secs}s, $cov, no crash"
    rm -f "$log"
done
