#!/usr/bin/env bash
# bench/run.sh: the side-by-side benchmark of the toolkit (see bench/README.md).
# Builds the release binaries, generates large inputs of several shapes with
# pbf-gen into bench/data/ (cached between runs), runs pbf-sort (or its
# pipeline), pbf-index, osmium and pbfhogg on them in alternation, verifies
# every output with `osmium fileinfo -e`, and writes bench/RESULTS.md.
# A tool that is missing is reported as "not run", never estimated.
set -euo pipefail

NAME=run.sh
# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
    cat <<'EOF'
Usage: bench/run.sh [--scaling] [--scaling-only] [--no-build] [--report-only] [--help]

  --scaling       add the scaling run (also BENCH_SCALING=1)
  --scaling-only  the scaling run alone, none of the BENCH_SHAPES tables

  --report-only   write BENCH_RESULTS again from the rows and machine facts
                  the last run kept in BENCH_DATA/work, running nothing (after
                  a change to how the tables are drawn)

Environment (defaults in brackets):
  BENCH_SIZE            size of the main inputs [1G]
  BENCH_SMALLBLOB_SIZE  size of the smallblobs input (five objects per blob:
                        180M holds about 580,000 blobs) [180M]
  BENCH_SHAPES          shapes to run [sorted permuted indexdata manyblobs interleaved
                        shuffled smallblobs repeated]
  BENCH_TOOLS           tools to run [floor pbf-sort index osmium-sort pbfhogg pbfhogg-0.5]
  BENCH_REPEATS         runs per tool and input; the median is reported [3]
  BENCH_INDEXDATA_REPEATS runs per tool on the indexdata shape, whose runs take
                        about a second and whose ratio to the disk floor is
                        the figure of interest there [7]
  BENCH_MERGE_REPEATS   runs per tool on the shapes pbf-sort merges (interleaved,
                        shuffled, smallblobs; 20 to 60 s each at 1 GB): their medians are
                        the figures the merge targets are about, and single
                        runs here differ by 5 % or more [3]
  BENCH_SMALLBLOB_REPEATS runs per tool on the smallblobs shape: about 2 s each
                        at 180M, where single runs of pbf-sort differ by 10 %
                        (2.32 to 2.56 s in one run) [7]
  BENCH_OSMIUM_REPEATS  runs of `osmium sort` (minutes each at 1 GB) [1]
  BENCH_OSMIUM_SHAPES   shapes `osmium sort` runs on [sorted permuted interleaved shuffled
                        smallblobs]
                        (indexdata holds the same elements as sorted)
  BENCH_INDEX_SHAPES    shapes of the index table [sorted indexdata repeated]
  BENCH_INDEX_REPEATS   runs of pbf-index per cache state [2]
  BENCH_INFO_REPEATS    runs of `osmium fileinfo -e` (warm cache) [1]
  BENCH_INFO_COLD       1: also time `osmium fileinfo -e` with a cold cache (the
                        ratios use the warm run either way) [0]
  BENCH_SCALING         1 to add the scaling run (same as --scaling) [0]
  BENCH_SCALING_SIZES   sizes of the scaling run, every shape but smallblobs
                        [256M 512M 1G 2G 4G; 1G 4G 8G for the BENCH_DISK_SHAPES]
  BENCH_SCALING_SIZES_<SHAPE> sizes of one shape (SHAPE in capitals, e.g.
                        BENCH_SCALING_SIZES_PERMUTED), before the two above
  BENCH_SCALING_SHAPES  shapes of the scaling run [sorted shuffled interleaved
                        permuted smallblobs]
  BENCH_DISK_SHAPES     scaling shapes measured past the page cache: pbf-sort
                        and the copy floor only, cold and warm, each run under
                        bench/peak-disk.sh (peak disk use beyond the output) and
                        checked at once; time per object against the 1G row
                        [interleaved permuted]
  BENCH_DISK_REPEATS    runs per cache state on those shapes [1]
  BENCH_DISK_OUT        directory whose out-disk/ holds those runs' outputs and
                        spools, and whose filesystem peak-disk.sh watches: give
                        a filesystem of its own on a shared machine [BENCH_DATA]
  BENCH_DISK_INDEX_CHECK_FROM size from which those outputs are checked by
                        pbf-index and pbf-overlap --check (counts and order,
                        5 s per GB) instead of osmium fileinfo -e [8G]
  BENCH_SMALLBLOB_SCALING_SIZES sizes of the smallblobs shape in the scaling
                        run (about 0.58, 1.2 and 2.4 million blobs) [180M 360M 720M]
  BENCH_VERSIONS_SHAPES shapes of the --dedupe and --latest rows
                        [interleaved sorted]
  BENCH_RECOMPRESS      1: the recompression rows, with the
                        inflate and deflate floors beside them [1]
  BENCH_RECOMPRESS_SHAPES shapes with a recompression row [sorted repeated]
  BENCH_STREAM_SHAPES   shapes with a streams table: one pbf-sort -vv run, each
                        stage's time parsing and serialising JSON Lines [manyblobs]
  BENCH_PARALLELISM_SHAPES shapes with a row of the merge's available
                        parallelism: one pbf-merge -vv run each
                        [interleaved shuffled smallblobs]
  BENCH_OSMIUM_MEMORY_KB memory osmium sort may use, in KiB: a run that would
                        need more is reported as not run, with the figures
                        [MemAvailable]
  BENCH_COMPRESSION     compression of generated inputs [zlib:6]
  BENCH_SOURCE          extract to tile [tests/fixtures/sorted-kualalumpur.osm.pbf]
  BENCH_SOURCE2         neighbour for the interleaved shape [.../sorted-liechtenstein.osm.pbf]
  BENCH_DATA            inputs and outputs (one filesystem) [bench/data]
  BENCH_RESULTS         report file [bench/RESULTS.md]
  BENCH_DROP_CACHES     1: drop the page cache before cold index runs (root) [1]
  BENCH_REGEN           1: regenerate inputs even when cached [0]
  PBFHOGG_SORT          pbfhogg command template, IN and OUT replaced
                        [pbfhogg sort --force IN -o OUT] (pbfhogg-cli 0.4.1:
                        `cargo install pbfhogg-cli --version 0.4.1`)
  PBFHOGG05_SORT        the same for pbfhogg-cli 0.5.0, installed beside it
                        [pbfhogg-0.5 sort --force IN -o OUT]
EOF
}

SCALING=${BENCH_SCALING:-0}
REPORT_ONLY=0
SCALING_ONLY=0
script_arg() {
    case $1 in
        --scaling) SCALING=1 ;;
        --scaling-only) SCALING=1 SCALING_ONLY=1 ;;
        --report-only) REPORT_ONLY=1 ;;
        *) return 1 ;;
    esac
}
parse_args "$@"

SHAPES=${BENCH_SHAPES:-sorted permuted indexdata manyblobs interleaved shuffled smallblobs repeated}
TOOLS=${BENCH_TOOLS:-floor pbf-sort index osmium-sort pbfhogg pbfhogg-0.5}
OSMIUM_REPEATS=${BENCH_OSMIUM_REPEATS:-1}
MERGE_REPEATS=${BENCH_MERGE_REPEATS:-3}
INDEXDATA_REPEATS=${BENCH_INDEXDATA_REPEATS:-7}
SMALLBLOB_REPEATS=${BENCH_SMALLBLOB_REPEATS:-7}
OSMIUM_SHAPES=${BENCH_OSMIUM_SHAPES:-sorted permuted interleaved shuffled smallblobs}
INDEX_SHAPES=${BENCH_INDEX_SHAPES:-sorted indexdata repeated}
INDEX_REPEATS=${BENCH_INDEX_REPEATS:-2}
INFO_REPEATS=${BENCH_INFO_REPEATS:-1}
INFO_COLD=${BENCH_INFO_COLD:-0}
SCALING_SIZES=${BENCH_SCALING_SIZES:-}
SCALING_SHAPES=${BENCH_SCALING_SHAPES:-sorted shuffled interleaved permuted smallblobs}
DISK_SHAPES=${BENCH_DISK_SHAPES:-interleaved permuted}
DISK_REPEATS=${BENCH_DISK_REPEATS:-1}
DISK_INDEX_CHECK_FROM=${BENCH_DISK_INDEX_CHECK_FROM:-8G}
DISK_TSV=$DATA/work/disk.tsv
DISK_OUT=${BENCH_DISK_OUT:-$DATA}/out-disk
SMALLBLOB_SIZE=${BENCH_SMALLBLOB_SIZE:-180M}
SMALLBLOB_SCALING_SIZES=${BENCH_SMALLBLOB_SCALING_SIZES:-180M 360M 720M}
STREAM_SHAPES=${BENCH_STREAM_SHAPES:-manyblobs}
SOURCE2=${BENCH_SOURCE2:-$ROOT/tests/fixtures/sorted-liechtenstein.osm.pbf}
RESULTS=${BENCH_RESULTS:-$BENCH/RESULTS.md}
DROP_CACHES=${BENCH_DROP_CACHES:-1}
REGEN=${BENCH_REGEN:-0}

OUT=$DATA/out
WORK=$DATA/work
ROWS=$WORK/rows.tsv
AHEAD=$WORK/ahead.tsv
NOTES=$WORK/notes.txt
PENDING=$WORK/pending

file_size() { stat -c %s "$1"; }

# --------------------------------------------------------------- tools

# The sort command under test: the pbf-sort driver when present, else the
# pipeline of the stages that exist. Prints nothing when neither is usable.
SORT_KIND=""
find_sort() {
    if [[ -x $ROOT/pbf-sort ]]; then
        SORT_KIND="pbf-sort driver ($ROOT/pbf-sort)"
    elif have pbf-sort; then
        SORT_KIND="pbf-sort driver ($(command -v pbf-sort))"
    elif have pbf-index && have pbf-overlap && have pbf-copy; then
        SORT_KIND="pipeline pbf-index | pbf-overlap |$(have pbf-merge && echo ' pbf-merge |') pbf-copy"
    fi
}

# Verbose twice (each stage's -vv line goes to stderr, a few lines in all),
# so pbf-copy says how much it copied ahead and dropped.
sort_cmd() { # IN OUT
    if [[ $SORT_KIND == "pbf-sort driver ($ROOT/pbf-sort)" ]]; then
        printf '%q -vv -O %q -o %q' "$ROOT/pbf-sort" "$1" "$2"
    elif [[ $SORT_KIND == pbf-sort* ]]; then
        printf 'pbf-sort -vv -O %q -o %q' "$1" "$2"
    else
        local merge=""
        if have pbf-merge; then merge="pbf-merge --spool $(printf %q "$2.spool") |"; fi
        printf 'set -o pipefail; pbf-index -q %q | pbf-overlap | %s pbf-copy -vv -O -o %q; rm -f %q' \
            "$1" "$merge" "$2" "$2.spool"
    fi
}

# ------------------------------------------------------------- timing

# Run a shell command under /usr/bin/time -v; sets T_WALL (s), T_RSS (KB)
# and T_STATUS. Its stderr is kept in $WORK/cmd.err for failed runs.
timed() {
    local tf=$WORK/time.txt
    sync
    /usr/bin/time -v -o "$tf" bash -c "$1" >"$WORK/cmd.out" 2>"$WORK/cmd.err" || true
    T_WALL=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$tf" |
        awk -F: '{ if (NF == 3) print $1 * 3600 + $2 * 60 + $3; else print $1 * 60 + $2 }')
    T_RSS=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tf")
    T_STATUS=$(awk -F': ' '/Exit status/ {print $2}' "$tf")
    : "${T_WALL:=0}" "${T_RSS:=0}" "${T_STATUS:=1}"
    # Killed (the OOM killer, say): time says so on a line of its own.
    if grep -q 'terminated by signal' "$tf"; then
        T_STATUS="signal $(awk '/terminated by signal/ {print $NF; exit}' "$tf")"
    fi
    if [[ $T_STATUS != 0 ]]; then
        log "failed ($T_STATUS): $1: $(tail -n 1 "$WORK/cmd.err")"
    fi
}

drop_caches() {
    sync
    if [[ $DROP_CACHES == 1 && -w /proc/sys/vm/drop_caches ]]; then
        echo 3 >/proc/sys/vm/drop_caches
        return 0
    fi
    return 1
}

# Counts "nodes ways relations" and the order flag of a PBF, from osmium.
# Outputs are checked with it; inputs are counted by pbf-index (below).
fileinfo() {
    osmium fileinfo -e -j "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)["data"]
c = d["count"]
print(c["nodes"], c["ways"], c["relations"], "yes" if d["objects_ordered"] else "no")'
}

# The counts an output must have: the input's, from pbf-index (5 s per GB
# against 30 s for osmium; an output is accepted only when osmium's count
# of it agrees, so a miscount here fails runs, it cannot pass one).
expected_counts() { # IN -> "n w r", cached beside the input with its blob count
    local cache=$1.counts end=$WORK/end.json
    if [[ ! -s $cache || $cache -ot $1 || ! -s $1.blobs ]]; then
        pbf-index -q "$1" | tail -n 1 >"$end"
        index_counts <"$end" >"$cache"
        [[ -s $cache ]] || die "pbf-index could not count $1"
        python3 -c 'import json, sys; print(json.load(sys.stdin)["blobs"])' <"$end" >"$1.blobs" ||
            rm -f "$1.blobs"
    fi
    cat "$cache"
}

# ", N blobs" for the report, when expected_counts has counted IN's blobs.
blobs_of() { # IN
    [[ -s $1.blobs ]] && printf ', %s blobs' "$(<"$1.blobs")"
    return 0
}

# "nodes ways relations" from the end record of an index stream on stdin.
index_counts() {
    tail -n 1 | python3 -c '
import json, sys
try:
    e = json.loads(sys.stdin.read())
    c = e["counts"]
    print(c["node"], c["way"], c["relation"]) if e.get("type") == "end" else print("no end record")
except Exception as x:
    print("unreadable:", x)'
}

# Check a sorted output: ordered and same counts as the input. Sets VERDICT
# (a global: the md5 cache below must outlive the call) to "verified", to
# the reason it is not, or to "pending:KEY" when the check is deferred.
# `osmium fileinfo -e` reads the whole output (15 to 30 s per GB on one
# core), so it never runs beside a timed run: the output is moved to
# $PENDING under KEY (its md5 and the counts it must have), and
# verify_pending checks every pending output of a table at once, one per
# core, when the table's timed runs are over. An output with the same bytes
# as one already verified against the same counts, by whichever tool and
# from whichever input (the sorted and the blob-permuted input sort to the
# same bytes), counts as verified without reading it again, and one with the
# bytes of an output already pending shares its verdict.
declare -A VERIFIED_MD5=()
VERDICT=
verify_sorted() { # IN OUT
    [[ -s $2 ]] || { VERDICT="no output"; return; }
    local want sum key
    want=$(expected_counts "$1")
    sum=$(md5sum <"$2" | cut -d' ' -f1)
    key=$sum-${want// /-}
    if [[ -n ${VERIFIED_MD5[$key]:-} ]]; then
        VERDICT=verified
        return
    fi
    mkdir -p "$PENDING"
    if [[ -e $PENDING/$key.osm.pbf ]]; then
        rm -f "$2"
    else
        mv "$2" "$PENDING/$key.osm.pbf"
    fi
    VERDICT=pending:$key
}

# The verdict on one pending output, written beside it as KEY.verdict.
verify_one() { # PENDING-FILE
    local f=$1 key want got verdict
    key=$(basename "$f" .osm.pbf)
    want=${key#*-}
    want=${want//-/ }
    got=$(fileinfo "$f" 2>/dev/null || echo "unreadable")
    if [[ $got == "$want yes" ]]; then
        verdict=verified
    elif [[ $got == unreadable ]]; then
        verdict="osmium cannot read it; $(verify_by_index "$f" "$want")"
    else
        verdict="wrong output: counts+ordered '$got', want '$want yes'"
    fi
    printf '%s\n' "$verdict" >"${f%.osm.pbf}.verdict"
}

# Check every pending output, one per core (nothing is timed meanwhile),
# and put the verdicts into the rows that wait for them.
verify_pending() {
    local files=() f key verdict n=0 cores
    [[ -d $PENDING ]] && files=("$PENDING"/*.osm.pbf)
    [[ -e ${files[0]:-} ]] || return 0
    cores=$(nproc)
    log "checking ${#files[@]} output(s) with osmium fileinfo -e, $cores at a time"
    for f in "${files[@]}"; do
        verify_one "$f" &
        if ((++n >= cores)); then
            wait -n || true
            n=$((n - 1))
        fi
    done
    wait || true
    : >"$WORK/verdicts.tsv"
    for f in "${files[@]}"; do
        key=$(basename "$f" .osm.pbf)
        verdict="no verdict (the check died)"
        [[ -s $PENDING/$key.verdict ]] && verdict=$(<"$PENDING/$key.verdict")
        printf 'pending:%s\t%s\n' "$key" "$verdict" >>"$WORK/verdicts.tsv"
        if [[ $verdict == verified ]]; then
            VERIFIED_MD5[$key]=1
        fi
    done
    awk -F'\t' -v OFS='\t' 'NR == FNR { v[$1] = $2; next } $9 in v { $9 = v[$9] } { print }' \
        "$WORK/verdicts.tsv" "$ROWS" >"$ROWS.new"
    mv "$ROWS.new" "$ROWS"
    rm -rf "$PENDING"
}

# Second opinion on an output osmium 1.15 cannot read (pbfhogg writes
# BlobHeaders of 128 bytes and more, which libosmium up to 2.19 rejects):
# pbf-index reads it, its counts must match and pbf-overlap --check must pass.
# Such a run is reported, never counted as verified.
verify_by_index() { # OUT WANT
    local idx=$1.index.jsonl got
    if ! pbf-index -q "$1" >"$idx" 2>/dev/null; then
        echo "pbf-index cannot read it either"
        return
    fi
    got=$(index_counts <"$idx")
    if [[ $got != "$2" ]]; then
        echo "pbf-index counts '$got', want '$2'"
    elif ! pbf-overlap --check -q <"$idx"; then
        echo "not in order (pbf-overlap --check)"
    else
        echo "pbf-index: counts match and in order"
    fi
    rm -f "$idx"
}

# Check an index stream: its end record counts match the input.
verify_index() { # IN INDEX
    local want got
    want=$(expected_counts "$1")
    got=$(index_counts <"$2")
    if [[ $got == "$want" ]]; then echo verified; else echo "wrong index: '$got', want '$want'"; fi
}

# One result row: table, input, size, tool, run, then the last timing and a verdict.
row() { # TABLE IN SIZE TOOL RUN VERDICT
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" \
        "$T_WALL" "$T_RSS" "$T_STATUS" "$6" >>"$ROWS"
}

# The copy ahead of the pbf-sort run just timed, from pbf-copy's -vv line
# ("copied ahead: N bytes kept, M bytes dropped") in its stderr: table,
# size, run, input bytes, kept, dropped; "-" and "-" when pbf-copy did not
# copy ahead (no early plan record, or another copier).
ahead_row() { # TABLE IN SIZE RUN
    local kept=- dropped=- line
    line=$(grep -o 'copied ahead: [0-9]* bytes kept, [0-9]* bytes dropped' "$WORK/cmd.err" | tail -n 1 || true)
    if [[ -n $line ]]; then
        line=$(tr -cs '0-9' ' ' <<<"$line")
        read -r kept dropped _ <<<"$line"
    fi
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$3" "$4" "$(file_size "$2")" "$kept" "$dropped" >>"$AHEAD"
}

# ---------------------------------------------------------- generation

# Copies of SRC needed for about BYTES of output (tiled with ARGS).
copies_for() { # SRC BYTES [ARGS...]
    local probe=$WORK/probe.osm.pbf one
    "$GEN" -j 0 tile -n 1 --compression "$COMPRESSION" "${@:3}" "$1" -o "$probe" 2>/dev/null
    one=$(file_size "$probe")
    rm -f "$probe"
    echo $((($2 + one - 1) / one))
}

# Copies of SRC nearest to BYTES of output (at least one).
copies_near() { # SRC BYTES
    local probe=$WORK/probe.osm.pbf one
    "$GEN" -j 0 tile -n 1 --compression "$COMPRESSION" "$1" -o "$probe" 2>/dev/null
    one=$(file_size "$probe")
    rm -f "$probe"
    echo $((($2 + one / 2) / one > 0 ? ($2 + one / 2) / one : 1))
}

# The size of SHAPE's input in the main run, and its sizes in the scaling run.
size_of() { # SHAPE
    if [[ $1 == smallblobs ]]; then echo "$SMALLBLOB_SIZE"; else echo "$SIZE"; fi
}
scaling_sizes_of() { # SHAPE
    local own=BENCH_SCALING_SIZES_${1^^}
    if [[ -n ${!own:-} ]]; then
        echo "${!own}"
    elif [[ $1 == smallblobs ]]; then
        echo "$SMALLBLOB_SCALING_SIZES"
    elif [[ -n $SCALING_SIZES ]]; then
        echo "$SCALING_SIZES"
    elif wants "$1" "$DISK_SHAPES"; then
        echo "1G 4G 8G"
    else
        echo "256M 512M 1G 2G 4G"
    fi
}

# Path of the input of SHAPE at SIZE, generated if missing.
input_for() { # SHAPE SIZE
    local shape=$1 size=$2 tag target f
    tag=$size-${COMPRESSION//:/}
    target=$(bytes_of "$size")
    f=$DATA/$shape-$tag.osm.pbf
    if [[ -s $f && $REGEN != 1 ]] || ((REPORT_ONLY)); then echo "$f"; return; fi
    log "generating $f"
    case $shape in
        sorted)
            "$GEN" tile -n "$(copies_for "$SOURCE" "$target")" --compression "$COMPRESSION" \
                "$SOURCE" -o "$f" ;;
        manyblobs)
            # A planet's blob count (about 1.3 million) at 1G: 64 elements
            # per blob, 1.4 times SIZE, so the streams weigh what they do on
            # a planet.
            local big=$((target * 14 / 10))
            "$GEN" tile -n "$(copies_for "$SOURCE" "$big" --blob-elements 64)" \
                --blob-elements 64 --compression "$COMPRESSION" "$SOURCE" -o "$f" ;;
        indexdata)
            # The sorted input as `pbf-sort --add-indexdata` leaves it: same
            # blobs, our indexdata in every BlobHeader (the case a user
            # meets after one sort; no re-encoding, so seconds per GB).
            "$ROOT/pbf-sort" -q -O --add-indexdata "$(input_for sorted "$size")" -o "$f" ;;
        permuted)
            "$GEN" permute --seed 1 "$(input_for sorted "$size")" -o "$f" ;;
        shuffled)
            # Random order compresses about 2.5x worse: shuffle a sorted file
            # of 2/5 the size so the shuffled input is about SIZE.
            "$GEN" shuffle --seed 1 --compression "$COMPRESSION" \
                "$(input_for sorted $((target * 2 / 5)))" -o "$f" ;;
        smallblobs)
            # Shuffled into blobs of five objects (osmium-tool issue 179 is
            # a real file of 2.4 million blobs): 5.44 times the size of the
            # sorted tiles, so 10 copies of kualalumpur at 180M (580,414
            # blobs), 42 at 720M (2.4 million).
            local tiles=$WORK/smallblob-tiles.osm.pbf n
            n=$(copies_near "$SOURCE" $((target * 100 / 544)))
            "$GEN" tile -n "$n" --compression "$COMPRESSION" "$SOURCE" -o "$tiles"
            "$GEN" shuffle --seed 1 --blob-elements 5 --compression "$COMPRESSION" "$tiles" -o "$f"
            rm -f "$tiles" ;;
        interleaved)
            local a=$WORK/half-a.osm.pbf b=$WORK/half-b.osm.pbf half=$((target / 2))
            "$GEN" tile -n "$(copies_for "$SOURCE" "$half")" --compression "$COMPRESSION" \
                --stride-of "$SOURCE2" "$SOURCE" -o "$a"
            "$GEN" tile -n "$(copies_for "$SOURCE2" "$half")" --compression "$COMPRESSION" \
                --stride-of "$SOURCE" --offset 1 "$SOURCE2" -o "$b"
            "$GEN" concat "$a" "$b" -o "$f"
            rm -f "$a" "$b" ;;
        repeated)
            # Every key twice: two tiled copies with the same ids (no
            # --stride-of), concatenated and sorted once by pbf-sort, as a
            # merge of overlapping extracts without --dedupe leaves them.
            local a=$WORK/copy-a.osm.pbf two=$WORK/two-copies.osm.pbf
            "$GEN" tile -n "$(copies_for "$SOURCE" $((target / 2)))" --compression "$COMPRESSION" \
                "$SOURCE" -o "$a"
            "$GEN" concat "$a" "$a" -o "$two"
            "$ROOT/pbf-sort" -q -O "$two" -o "$f"
            rm -f "$a" "$two" ;;
        *) die "unknown shape '$shape'" ;;
    esac 2>>"$WORK/gen.log"
    echo "$f"
}

# ------------------------------------------------------------- runs

# One untimed `pbf-merge -vv` (default -j) on IN's plan: the merge's available
# parallelism (task CPU time over critical path, see pbf-merge(1)) as a
# SHAPE, FIGURE, CPU SECONDS, PATH SECONDS row in $WORK/parallelism.tsv.
PARALLELISM_SHAPES=${BENCH_PARALLELISM_SHAPES:-interleaved shuffled smallblobs}
run_parallelism() { # SHAPE IN
    local spool=$WORK/parallelism.spool line
    have pbf-merge || { echo "parallelism-$1: not run: pbf-merge missing" >>"$NOTES"; return 0; }
    rm -f "$spool"
    if ! pbf-index -q "$2" | pbf-overlap -q | pbf-merge -vv --spool "$spool" \
        >/dev/null 2>"$WORK/parallelism.log"; then
        echo "parallelism-$1: pbf-merge -vv failed (see $WORK/parallelism.log)" >>"$NOTES"
    fi
    rm -f "$spool"
    local figures
    figures=$(sed -nE 's/.*available parallelism ([0-9.]+) \(([0-9.]+) ?s of task CPU time over a critical path of ([0-9.]+) ?s.*/\1 \2s \3s/p' \
        "$WORK/parallelism.log" | tail -n 1)
    [[ -n $figures ]] || return 0
    # shellcheck disable=SC2086 # the figure, the CPU time and the path
    set -- "$1" $figures
    printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$WORK/parallelism.tsv"
}

# One untimed `pbf-sort -vv` on IN: each stage's own time (the first time
# its line gives) and the time it spent parsing and serialising the streams, as STAGE, SECONDS, PARSING,
# SERIALISING rows in $WORK/streams-SHAPE.tsv.
run_streams() { # SHAPE IN
    local out=$WORK/streams.osm.pbf tsv=$WORK/streams-$1.tsv
    rm -f "$tsv"
    if [[ $SORT_KIND != pbf-sort* ]]; then
        echo "streams-$1: not run: needs the pbf-sort driver" >>"$NOTES"
        return 0
    fi
    local cmd
    cmd=$(sort_cmd "$2" "$out")
    if ! bash -c "$cmd" 2>"$WORK/streams.log"; then
        echo "streams-$1: pbf-sort -vv failed (see $WORK/streams.log)" >>"$NOTES"
        rm -f "$out"
        return 0
    fi
    rm -f "$out"
    local line stage head tail secs ser
    while IFS= read -r line; do
        [[ $line == pbf-*"; streams: "* ]] || continue
        stage=${line%%:*}
        head=${line%%; streams: *}
        tail=${line##*; streams: }
        secs=$(grep -oE '[0-9]+\.[0-9]+ ?s\b' <<<"$head" | head -n 1 | tr -d ' s')
        ser=${tail##*, }
        printf '%s\t%s\t%s\t%s\n' "$stage" "$secs" "${tail%% s parsing*}" "${ser%% s serialising}"
    done <"$WORK/streams.log" >"$tsv"
    [[ -s $tsv ]] || echo "streams-$1: no stage reported its streams (see $WORK/streams.log)" >>"$NOTES"
}

render_streams() { # TSV
    echo "| stage | stage's time s (includes waiting) | parsing s | serialising s |"
    echo "|---|---|---|---|"
    awk -F'\t' '{ printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }' "$1"
}

# Is word $1 in list $2 (default: the tools to run)?
wants() { [[ " ${2:-$TOOLS} " == *" $1 "* ]]; }

# Does osmium sort fit in memory? It holds every object: about 100 bytes
# per object here (8.7 GB for 89 million objects, measured), and about
# 4 KiB per blob (2.6 GB for the 2.9 million objects of the 580,414-blob
# smallblobs file, measured), plus a margin. When it does not,
# OSMIUM_UNFIT says so with the figures.
osmium_fits() { # IN
    local need avail blobs
    blobs=$(cat "$1.blobs" 2>/dev/null || echo 0)
    need=$(expected_counts "$1" | awk -v b="$blobs" '{print int((($1 + $2 + $3) * 100 + b * 4096) / 1024)}')
    avail=${BENCH_OSMIUM_MEMORY_KB:-$(awk '/MemAvailable/ {print $2}' /proc/meminfo)}
    OSMIUM_UNFIT=$(awk -v n="$need" -v a="$avail" 'BEGIN {
        printf "not run: needs about %.1f GiB (100 bytes per object and 4 KiB per blob), %.1f GiB available less 2", n / 1048576, a / 1048576 }')
    [[ $need -lt $((avail - (2 << 20))) ]]
}

# The sort table of one input: floor, pbf-sort, osmium sort, pbfhogg.
run_sorts() { # TABLE IN SIZE OSMIUM(yes|no)
    local table=$1 in=$2 size=$3 osmium=$4 rep t out repeats=$REPEATS
    if [[ $osmium != yes ]] && wants osmium-sort; then
        echo "$table: osmium sort not run: shape not in BENCH_OSMIUM_SHAPES" >>"$NOTES"
    fi
    if [[ $table == sort-smallblobs ]]; then
        repeats=$SMALLBLOB_REPEATS
    elif wants "${table#*-}" "interleaved shuffled"; then
        repeats=$MERGE_REPEATS
    elif [[ $table == sort-indexdata ]]; then
        repeats=$INDEXDATA_REPEATS
    fi
    local order
    for ((rep = 1; rep <= repeats; rep++)); do
        # Odd runs in one order, even runs in the reverse one, so no tool
        # always follows the same predecessor (whose deleted output the
        # filesystem may still be freeing).
        order=(floor pbf-sort osmium-sort pbfhogg pbfhogg-0.5)
        ((rep % 2)) || order=(pbfhogg-0.5 pbfhogg osmium-sort pbf-sort floor)
        for t in "${order[@]}"; do
            wants "$t" || continue
            out=$OUT/$t.osm.pbf
            rm -rf "$OUT" && mkdir -p "$OUT"
            # Start every run with no writeback pending from the last one
            # (a gigabyte of dirty pages would bill one tool for another's).
            sync
            case $t in
                floor)
                    timed "$(printf '%q copy %q -o %q' "$GEN" "$in" "$out")"
                    row "$table" "$in" "$size" "copy_file_range+fsync" "$rep" "$(
                        cmp -s "$in" "$out" && echo verified || echo 'copy differs')" ;;
                pbf-sort)
                    [[ -n $SORT_KIND ]] || continue
                    timed "$(sort_cmd "$in" "$out")"
                    ahead_row "$table" "$in" "$size" "$rep"
                    verify_sorted "$in" "$out"
                    row "$table" "$in" "$size" "pbf-sort" "$rep" "$VERDICT" ;;
                osmium-sort)
                    if [[ $osmium != yes ]] || ((rep > OSMIUM_REPEATS)); then continue; fi
                    if ! osmium_fits "$in"; then
                        # A row, so the table says why the cell is empty.
                        T_WALL=0 T_RSS=0 T_STATUS=skipped
                        row "$table" "$in" "$size" "osmium sort" "$rep" "$OSMIUM_UNFIT"
                        continue
                    fi
                    timed "$(printf 'osmium sort -O -o %q %q' "$out" "$in")"
                    verify_sorted "$in" "$out"
                    row "$table" "$in" "$size" "osmium sort" "$rep" "$VERDICT" ;;
                pbfhogg)
                    have_pbfhogg "$PBFHOGG_SORT" || continue
                    timed "$(pbfhogg_cmd "$in" "$out")"
                    verify_sorted "$in" "$out"
                    row "$table" "$in" "$size" "pbfhogg sort" "$rep" "$VERDICT" ;;
                pbfhogg-0.5)
                    have_pbfhogg "$PBFHOGG05_SORT" || continue
                    timed "$(pbfhogg_cmd "$in" "$out" "$PBFHOGG05_SORT")"
                    verify_sorted "$in" "$out"
                    row "$table" "$in" "$size" "pbfhogg 0.5 sort" "$rep" "$VERDICT" ;;
            esac
            log "$table $t run $rep: $(tail -n 1 "$ROWS" | cut -f6-8)"
        done
    done
    rm -rf "$OUT"
    verify_pending
}

# The index table of one input: pbf-index vs osmium fileinfo -e, warm and cold.
run_index() { # TABLE IN SIZE
    local table=$1 in=$2 size=$3 rep t cold
    wants index || return 0
    have pbf-index || { echo "$table: not run: pbf-index missing" >>"$NOTES"; return 0; }
    local reps=$((INDEX_REPEATS > INFO_REPEATS ? INDEX_REPEATS : INFO_REPEATS))
    for ((rep = 1; rep <= reps; rep++)); do
        for cold in warm cold; do
            for t in pbf-index "osmium fileinfo -e"; do
                if [[ $t == pbf-index ]] && ((rep > INDEX_REPEATS)); then continue; fi
                if [[ $t != pbf-index ]] && ((rep > INFO_REPEATS)); then continue; fi
                if [[ $t != pbf-index && $cold == cold && $INFO_COLD != 1 ]]; then continue; fi
                if [[ $cold == cold ]] && ! drop_caches; then continue; fi
                if [[ $cold == warm ]]; then
                    cat "$in" >/dev/null
                fi
                if [[ $t == pbf-index ]]; then
                    timed "$(printf 'pbf-index -q %q > %q' "$in" "$WORK/index.jsonl")"
                    row "$table" "$in" "$size" "pbf-index ($cold)" "$rep" \
                        "$(verify_index "$in" "$WORK/index.jsonl")"
                else
                    timed "$(printf 'osmium fileinfo -e %q > %q' "$in" "$WORK/fileinfo.txt")"
                    row "$table" "$in" "$size" "osmium fileinfo -e ($cold)" "$rep" "$(
                        grep -q 'Number of nodes' "$WORK/fileinfo.txt" && echo verified || echo 'no counts')"
                fi
                log "$table $t $cold run $rep: $(tail -n 1 "$ROWS" | cut -f6-8)"
            done
        done
    done
    [[ $DROP_CACHES == 1 && -w /proc/sys/vm/drop_caches ]] ||
        echo "$table: cold-cache index runs not run: cannot drop caches (needs root)" >>"$NOTES"
}

# ------------------------------------------------------ past the page cache

# The scaling rows of a shape in BENCH_DISK_SHAPES: pbf-sort and the copy
# floor only (osmium cannot hold 8 GB of objects), each with a cold cache
# (dropped before the run) and a warm one (the input read just before),
# each run under bench/peak-disk.sh on the output's filesystem. The output
# is checked right after its run and deleted, so no output of one run
# occupies the disk during the next and none is checked beside a timed
# run. Rows go to DISK_TSV: shape, size, tool, cache, run, wall s, peak RSS
# KB, exit status, peak bytes beyond the start, output bytes, objects,
# verdict, spool bytes (pbf-merge's -v line: the bytes of its frames), input
# bytes.
run_disk() { # SHAPE IN SIZE
    local shape=$1 in=$2 size=$3 rep state t out peak cmd objects verdict spool
    objects=$(expected_counts "$in" | awk '{print $1 + $2 + $3}')
    for ((rep = 1; rep <= DISK_REPEATS; rep++)); do
        for state in cold warm; do
            for t in floor pbf-sort; do
                [[ $t != pbf-sort || -n $SORT_KIND ]] || continue
                rm -rf "$DISK_OUT" && mkdir -p "$DISK_OUT"
                out=$DISK_OUT/$t.osm.pbf
                if [[ $state == cold ]]; then
                    drop_caches || { echo "disk-$shape: cold runs not run: cannot drop caches (needs root)" >>"$NOTES"; continue; }
                else
                    cat "$in" >/dev/null
                fi
                if [[ $t == floor ]]; then
                    cmd=$(printf '%q copy %q -o %q' "$GEN" "$in" "$out")
                else
                    cmd=$(sort_cmd "$in" "$out")
                fi
                timed "$(printf '%q --dir %q --interval 0.1 -o %q -- bash -c %q' \
                    "$BENCH/peak-disk.sh" "$DISK_OUT" "$WORK/peak.txt" "$cmd")"
                peak=$(cat "$WORK/peak.txt" 2>/dev/null || echo 0)
                rm -f "$WORK/peak.txt"
                if [[ $T_STATUS != 0 ]]; then
                    verdict="failed: $(tail -n 1 "$WORK/cmd.err")"
                elif [[ $t == floor ]]; then
                    verdict=$(cmp -s "$in" "$out" && echo verified || echo 'copy differs')
                else
                    verdict=$(check_output "$in" "$out" "$size")
                fi
                spool=$(grep -o 'frames, [0-9]* bytes' "$WORK/cmd.err" | tail -n 1 | tr -cd '0-9' || true)
                printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$shape" "$size" "$t" "$state" \
                    "$rep" "$T_WALL" "$T_RSS" "$T_STATUS" "$peak" "$(file_size "$out" 2>/dev/null || echo 0)" \
                    "$objects" "$verdict" "${spool:-0}" "$(file_size "$in")" >>"$DISK_TSV"
                log "disk $shape $size $t $state run $rep: $T_WALL s, $T_RSS KB, peak $peak bytes: $verdict"
            done
        done
    done
    rm -rf "$DISK_OUT"
}

# The verdict on a pbf-sort output of the disk rows, checked at once:
# osmium fileinfo -e (ordered, the input's counts) below
# BENCH_DISK_INDEX_CHECK_FROM; from that size pbf-index's counts and
# pbf-overlap --check's order (a few seconds per GB against 15 to 30 s for
# osmium). An output with the bytes of one already verified against the
# same counts is verified without reading it again.
check_output() { # IN OUT SIZE
    local want sum got
    want=$(expected_counts "$1")
    sum=$(md5sum <"$2" | cut -d' ' -f1)-${want// /-}
    if [[ -n ${VERIFIED_MD5[$sum]:-} ]]; then
        echo verified
        return
    fi
    if (($(bytes_of "$3") >= $(bytes_of "$DISK_INDEX_CHECK_FROM"))); then
        got=$(verify_by_index "$2" "$want")
        [[ $got != "pbf-index: counts match and in order" ]] || got=verified
    else
        got=$(fileinfo "$2" 2>/dev/null || echo unreadable)
        if [[ $got == "$want yes" ]]; then got=verified; else got="wrong output: counts+ordered '$got', want '$want yes'"; fi
    fi
    [[ $got != verified ]] || VERIFIED_MD5[$sum]=1
    echo "$got"
}

# The disk table of one shape: per size and cache state, the copy floor's
# and pbf-sort's wall time (median of the verified runs), pbf-sort's time
# per object and its ratio to the 1G row's (to the first size's where no
# 1G row was run), peak RSS, and the peak disk use beyond the output, as
# bytes and as a part of the output.
render_disk() { # SHAPE
    python3 - "$DISK_TSV" "$1" <<'PY'
import statistics, sys
path, shape = sys.argv[1:3]
rows = [l.rstrip("\n").split("\t") for l in open(path)]
rows = [r for r in rows if r[0] == shape]
mem = next(int(l.split()[1]) for l in open("/proc/meminfo") if l.startswith("MemTotal:")) / 2**20
sizes = []
for r in rows:
    if r[1] not in sizes:
        sizes.append(r[1])
def ok(size, tool, state):
    return [r for r in rows if r[1:4] == [size, tool, state] and r[7] == "0" and r[11] == "verified"]
def per_object(size, state):
    runs = ok(size, "pbf-sort", state)
    if not runs:
        return None
    return statistics.median(float(r[5]) for r in runs) / int(runs[0][10]) * 1e9
ref = "1G" if "1G" in sizes else (sizes[0] if sizes else None)
print(f"Ratio: pbf-sort's ns per object against the {ref} row's in the same cache state.")
print("Peak disk: the peak used bytes of the output's filesystem during the run")
print("(bench/peak-disk.sh, polled every 0.1 s) above the start, less the output's size:")
print("what the run needs beyond its input and output (spool, spill files).")
print("Touched: input, spool (pbf-merge's frames) and output together, against the")
print(f"machine's {mem:.1f} GiB of memory: above 1, they cannot all stay in the page cache.")
print()
print("| size | objects | cache | copy floor s | pbf-sort s | ns / object | ratio to " + str(ref)
      + " | peak RSS MB | output bytes | spool bytes | touched GiB (/ memory) | peak disk beyond output, bytes | / output | runs |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for size in sizes:
    for state in ("cold", "warm"):
        mine = [r for r in rows if r[1] == size and r[3] == state]
        if not mine:
            continue
        floor = ok(size, "floor", state)
        sort = ok(size, "pbf-sort", state)
        cells = [size, f"{int(mine[0][10]):,}", state]
        cells.append(f"{statistics.median(float(r[5]) for r in floor):.2f}" if floor else "-")
        if sort:
            ns = per_object(size, state)
            base = per_object(ref, state)
            out = max(int(r[9]) for r in sort)
            beyond = max(int(r[8]) - int(r[9]) for r in sort)
            spool = max(int(r[12]) for r in sort)
            touched = (int(sort[0][13]) + spool + out) / 2**30
            cells += [f"{statistics.median(float(r[5]) for r in sort):.2f}", f"{ns:.1f}",
                      f"{ns / base:.3f}" if base else "-", f"{max(int(r[6]) for r in sort) / 1024:.0f}",
                      f"{out:,}", f"{spool:,}", f"{touched:.2f} ({touched / mem:.2f})",
                      f"{beyond:,}", f"{beyond / out:.3f}" if out else "-"]
        else:
            cells += ["not verified", "", "", "", "", "", "", "", ""]
        runs = [r for r in mine if r[2] == "pbf-sort"]
        cells.append("; ".join(f"{float(r[5]):.2f} s {r[11]}" for r in runs) or "not run")
        print("| " + " | ".join(cells) + " |")
PY
}

# -------------------------------------------------------------- report

machine() {
    echo "| | |"
    echo "|---|---|"
    echo "| CPU | $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) cores (nproc) |"
    echo "| memory | $(free -g | awk '/Mem:/ {print $2 " GiB total, " $7 " GiB available at start"}') |"
    echo "| disk | $(df -hT "$DATA" | awk 'NR == 2 {print $1 ", " $2 ", " $3 " size, " $5 " free"}') |"
    echo "| kernel | $(uname -sr) |"
    echo "| load average at start (1, 5, 15 min, before the build) | $LOAD_START |"
    echo "| load average at end (1, 5, 15 min) | $(cut -d' ' -f1-3 /proc/loadavg) |"
    echo "| osmium | $(osmium --version | head -n 1) |"
    echo "| pbf-sort toolkit | git $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), sort stage: ${SORT_KIND:-missing} |"
    echo "| pbfhogg | $(have_pbfhogg "$PBFHOGG_SORT" && ${PBFHOGG_SORT%% *} --version 2>&1 | head -n 1 || echo 'not on PATH') |"
    echo "| pbfhogg 0.5 | $(have_pbfhogg "$PBFHOGG05_SORT" && ${PBFHOGG05_SORT%% *} --version 2>&1 | head -n 1 || echo 'not on PATH') |"
    echo "| inputs | pbf-gen from $(basename "$SOURCE") (and $(basename "$SOURCE2") for interleaved), compression $COMPRESSION |"
}

# Markdown table of one TABLE from the rows: median wall, the ratio to each
# peer that has a verified median (REFERENCE, and pbfhogg sort beside osmium
# sort), the ratio to the disk floor, peak RSS.
render_table() { # TABLE REFERENCE-TOOL
    python3 - "$ROWS" "$1" "$2" <<'EOF'
import statistics, sys
path, table, ref = sys.argv[1:4]
rows = [l.rstrip("\n").split("\t") for l in open(path) if l.startswith(table + "\t")]
tools, by_tool = [], {}
for _, inp, size, tool, run, wall, rss, status, verdict in rows:
    if tool not in by_tool:
        tools.append(tool)
        by_tool[tool] = []
    by_tool[tool].append((float(wall), int(rss), status, verdict))
def median(tool):
    ok = [w for w, _, s, v in by_tool.get(tool, []) if s == "0" and v == "verified"]
    return statistics.median(ok) if ok else None
peers = [ref] + [p for p in ["pbfhogg sort", "pbfhogg 0.5 sort"] if ref == "osmium sort" and median(p) is not None]
# What each ratio column divides by, and its decimals, computed once.
bases = [(median(p), 3) for p in peers] + [(median("copy_file_range+fsync"), 2)]
def ratios(w, paren):
    cells = [f"{w / b:.{d}f}" if b else "n/a" for b, d in bases]
    return " | ".join(f"({c})" if paren and c != "n/a" else c for c in cells)
head = " | ".join(f"ratio to {p}" for p in peers)
print(f"| tool | runs ok | median wall s | {head} | ratio to disk floor | peak RSS MB |")
print("|---|---|---|" + "---|" * len(peers) + "---|---|")
for tool in tools:
    runs = by_tool[tool]
    good = [r for r in runs if r[2] == "0" and r[3] == "verified"]
    m = median(tool)
    if m is None:
        why = "; ".join(sorted({v if s in ("0", "skipped") else f"exit {s}: {v}" for _, _, s, v in runs}))
        done = [(w, r) for w, r, s, _ in runs if s == "0"]
        if not done:
            skipped = all(s == "skipped" for _, _, s, _ in runs)
            print(f"| {tool} | 0/{len(runs)} | {'' if skipped else 'failed: '}{why} |" + " |" * (len(peers) + 2))
            continue
        # The tool finished but its output was not accepted: its time is
        # shown in parentheses, for what it is worth, with the reason.
        w = statistics.median(x for x, _ in done)
        rss = max(r for _, r in done) / 1024
        print(f"| {tool} | 0/{len(runs)}: {why} | ({w:.2f}) | {ratios(w, True)} | {rss:.0f} |")
        continue
    rss = max(r[1] for r in good) / 1024
    print(f"| {tool} | {len(good)}/{len(runs)} | {m:.2f} | {ratios(m, False)} | {rss:.0f} |")
EOF
}

# The copy ahead of each pbf-sort run of TABLE (ahead_row): bytes copied
# ahead and kept, copied ahead and dropped, and the dropped bytes as a part
# of the input.
render_ahead() { # TABLE
    python3 - "$AHEAD" "$1" <<'EOF'
import sys
path, table = sys.argv[1:3]
try:
    rows = [l.rstrip("\n").split("\t") for l in open(path) if l.startswith(table + "\t")]
except FileNotFoundError:
    rows = []
print("Copied ahead by `pbf-copy` in each pbf-sort run (its `-vv` line), then kept or dropped:")
print()
if not rows:
    print("- no pbf-sort run")
    sys.exit()
print("| size | run | kept bytes | dropped bytes | dropped, part of the input |")
print("|---|---|---|---|---|")
for _, size, run, total, kept, dropped in rows:
    if dropped == "-":
        print(f"| {size} | {run} | no copy ahead | | 0 % |")
    else:
        share = 100 * int(dropped) / max(int(total), 1)
        print(f"| {size} | {run} | {int(kept):,} | {int(dropped):,} | {share:.1f} % |")
EOF
}

# pbf-sort's median wall time per object on the shapes it merges, and each
# against the shuffled shape's (blobs of 8000 objects): the small-blob
# target is about that ratio.
render_per_object() {
    grep -qE "^sort-(shuffled|interleaved|smallblobs)	" "$ROWS" || return 0
    echo
    echo "## Time per object (pbf-sort)"
    echo
    python3 - "$ROWS" <<'EOF'
import os, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
per = {}
for shape in ["shuffled", "interleaved", "smallblobs"]:
    ok = [r for r in rows
          if r[0] == f"sort-{shape}" and r[3] == "pbf-sort" and r[7] == "0" and r[8] == "verified"]
    counts = f"{ok[0][1]}.counts" if ok else ""
    if os.path.exists(counts):
        # The input's objects: its counts of nodes, ways and relations.
        n = sum(map(int, open(counts).read().split()))
        per[shape] = (statistics.median(float(r[5]) for r in ok), n)
base = per.get("shuffled")
print("| shape | objects | median wall s | µs per object | ratio to shuffled |")
print("|---|---|---|---|---|")
for shape, (wall, n) in per.items():
    us = wall / n * 1e6
    ratio = f"{us / (base[0] / base[1] * 1e6):.3f}" if base else "n/a"
    print(f"| {shape} | {n:,} | {wall:.2f} | {us:.4f} | {ratio} |")
EOF
}

# Scaling table of one shape: per size, median wall and peak RSS per tool.
render_scaling() { # SHAPE
    python3 - "$ROWS" "scaling-$1" <<'EOF'
import statistics, sys
path, table = sys.argv[1:3]
rows = [l.rstrip("\n").split("\t") for l in open(path) if l.startswith(table + "\t")]
sizes, tools, cell, why, blobs = [], [], {}, {}, {}
for _, inp, size, tool, run, wall, rss, status, verdict in rows:
    if size not in sizes: sizes.append(size)
    try:
        blobs[size] = int(open(inp + ".blobs").read())
    except (OSError, ValueError):
        pass
    if tool not in tools: tools.append(tool)
    if status == "0" and verdict == "verified":
        cell.setdefault((size, tool), []).append((float(wall), int(rss)))
    else:
        # Why a run gave no figure: the harness's reason, or the exit status.
        reason = verdict if status in ("0", "skipped") else f"failed, exit {status}: {verdict}"
        why.setdefault((size, tool), set()).add(reason)
print("| size | " + " | ".join(f"{t} s / RSS MB" for t in tools) + " |")
print("|---|" + "---|" * len(tools))
for s in sizes:
    out = []
    for t in tools:
        v = cell.get((s, t))
        if v:
            out.append(f"{statistics.median(w for w, _ in v):.2f} / {max(r for _, r in v) / 1024:.0f}")
        else:
            out.append("; ".join(sorted(why.get((s, t), {"not run"}))))
    label = f"{s} ({blobs[s]:,} blobs)" if s in blobs else s
    print(f"| {label} | " + " | ".join(out) + " |")
EOF
}

report() {
    local shape in
    {
        echo "# Benchmark results"
        echo
        echo "Produced by \`make bench\` (bench/run.sh) on $(run_date). Wall times are"
        echo "medians of the verified runs (an output counts only when \`osmium fileinfo -e\` says"
        echo "its objects are ordered and its counts equal the input's, or when it has the same"
        echo "bytes (md5) as such an output; outputs are checked after the timed runs of their"
        echo "table, never beside one; an index counts only when its \`end\` counts do); peak RSS"
        echo "is the largest process of the run (/usr/bin/time -v)."
        echo "Ratios below 1 mean faster than the reference. Caches are warm unless marked cold."
        echo "Figures in parentheses are of runs that finished but whose output was not accepted"
        echo "(the reason is in the runs column); they are not used as a reference."
        echo "Repeats: $REPEATS per sort tool ($INDEXDATA_REPEATS on the indexdata shape, $MERGE_REPEATS per tool"
        echo "but osmium on the interleaved and shuffled shapes, $SMALLBLOB_REPEATS on smallblobs), $OSMIUM_REPEATS for"
        echo "\`osmium sort\`; $INDEX_REPEATS for pbf-index and $INFO_REPEATS for"
        echo "\`osmium fileinfo -e\` ($( ((INFO_COLD)) && echo 'per cache state' || echo 'warm only')); tools run in alternation,"
        echo "odd runs in one order and even runs in the reverse order."
        echo
        echo "## Machine"
        echo
        machine_facts
        for shape in $SHAPES; do
            grep -q "^sort-$shape	" "$ROWS" || continue
            echo
            echo "## Shape: $shape, $(size_of "$shape") ($(describe "$shape"))"
            echo
            in=$(input_for "$shape" "$(size_of "$shape")")
            echo "Input: $(basename "$in"), $(file_size "$in" 2>/dev/null || echo '(since deleted) ') bytes$(blobs_of "$in")."
            echo
            echo "### Sort"
            echo
            render_table "sort-$shape" "osmium sort"
            echo
            render_ahead "sort-$shape"
            if wants index && wants "$shape" "$INDEX_SHAPES"; then
                echo
                echo "### Index (pbf-index vs osmium fileinfo -e)"
                echo
                render_table "index-$shape" "osmium fileinfo -e (warm)"
            fi
            if [[ -s $WORK/streams-$shape.tsv ]]; then
                echo
                echo "### Streams (one \`pbf-sort -vv\` run, after the timed ones)"
                echo
                render_streams "$WORK/streams-$shape.tsv"
            fi
        done
        render_per_object
        render_recompress
        render_versions
        if [[ $SCALING == 1 ]]; then
            for shape in $SCALING_SHAPES; do
                if [[ -s $DISK_TSV ]] && grep -q "^$shape	" "$DISK_TSV"; then
                    echo
                    echo "## Scaling past the page cache: $shape ($(describe "$shape"))"
                    echo
                    echo "pbf-sort ($(sort_memory)) and the copy floor (\`pbf-gen copy\`: copy_file_range+fsync),"
                    echo "each run with a cold cache (dropped before it) and a warm one (the input read"
                    echo "just before); $DISK_REPEATS run(s) per cache state, medians of the verified ones. pbf-sort's"
                    echo "outputs are checked right after their run: by \`osmium fileinfo -e\` below"
                    echo "$DISK_INDEX_CHECK_FROM, from $DISK_INDEX_CHECK_FROM by pbf-index's counts and \`pbf-overlap --check\`."
                    echo "Outputs, spools and peak disk use on"
                    echo "$(disk_fs). Inputs:"
                    disk_inputs "$shape"
                    echo
                    render_disk "$shape"
                fi
                grep -q "^scaling-$shape	" "$ROWS" || continue
                echo
                echo "## Scaling: $shape ($(describe "$shape"))"
                echo
                render_scaling "$shape"
                echo
                render_ahead "scaling-$shape"
            done
        fi
        if [[ -s $WORK/parallelism.tsv ]]; then
            echo
            echo "## Merge: available parallelism"
            echo
            echo "pbf-merge -vv on each merge shape's plan (task CPU time over critical path; see pbf-merge(1))."
            echo
            echo "| shape | available parallelism | task CPU | critical path |"
            echo "|---|---|---|---|"
            awk -F'\t' '{ printf "| %s | %s | %s | %s |\n", $1, $2, $3, $4 }' "$WORK/parallelism.tsv"
        fi
        echo
        echo "## Not run"
        echo
        if [[ -s $NOTES ]]; then sed 's/^/- /' "$NOTES"; else echo "- nothing"; fi
    } >"$RESULTS.tmp"
    mv "$RESULTS.tmp" "$RESULTS"
    log "wrote $RESULTS"
}

# The machine section and the date of the report: taken while a run goes,
# and kept with its rows so --report-only shows what the rows were measured
# on and when.
machine_facts() {
    if ((REPORT_ONLY)); then
        [[ -s $WORK/machine.md ]] || die "$WORK/machine.md is missing: no run to report on"
        cat "$WORK/machine.md"
    else
        machine | tee "$WORK/machine.md"
    fi
}

run_date() {
    ((REPORT_ONLY)) || date -u +%Y-%m-%dT%H:%MZ >"$WORK/date.txt"
    cat "$WORK/date.txt"
}

# The memory budget of pbf-sort's merge stage, from its --help.
sort_memory() {
    local m
    m=$("$ROOT/pbf-sort" --help 2>/dev/null | grep -o -- '--memory .*\[default: [^]]*\]' |
        grep -o '[^ ]*\]$' | tr -d ']' || true)
    echo "merge memory budget ${m:-unknown}"
}

# The filesystem of the disk rows' outputs: device, type, size.
disk_fs() {
    local dir=${BENCH_DISK_OUT:-$DATA}
    df -hT "$dir" | awk -v d="$dir" 'NR == 2 {print d " (" $1 ", " $2 ", " $3 " size)"}'
}

# The inputs of SHAPE's disk rows as a list: file, bytes, blobs.
disk_inputs() { # SHAPE
    local size in
    while read -r size; do
        in=$(input_for "$1" "$size")
        echo "- $size: $(basename "$in"), $(file_size "$in" 2>/dev/null || echo '(since deleted) ') bytes$(blobs_of "$in")"
    done < <(awk -F'\t' -v s="$1" '$1 == s && !seen[$2]++ {print $2}' "$DISK_TSV")
}

describe() {
    case $1 in
        sorted) echo "tiled copies with shifted ids, sorted" ;;
        permuted) echo "the sorted file with its blobs in random order" ;;
        indexdata) echo "sorted, with pbf-sort indexdata in every BlobHeader" ;;
        interleaved) echo "two sorted tiled files with interleaving ids, concatenated" ;;
        shuffled) echo "every element in random order, re-encoded" ;;
        smallblobs) echo "every element in random order, re-encoded five to a blob" ;;
        manyblobs) echo "sorted, 64 elements per blob, 1.4 times the size: a planet's blob count" ;;
        repeated) echo "two tiled copies with the same ids, concatenated, sorted by pbf-sort: every key twice" ;;
    esac
}

# ---------------------------------------------------------------- main

# ------------------------------------------------------------ versions

# pbf-sort --dedupe and --latest on the shapes of VERSIONS_SHAPES, in turn
# (their costs compared in one run): rows go to ROWS as table versions-SHAPE, the bytes
# each run merged (its --summary-json's bytes.merged) to VERSIONS_TSV.
VERSIONS_SHAPES=${BENCH_VERSIONS_SHAPES:-interleaved sorted}
VERSIONS_TSV=$WORK/versions.tsv
run_versions() { # SHAPE IN SIZE
    local shape=$1 in=$2 size=$3 rep opt out summary=$WORK/versions.json merged
    [[ $SORT_KIND == "pbf-sort driver ($ROOT/pbf-sort)" ]] || return 0
    for ((rep = 1; rep <= MERGE_REPEATS; rep++)); do
        for opt in --dedupe --latest; do
            rm -rf "$OUT" && mkdir -p "$OUT"
            out=$OUT/versions.osm.pbf
            timed "$(printf '%q -q -O %s --summary-json %q %q -o %q' \
                "$ROOT/pbf-sort" "$opt" "$summary" "$in" "$out")"
            merged=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["bytes"]["merged"] or 0)' "$summary")
            printf '%s\t%s\t%s\t%s\n' "$shape" "$opt" "$rep" "$merged" >>"$VERSIONS_TSV"
            row "versions-$shape" "$in" "$size" "pbf-sort $opt" "$rep" "$(one_version "$out")"
        done
    done
    rm -rf "$OUT"
}

# "verified" when osmium finds OUT ordered, with one version of each object
# (the shapes repeat a few ids, which both options drop: the input's counts
# are not the output's).
one_version() { # OUT
    local facts
    [[ -s $1 ]] || { echo "no output"; return; }
    facts=$(osmium fileinfo -e -g data.objects_ordered "$1")/$(osmium fileinfo -e -g \
        data.multiple_versions "$1")
    [[ $facts == yes/no ]] && echo verified || echo "osmium: ordered/versions $facts"
}

render_versions() {
    [[ -s $VERSIONS_TSV ]] || return 0
    echo
    echo "## --dedupe and --latest, in turn ($MERGE_REPEATS runs each)"
    echo
    echo "\`pbf-sort -q -O --dedupe|--latest IN -o OUT\`, verified one version each by osmium."
    echo
    python3 - "$VERSIONS_TSV" "$ROWS" <<'PY'
import statistics, sys
tsv, rows = sys.argv[1], sys.argv[2]
merged = {}
for line in open(tsv):
    shape, opt, rep, n = line.rstrip("\n").split("\t")
    merged.setdefault((shape, opt), []).append(int(float(n)))
runs = [l.rstrip("\n").split("\t") for l in open(rows) if l.startswith("versions-")]
print("| shape | run | wall (median) | peak RSS | bytes merged | latest / dedupe | verdicts |")
print("|---|---|---|---|---|---|---|")
for shape in dict.fromkeys(k[0] for k in merged):
    walls = {}
    for opt in ("--dedupe", "--latest"):
        mine = [r for r in runs if r[0] == f"versions-{shape}" and r[3] == f"pbf-sort {opt}"]
        ok = [r for r in mine if r[7] == "0" and r[8] == "verified"]
        if not ok:
            print(f"| {shape} | {opt} | not verified | | | | "
                  + "; ".join(f"{r[7]} {r[8]}" for r in mine) + " |")
            continue
        walls[opt] = statistics.median(float(r[5]) for r in ok)
        rss = max(int(r[6]) for r in ok) / 1024
        ratio = ""
        if opt == "--latest" and "--dedupe" in walls:
            ratio = f"{walls['--latest'] / walls['--dedupe']:.2f}"
        print(f"| {shape} | {opt} | {walls[opt]:.2f} s | {rss:.0f} MiB | "
              f"{max(merged[(shape, opt)])} | {ratio} | {len(ok)} of {len(mine)} verified |")
PY
}

# ------------------------------------------------------- recompression

# The --recompress rows (sorted and repeated shapes): pbf-sort re-compressing
# every blob to zlib:6, nothing decoded, beside its floors: the CPU seconds
# of inflating every blob and of deflating it again on one thread
# (pbf-codec-floor), and their sum over the cores, the least wall time the
# work can take. Rows go to ROWS as table recompress-SHAPE (verified like
# the sorts); CPU seconds per run and the floors to recompress-SHAPE.tsv.
RECOMPRESS=${BENCH_RECOMPRESS:-1}
RECOMPRESS_SHAPES=${BENCH_RECOMPRESS_SHAPES:-sorted repeated}
run_recompress() { # SHAPE IN SIZE
    local shape=$1 in=$2 size=$3 rep out cpu tsv=$WORK/recompress-$1.tsv
    ((RECOMPRESS)) && [[ $SORT_KIND == "pbf-sort driver ($ROOT/pbf-sort)" ]] || return 0
    : >"$tsv"
    log "recompress: the codec floors of $in"
    printf 'floors\t%s\n' "$("$REL/pbf-codec-floor" --compression zlib:6 "$in")" >>"$tsv"
    for ((rep = 1; rep <= REPEATS; rep++)); do
        rm -rf "$OUT" && mkdir -p "$OUT"
        out=$OUT/recompress.osm.pbf
        timed "$(printf '%q -q -O --recompress --compression zlib:6 %q -o %q' "$ROOT/pbf-sort" "$in" "$out")"
        cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {print s}' "$WORK/time.txt")
        printf 'run\t%s\t%s\n' "$rep" "$cpu" >>"$tsv"
        verify_sorted "$in" "$out"
        row "recompress-$shape" "$in" "$size" "pbf-sort --recompress" "$rep" "$VERDICT"
        log "recompress $shape run $rep: $T_WALL s, $cpu s CPU"
    done
    rm -rf "$OUT"
    verify_pending
}

render_recompress() {
    local shape tsv
    for shape in $RECOMPRESS_SHAPES; do
        tsv=$WORK/recompress-$shape.tsv
        if [[ ! -s $tsv ]] || ! grep -q "^recompress-$shape	" "$ROWS"; then continue; fi
        echo
        echo "## Recompression: $shape, $(size_of "$shape"), to zlib:6"
        echo
        echo "\`pbf-sort -q -O --recompress --compression zlib:6 IN -o OUT\`: every blob"
        echo "inflated and deflated, nothing decoded. Floors: \`pbf-codec-floor\` (one"
        echo "thread: inflate every blob, deflate it again), and their sum over $(nproc) cores."
        echo "The target is 1.3 times that sum."
        echo
        render_recompress_table "$shape" "$tsv"
    done
}

render_recompress_table() { # SHAPE TSV
    python3 - "$2" "$ROWS" "$(nproc)" "recompress-$1" <<'PY'
import json, statistics, sys
tsv, rows, cores, table = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
floors, cpu = {}, {}
for line in open(tsv):
    f = line.rstrip("\n").split("\t")
    if f[0] == "floors":
        floors = json.loads(f[1])
    elif f[0] == "run":
        cpu[f[1]] = float(f[2])
runs = [l.rstrip("\n").split("\t") for l in open(rows) if l.startswith(table + "\t")]
ok = [r for r in runs if r[7] == "0" and r[8] == "verified"]
floor = (floors.get("inflate_cpu_s", 0) + floors.get("deflate_cpu_s", 0)) / cores
print("| run | wall (median) | CPU (median) | peak RSS | wall / floor | runs |")
print("|---|---|---|---|---|---|")
print(f"| inflate, one thread | | {floors.get('inflate_cpu_s', 0):.2f} s | | | |")
print(f"| deflate zlib:6, one thread | | {floors.get('deflate_cpu_s', 0):.2f} s | | | |")
print(f"| (inflate + deflate) / {cores} cores | {floor:.2f} s | | | 1.00 | |")
if ok:
    wall = statistics.median(float(r[5]) for r in ok)
    c = statistics.median(cpu.get(r[4], 0.0) for r in ok)
    rss = max(int(r[6]) for r in ok) / 1024
    ratio = f"{wall / floor:.2f}" if floor else "-"
    print(f"| pbf-sort --recompress | {wall:.2f} s | {c:.2f} s | {rss:.0f} MiB | {ratio} | "
          + ", ".join(f"{float(r[5]):.2f} s" for r in runs) + " |")
else:
    print("| pbf-sort --recompress | not verified | | | | "
          + "; ".join(f"{r[7]} {r[8]}" for r in runs) + " |")
PY
}

main() {
    if ((REPORT_ONLY)); then
        [[ -s $ROWS || -s $DISK_TSV ]] || die "$ROWS and $DISK_TSV are missing: no run to report on"
        report
        return
    fi
    LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
    mkdir -p "$DATA" "$WORK"
    : >"$ROWS"
    : >"$AHEAD"
    : >"$NOTES"
    : >"$WORK/parallelism.tsv"
    : >"$DISK_TSV"
    if [[ $BUILD == 1 ]]; then
        log "building release binaries"
        (cd "$ROOT" && cargo build --release --workspace --bins) >&2
    fi
    [[ -x $GEN ]] || die "$GEN is missing (run without --no-build)"
    export PATH=$ROOT/target/release:$PATH
    have osmium || die "osmium is missing (Debian package osmium-tool)"
    [[ -x /usr/bin/time ]] || die "/usr/bin/time is missing (Debian package time)"
    find_sort
    [[ -n $SORT_KIND ]] || echo "all shapes: pbf-sort not run: pbf-sort, pbf-index, pbf-overlap or pbf-copy missing" >>"$NOTES"
    if [[ -n $SORT_KIND && $SORT_KIND == pipeline* ]] && ! have pbf-merge; then
        echo "pipeline without pbf-merge: inputs with overlapping blobs fail (reported as failed)" >>"$NOTES"
    fi
    wants pbfhogg && ! have_pbfhogg "$PBFHOGG_SORT" && echo "all shapes: pbfhogg sort not run: ${PBFHOGG_SORT%% *} missing" >>"$NOTES"
    wants pbfhogg-0.5 && ! have_pbfhogg "$PBFHOGG05_SORT" &&
        echo "all shapes: pbfhogg 0.5 sort not run: ${PBFHOGG05_SORT%% *} missing" >>"$NOTES"
    local shape in size
    ((SCALING_ONLY)) && SHAPES=""
    for shape in $SHAPES; do
        size=$(size_of "$shape")
        in=$(input_for "$shape" "$size")
        log "shape $shape: $in"
        expected_counts "$in" >/dev/null
        run_sorts "sort-$shape" "$in" "$size" "$(wants "$shape" "$OSMIUM_SHAPES" && echo yes || echo no)"
        if wants "$shape" "$INDEX_SHAPES"; then
            run_index "index-$shape" "$in" "$size"
        fi
        if wants "$shape" "$STREAM_SHAPES"; then
            run_streams "$shape" "$in"
        fi
        if wants "$shape" "$PARALLELISM_SHAPES"; then
            run_parallelism "$shape" "$in"
        fi
        ! wants "$shape" "$RECOMPRESS_SHAPES" || run_recompress "$shape" "$in" "$size"
        ! wants "$shape" "$VERSIONS_SHAPES" || run_versions "$shape" "$in" "$size"
        report
    done
    if [[ $SCALING == 1 ]]; then
        for shape in $SCALING_SHAPES; do
            for size in $(scaling_sizes_of "$shape"); do
                in=$(input_for "$shape" "$size")
                log "scaling $shape $size: $in"
                expected_counts "$in" >/dev/null
                if wants "$shape" "$DISK_SHAPES"; then
                    run_disk "$shape" "$in" "$size"
                else
                    run_sorts "scaling-$shape" "$in" "$size" yes
                fi
                report
            done
        done
    fi
    report
}

# Sourced (bench/cores.sh reuses input_for and its settings): define only.
if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
    main
fi
