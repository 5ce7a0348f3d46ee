#!/usr/bin/env bash
# bench/cores.sh: how the sort scales with cores. Generates the bench's
# sorted, interleaved and small-blob inputs in DIR with target/release/pbf-gen
# (bench/run.sh's input_for, so the same files `make bench` sorts), then runs
# `pbf-sort -q -O -j N` on each (and `pbf-index -j N` alone on the sorted one)
# at every N under /usr/bin/time -v, `osmium sort` once on the interleaved and
# small-blob inputs when osmium is on PATH, and prints a markdown table: wall
# seconds, peak RSS and, where the input is merged, the available
# parallelism that `pbf-merge -vv -j N` reports for it, and the sorted input's
# copy floor (`pbf-gen copy`: copy_file_range and fsync). With CORES_BASE, the
# driver and tools of another build run beside them, alternating, on the same
# inputs. Needs only the release binaries (target/release), the repository's
# files and GNU time or python3.
set -euo pipefail

usage() {
    cat <<'USAGE'
Usage: bench/cores.sh DIR

Environment (sizes as bench/run.sh takes them):
  CORES_JOBS             thread counts [2 4 8 16]
  CORES_SHAPES           inputs to run [sorted interleaved smallblobs]
  CORES_SORTED_SIZE      sorted input [1G]
  CORES_INTERLEAVED_SIZE interleaved input [1G]
  CORES_SMALLBLOB_SIZE   small-blob input [180M]
  CORES_OSMIUM           0: no osmium run [1 when osmium is on PATH]
  CORES_BASE             a directory holding another build's pbf-sort and
                         tools: each pbf-sort row is run with it too (rows
                         "base"), alternating with this build's
  CORES_BASE_JOBS        thread counts of those base runs [2 16]
  CORES_REPEATS          runs of each pbf-sort cell, alternating [1]
USAGE
}

[[ ${1:-} == -h || ${1:-} == --help ]] && { usage; exit 0; }
[[ $# -eq 1 ]] || { usage >&2; exit 2; }
dir=$(mkdir -p "$1" && cd "$1" && pwd)
JOBS=${CORES_JOBS:-2 4 8 16}
export BENCH_DATA=$dir
# bench/run.sh defines input_for and its settings; sourced, it runs nothing.
set --
# shellcheck source=bench/run.sh
. "$(dirname "${BASH_SOURCE[0]}")/run.sh"
mkdir -p "$WORK" "$OUT"
[[ -x $GEN && -x $REL/pbf-merge ]] || die "build the release binaries first (cargo build --release)"
export PATH=$REL:$PATH
TIME=/usr/bin/time
[[ -x $TIME ]] || have python3 || die "neither GNU time ($TIME) nor python3 is here"
osmium_too=${CORES_OSMIUM:-1}
have osmium || osmium_too=0

# GNU time's -v report of CMD in FILE, from python3 where GNU time is missing
# (its wall clock and its children's peak RSS, in the lines awk reads below).
time_v() { # FILE CMD...
    [[ ! -x $TIME ]] || { "$TIME" -v -o "$@"; return; }
    python3 - "$@" <<'PY'
import resource, subprocess, sys, time
start = time.monotonic()
code = subprocess.call(sys.argv[2:])
wall = time.monotonic() - start
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
with open(sys.argv[1], "w") as f:
    f.write(f"Elapsed (wall clock) time (h:mm:ss or m:ss): 0:{wall:.2f}\n")
    f.write(f"Maximum resident set size (kbytes): {rss}\n")
sys.exit(code)
PY
}

# One timed command: prints "WALL RSS_MB" (or "failed -").
timed() { # CMD...
    local t=$WORK/cores.time
    if ! time_v "$t" "$@" >/dev/null 2>"$WORK/cores.err"; then
        { echo "failed: $*"; tail -n 5 "$WORK/cores.err"; } >&2
        echo "failed -"
        return
    fi
    awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); w = 0
                    for (i = 1; i <= n; i++) w = w * 60 + p[i] }
                /Maximum resident set size/ { r = $2 }
                END { printf "%.2f %d\n", w, r / 1024 }' "$t"
}

# The available parallelism pbf-merge -vv reports for IN at -j N.
parallelism() { # IN N
    local spool=$WORK/cores.spool
    rm -f "$spool"
    pbf-index -q -j "$2" "$1" | pbf-overlap -q | pbf-merge -vv -j "$2" --spool "$spool" \
        2>"$WORK/cores-merge.err" >/dev/null || { echo failed; rm -f "$spool"; return; }
    rm -f "$spool"
    grep -o 'available parallelism [0-9.]*' "$WORK/cores-merge.err" | awk '{ print $3 }' | tail -n 1
}

row() { # INPUT TOOL N WALL RSS FIGURE
    printf '| %s | %s | %s | %s | %s | %s |\n' "$@"
}

inputs=() sorted=""
for shape in ${CORES_SHAPES:-sorted interleaved smallblobs}; do
    case $shape in
        sorted) sorted=$(input_for sorted "${CORES_SORTED_SIZE:-1G}") && inputs+=("$sorted") ;;
        interleaved) inputs+=("$(input_for interleaved "${CORES_INTERLEAVED_SIZE:-1G}")") ;;
        smallblobs) inputs+=("$(input_for smallblobs "${CORES_SMALLBLOB_SIZE:-180M}")") ;;
        *) die "CORES_SHAPES: no shape '$shape' (sorted, interleaved, smallblobs)" ;;
    esac
done
out=$OUT/cores.osm.pbf

echo "Machine: $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo), $(uname -sr)"
echo
echo '| input | command | -j | wall s | peak RSS MB | available parallelism |'
echo '|---|---|---|---|---|---|'
base=${CORES_BASE:-}
[[ -z $base || -x $base/pbf-sort ]] || die "CORES_BASE: no pbf-sort in $base"
# Does the base build run at -j N?
base_at() { [[ -n $base && " ${CORES_BASE_JOBS:-2 16} " == *" $1 "* ]]; }

for in in "${inputs[@]}"; do
    name="$(basename "$in") ($(stat -c %s "$in") bytes)"
    if [[ $in == "$sorted" ]]; then
        read -r wall rss < <(timed "$GEN" copy "$in" -o "$out")
        row "$name" "pbf-gen copy (floor)" - "$wall" "$rss" -
    fi
    for n in $JOBS; do
        figure=-
        [[ $in != "$sorted" ]] && figure=$(parallelism "$in" "$n")
        for ((rep = 1; rep <= ${CORES_REPEATS:-1}; rep++)); do
            read -r wall rss < <(timed "$ROOT/pbf-sort" -q -O -j "$n" "$in" -o "$out")
            row "$name" "pbf-sort -q -O" "$n" "$wall" "$rss" "$figure"
            base_at "$n" || continue
            read -r wall rss < <(timed "$base/pbf-sort" -q -O -j "$n" "$in" -o "$out")
            row "$name" "base pbf-sort -q -O" "$n" "$wall" "$rss" -
        done
        if [[ $in == "$sorted" ]]; then
            read -r wall rss < <(timed pbf-index -q -j "$n" "$in")
            row "$name" "pbf-index" "$n" "$wall" "$rss" -
        fi
    done
    if [[ $in != "$sorted" && $osmium_too == 1 ]]; then
        read -r wall rss < <(timed osmium sort --overwrite "$in" -o "$out")
        row "$name" "osmium sort" all "$wall" "$rss" -
    fi
done
rm -f "$out"
