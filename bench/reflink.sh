#!/usr/bin/env bash
# bench/reflink.sh: the pbf-reflink benchmark. On a loop-mounted
# XFS image formatted with reflink=1 it times, on one sorted input with
# trusted indexdata (pbf-gen tile --indexdata):
#   pbf-reflink      executing the plan (clones)
#   pbf-copy         executing the same plan (copy_file_range + fsync)
#   cp               cp --reflink=never IN OUT, then sync OUT (the disk's floor)
#   pbf-sort         the driver end to end (index + overlap + auto copier)
#   pbfhogg sort     when on PATH
# and reports the share of data bytes pbf-reflink cloned, the extents
# filefrag flags as shared, and osmium's verdict on every output. Needs root
# (mount). Writes bench/RESULTS-reflink.md; only measured figures, a tool
# that is missing is reported as "not run".
set -euo pipefail

NAME=reflink.sh
# shellcheck source=bench/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

usage() {
    cat <<'EOF'
Usage: bench/reflink.sh [--no-build] [--help]

Environment (defaults in brackets):
  BENCH_SIZE          size of the input [1G]
  BENCH_REPEATS       runs per tool; the median is reported [3]
  BENCH_COMPRESSION   compression of the generated input [zlib:6]
  BENCH_SOURCE        extract to tile [tests/fixtures/sorted-kualalumpur.osm.pbf]
  BENCH_DATA          where a cached input is looked for and the image lives [bench/data]
  BENCH_REFLINK_IMAGE size of the sparse XFS image [4 * BENCH_SIZE + 1G]
  BENCH_REFLINK_RESULTS  report file [bench/RESULTS-reflink.md]
  PBFHOGG_SORT        pbfhogg command template, IN and OUT replaced
                      [pbfhogg sort --force IN -o OUT] (pbfhogg-cli 0.4.1)
EOF
}

script_arg() { return 1; }
parse_args "$@"

RESULTS=${BENCH_REFLINK_RESULTS:-$BENCH/RESULTS-reflink.md}

IMAGE_SIZE=${BENCH_REFLINK_IMAGE:-$((4 * $(bytes_of "$SIZE") + (1 << 30)))}
WORKDIR=""
MNT=""

cleanup() {
    if [[ -n $MNT ]] && mountpoint -q "$MNT"; then
        umount "$MNT" 2>/dev/null || umount -l "$MNT" || true
    fi
    [[ -z $WORKDIR ]] || rm -rf -- "$WORKDIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

mount_xfs() {
    have mkfs.xfs || die "mkfs.xfs is missing (Debian package xfsprogs)"
    mkdir -p "$DATA"
    WORKDIR=$(mktemp -d "$DATA/.reflink-bench.XXXXXX")
    MNT=$WORKDIR/mnt
    mkdir "$MNT"
    truncate -s "$IMAGE_SIZE" "$WORKDIR/xfs.img"
    mkfs.xfs -q -m reflink=1 "$WORKDIR/xfs.img"
    mount -o loop "$WORKDIR/xfs.img" "$MNT" || die "cannot mount a loop device (needs root)"
}

# The input: a cached one from bench/run.sh, else generated onto the image.
make_input() {
    local tag=$SIZE-${COMPRESSION//:/} cached f=$MNT/indexdata.osm.pbf one probe
    cached=$DATA/indexdata-$tag.osm.pbf
    if [[ -s $cached ]]; then
        log "copying $cached onto XFS"
        cp --reflink=never "$cached" "$f"
    else
        probe=$WORKDIR/probe.osm.pbf
        "$GEN" -j 0 tile -n 1 --compression "$COMPRESSION" "$SOURCE" -o "$probe" 2>/dev/null
        one=$(stat -c %s "$probe")
        rm -f "$probe"
        log "generating $f (pbf-gen tile --indexdata)"
        "$GEN" tile -n $((($(bytes_of "$SIZE") + one - 1) / one)) --compression "$COMPRESSION" \
            --indexdata "$SOURCE" -o "$f" 2>"$WORKDIR/gen.log"
    fi
    sync
    echo "$f"
}

# Run a shell command, print its wall time in seconds.
wall() {
    local start end
    start=$(date +%s%N)
    bash -c "$1" >/dev/null 2>>"$WORKDIR/stderr.log" || {
        echo "failed"
        return 0
    }
    end=$(date +%s%N)
    awk -v ns=$((end - start)) 'BEGIN { printf "%.3f\n", ns / 1e9 }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print v[int((NR + 1) / 2)] }'; }

# Objects ordered and counts as osmium sees them.
verdict() {
    local info
    info=$(osmium fileinfo -e -j "$1" 2>&1) || { echo "osmium fails: ${info%%$'\n'*}"; return; }
    python3 -c 'import json,sys; d=json.load(sys.stdin)["data"]; c=d["count"]
print(("ordered" if d["objects_ordered"] else "NOT ordered") + ", %d objects" % (c["nodes"]+c["ways"]+c["relations"]))' <<<"$info"
}

shared_percent() {
    filefrag -v "$1" | awk -v size="$(stat -c %s "$1")" '
        /blocks of/ { for (i = 1; i <= NF; i++) if ($i == "of") bs = $(i + 1) }
        /shared/ { split($0, f, ":"); n += f[4] }
        END { printf "%.1f", (size ? 100 * n * bs / size : 0) }'
}

main() {
    [[ $(id -u) == 0 ]] || die "needs root (mounts a loop device)"
    have osmium || die "osmium is missing (Debian package osmium-tool)"
    if [[ $BUILD == 1 ]]; then
        log "building release binaries"
        (cd "$ROOT" && cargo build --release --bins && cargo build --release -p pbf-bench-gen --bins) >&2
    fi
    for b in pbf-index pbf-overlap pbf-copy pbf-reflink pbf-gen; do
        [[ -x $REL/$b ]] || die "$REL/$b is missing (run without --no-build)"
    done
    export PATH=$REL:$PATH
    local load_start
    load_start=$(cut -d' ' -f1-3 /proc/loadavg)
    mount_xfs
    local in plan out size
    in=$(make_input)
    size=$(stat -c %s "$in")
    plan=$MNT/plan.jsonl
    out=$MNT/out.osm.pbf
    pbf-index -q "$in" | pbf-overlap -q >"$plan"
    local index_from
    index_from=$(pbf-index -v "$in" 2>&1 >/dev/null | grep -o '([0-9]* from indexdata, [0-9]* decoded)' || true)

    declare -A times
    local tool i t
    local tools=(pbf-reflink pbf-copy cp pbf-sort)
    have_pbfhogg "$PBFHOGG_SORT" && tools+=(pbfhogg)
    for ((i = 1; i <= REPEATS; i++)); do
        for tool in "${tools[@]}"; do
            rm -f "$out"
            sync
            case $tool in
                pbf-reflink) t=$(wall "pbf-reflink -q -o '$out' '$plan'") ;;
                pbf-copy) t=$(wall "pbf-copy -q -o '$out' '$plan'") ;;
                cp) t=$(wall "cp --reflink=never '$in' '$out' && sync '$out'") ;;
                pbf-sort) t=$(wall "'$ROOT/pbf-sort' -q -o '$out' '$in'") ;;
                pbfhogg) t=$(wall "$(pbfhogg_cmd "$in" "$out")") ;;
            esac
            times[$tool]+="$t "
            log "run $i $tool: $t s"
        done
    done

    rm -f "$out"
    local vline
    vline=$(pbf-reflink -vv -o "$out" "$plan" 2>&1 >/dev/null)
    local cloned_pct shared_pct reflink_verdict
    cloned_pct=$(grep -o '[0-9.]* % of range bytes cloned' <<<"$vline" | cut -d' ' -f1)
    shared_pct=$(shared_percent "$out")
    reflink_verdict=$(verdict "$out")
    local input_verdict copy_verdict sort_verdict
    input_verdict=$(verdict "$in")
    rm -f "$out"
    pbf-copy -q -o "$out" "$plan"
    copy_verdict=$(verdict "$out")
    rm -f "$out"
    local sort_line
    sort_line=$("$ROOT/pbf-sort" -v -o "$out" "$in" 2>&1 >/dev/null | grep -E '^pbf-(reflink|copy):' || true)
    sort_verdict=$(verdict "$out")
    rm -f "$out"

    local copy_median reflink_median
    copy_median=$(tr ' ' '\n' <<<"${times[pbf-copy]}" | grep -v '^$' | median)
    reflink_median=$(tr ' ' '\n' <<<"${times[pbf-reflink]}" | grep -v '^$' | median)
    {
        echo "# pbf-reflink benchmark"
        echo
        echo "Written by \`bench/reflink.sh\` on $(date -u '+%Y-%m-%d %H:%M UTC'). Measured figures only."
        echo
        echo "| | |"
        echo "|---|---|"
        echo "| CPU | $(awk -F': ' '/model name/ {print $2; exit}' /proc/cpuinfo), $(nproc) cores |"
        echo "| kernel | $(uname -sr) |"
        echo "| filesystem | XFS (reflink=1, $(stat -f -c %s "$MNT")-byte blocks) on a loop-mounted sparse image on $(df -T "$DATA" | awk 'NR == 2 {print $2 " (" $1 ")"}') |"
        echo "| load average at start / end | $load_start / $(cut -d' ' -f1-3 /proc/loadavg) (shared machine, other work running) |"
        echo "| input | $size bytes, pbf-gen tile --indexdata of $(basename "$SOURCE"), $COMPRESSION; pbf-index: ${index_from:-?}; osmium: $input_verdict |"
        echo "| plan | $(grep -c '"type":"copy"' "$plan") copy op(s), $(grep -c '"type":"merge"' "$plan" || true) merge op(s) |"
        echo "| pbfhogg | $(have_pbfhogg "$PBFHOGG_SORT" && echo "${PBFHOGG_SORT}" || echo 'not on PATH: not run') |"
        echo
        echo "Wall time of each step, median of $REPEATS runs (all runs in brackets); the"
        echo "plan is made once beforehand (pbf-index from indexdata + pbf-overlap)."
        echo
        echo "| step | median s | runs s | vs pbf-copy |"
        echo "|---|---:|---|---:|"
        for tool in "${tools[@]}"; do
            local m desc
            m=$(tr ' ' '\n' <<<"${times[$tool]}" | grep -v '^$' | median)
            case $tool in
                pbf-reflink) desc="pbf-reflink -o OUT PLAN (clones)" ;;
                pbf-copy) desc="pbf-copy -o OUT PLAN (copy_file_range, fsync)" ;;
                cp) desc="cp --reflink=never IN OUT; sync OUT" ;;
                pbf-sort) desc="pbf-sort IN -o OUT (index + plan + auto copier)" ;;
                pbfhogg) desc="${PBFHOGG_SORT}" ;;
            esac
            echo "| $desc | $m | ${times[$tool]% } | $(awk -v a="$m" -v b="$copy_median" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.3fx", a / b; else print "-" }') |"
        done
        echo
        echo "- pbf-reflink: ${cloned_pct:-?} % of the data bytes cloned; filefrag flags ${shared_pct} % of the output's bytes as shared; osmium: $reflink_verdict."
        echo "- pbf-reflink -v: \`${vline}\`"
        echo "- pbf-copy output: osmium: $copy_verdict."
        echo "- pbf-sort (auto copier) -v: \`${sort_line:-?}\`; osmium: $sort_verdict."
        echo "- Target: pbf-reflink <= 0.1x pbf-copy and >= 99 % cloned: measured $(awk -v a="$reflink_median" -v b="$copy_median" 'BEGIN { if (b + 0 > 0) printf "%.3fx", a / b; else print "?" }') and ${cloned_pct:-?} %."
    } >"$RESULTS.tmp"
    mv "$RESULTS.tmp" "$RESULTS"
    log "wrote $RESULTS"
    if [[ -s $WORKDIR/stderr.log ]]; then
        log "stderr of the runs:"
        sed 's/^/    /' "$WORKDIR/stderr.log" >&2
    fi
}

main
