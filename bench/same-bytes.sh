#!/usr/bin/env bash
# bench/same-bytes.sh: do two builds write the same bytes? A change that is
# meant to leave behaviour alone (a redesign, a speed-up whose result does
# not depend on it) is checked by running both builds' pipelines on the
# same inputs and comparing every output, spool and plan with cmp.
set -uo pipefail

usage() {
    cat <<'EOF'
Usage: bench/same-bytes.sh [--memory SIZE] [--alone] BASE_DIR NEW_DIR [INPUT...]

Runs `pbf-index INPUT | pbf-overlap | pbf-merge --spool S | pbf-copy -o O`
with the binaries of BASE_DIR and of NEW_DIR (each holding pbf-index,
pbf-overlap, pbf-merge and pbf-copy, e.g. a target/release of each
build), once on INPUT alone and once on INPUT beside a copy of itself (so
every blob overlaps another and is merged; not with --alone, for inputs
of a gigabyte), and compares the exit
statuses, outputs and spools. Without INPUTs: every file of
tests/fixtures. With --memory SIZE, pbf-merge runs with that budget (a
small one takes the spill path). Prints one line per run and exits 1
when anything differs.

Example, against the build of a given commit:
  git worktree add /tmp/base REV && (cd /tmp/base && cargo build --release)
  cargo build --release
  bench/same-bytes.sh /tmp/base/target/release target/release bench/data/*.osm.pbf
EOF
}

memory=()
alone=0
while [[ $# -gt 0 ]]; do
    case $1 in
        --memory) memory=(--memory "$2"); shift 2 ;;
        --alone) alone=1; shift ;;
        -h|--help) usage; exit 0 ;;
        -*) echo "same-bytes.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) break ;;
    esac
done
[[ $# -ge 2 ]] || { usage >&2; exit 2; }
base=$1 new=$2
shift 2
for dir in "$base" "$new"; do
    for tool in pbf-index pbf-overlap pbf-merge pbf-copy; do
        [[ -x $dir/$tool ]] || { echo "same-bytes.sh: $dir/$tool is missing" >&2; exit 2; }
    done
done
if [[ $# -eq 0 ]]; then
    set -- "$(dirname "${BASH_SOURCE[0]}")"/../tests/fixtures/*.osm.pbf
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/same-bytes.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

# Run the pipeline of the binaries in $1 on the inputs after it, writing
# $work/out and $work/spool; prints the four exit statuses.
pipeline() {
    local dir=$1
    shift
    rm -f "$work/out" "$work/spool"
    "$dir/pbf-index" -q "$@" 2>/dev/null | "$dir/pbf-overlap" 2>/dev/null |
        "$dir/pbf-merge" -q "${memory[@]}" --spool "$work/spool" 2>/dev/null |
        "$dir/pbf-copy" -q --keep-spools -o "$work/out" 2>/dev/null
    echo "${PIPESTATUS[*]}"
}

# Compare base's and new's runs on the inputs given; prints a line and
# returns 1 on any difference.
compare() {
    local label=$1 status_base status_new line differ=0 f
    shift
    status_base=$(pipeline "$base" "$@")
    for f in out spool; do
        [[ ! -e $work/$f ]] || mv "$work/$f" "$work/base.$f"
    done
    status_new=$(pipeline "$new" "$@")
    line="$label: exit $status_base / $status_new"
    [[ $status_base == "$status_new" ]] || { line+=" DIFFERENT"; differ=1; }
    for f in out spool; do
        if [[ -e $work/base.$f || -e $work/$f ]]; then
            if cmp -s "$work/base.$f" "$work/$f"; then
                line+=", $f same ($(stat -c %s "$work/$f") bytes)"
            else
                line+=", $f DIFFERS"
                differ=1
            fi
        fi
        rm -f "$work/base.$f" "$work/$f"
    done
    echo "$line"
    return "$differ"
}

failed=0
for input in "$@"; do
    name=$(basename "$input")
    compare "$name" "$input" || failed=1
    [[ $alone -eq 0 ]] || continue
    cp --reflink=auto "$input" "$work/again-$name"
    compare "$name twice" "$input" "$work/again-$name" || failed=1
    rm -f "$work/again-$name"
done
[[ $failed -eq 0 ]] && echo "same-bytes.sh: the same bytes" || echo "same-bytes.sh: DIFFERENCES"
exit "$failed"
