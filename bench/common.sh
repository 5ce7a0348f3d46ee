# bench/common.sh: what bench/run.sh and bench/reflink.sh share, sourced by
# both so their settings, helpers and pbfhogg command line cannot drift apart:
# the paths, the settings both read (BENCH_SIZE, BENCH_REPEATS,
# BENCH_COMPRESSION, BENCH_SOURCE, BENCH_DATA, PBFHOGG_SORT), log/die/have,
# sizes such as 1G, the pbfhogg command for IN and OUT, and the argument loop
# (--no-build and --help here; each script's own options through its
# script_arg function). The sourcing script sets NAME and defines usage and
# script_arg before calling parse_args.
# shellcheck shell=bash disable=SC2034 # the variables are used by the scripts

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
REL=$ROOT/target/release
GEN=$REL/pbf-gen

SIZE=${BENCH_SIZE:-1G}
REPEATS=${BENCH_REPEATS:-3}
COMPRESSION=${BENCH_COMPRESSION:-zlib:6}
SOURCE=${BENCH_SOURCE:-$ROOT/tests/fixtures/sorted-kualalumpur.osm.pbf}
DATA=${BENCH_DATA:-$BENCH/data}
# pbfhogg-cli 0.4.1 (`cargo install pbfhogg-cli --version 0.4.1`), and
# 0.5.0 beside it under the name pbfhogg-0.5 (bench/README.md).
PBFHOGG_SORT=${PBFHOGG_SORT:-pbfhogg sort --force IN -o OUT}
PBFHOGG05_SORT=${PBFHOGG05_SORT:-pbfhogg-0.5 sort --force IN -o OUT}

log() { printf '[%s] %s\n' "$(date +%T)" "$*" >&2; }
die() { echo "$NAME: error: $*" >&2; exit 1; }
have() { command -v "$1" >/dev/null 2>&1; }

# Size such as 512M or 1G in bytes.
bytes_of() {
    local n=${1%[KMGkmg]} unit=${1: -1}
    case $unit in
        K | k) echo $((n << 10)) ;;
        M | m) echo $((n << 20)) ;;
        G | g) echo $((n << 30)) ;;
        *) echo "$1" ;;
    esac
}

# The PBFHOGG_SORT command (or the one of TEMPLATE) for IN and OUT, both
# quoted for bash -c.
pbfhogg_cmd() { # IN OUT [TEMPLATE]
    local cmd=${3:-$PBFHOGG_SORT}
    cmd=${cmd//IN/$(printf %q "$1")}
    echo "${cmd//OUT/$(printf %q "$2")}"
}

# Whether the program of PBFHOGG_SORT (or of TEMPLATE) is on PATH.
have_pbfhogg() { # [TEMPLATE]
    local cmd=${1:-$PBFHOGG_SORT}
    have "${cmd%% *}"
}

# The options: sets BUILD (0 with --no-build); anything else goes to the
# script's script_arg, which returns 1 for an unknown argument.
BUILD=1
parse_args() {
    while [[ $# -gt 0 ]]; do
        case $1 in
            --no-build) BUILD=0 ;;
            -h | --help) usage; exit 0 ;;
            *) script_arg "$1" || { echo "$NAME: unknown argument '$1'" >&2; usage >&2; exit 2; } ;;
        esac
        shift
    done
}
