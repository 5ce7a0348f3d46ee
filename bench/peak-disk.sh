#!/usr/bin/env bash
# bench/peak-disk.sh: the peak disk use of one command. A sort writes a
# spool and spill files beside its input and output; how much room a run
# needs at its worst is what a user must have free, and it is invisible
# once the run has ended. This polls the used space of one filesystem while
# the command runs and prints the peak above what was used at the start.
set -uo pipefail

usage() {
    cat <<'USAGE'
Usage: bench/peak-disk.sh [--dir DIR] [--interval SECONDS] [-o FILE] CMD [ARG...]

Runs CMD ARG... and polls the used bytes of DIR's filesystem (statvfs, as
df counts them: blocks in use times the block size) every SECONDS
[0.05] while it runs. Prints on stderr

  peak-disk: PEAK bytes used beyond the start on DIR's filesystem (CMD's exit status)

and with -o writes PEAK alone to FILE. Exits with CMD's status. DIR
defaults to the current directory: give the directory the run writes its
output and spool in. Anything else writing to that filesystem meanwhile is
counted too: on a shared machine, measure on a filesystem of its own (a
loop-mounted image: truncate -s 8G img; mkfs.ext4 -q img; mount -o loop
img DIR). Bytes freed by the command below what was used at the start
count as 0; files left behind after it count in the peak.
USAGE
}

dir=. interval=0.05 out=""
while [[ $# -gt 0 ]]; do
    case $1 in
        --dir) dir=$2; shift 2 ;;
        --interval) interval=$2; shift 2 ;;
        -o) out=$2; shift 2 ;;
        -h | --help) usage; exit 0 ;;
        --) shift; break ;;
        -*) echo "peak-disk.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
        *) break ;;
    esac
done
[[ $# -ge 1 ]] || { usage >&2; exit 2; }
[[ -d $dir ]] || { echo "peak-disk.sh: $dir: not a directory" >&2; exit 2; }

# Bytes in use on DIR's filesystem.
used() {
    local total free size
    read -r total free size < <(stat -f -c '%b %f %S' -- "$dir") || return 1
    echo $(((total - free) * size))
}

start=$(used) || { echo "peak-disk.sh: $dir: statvfs failed" >&2; exit 2; }
peak=$start
"$@" &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
    now=$(used) && ((now > peak)) && peak=$now
    sleep "$interval"
done
wait "$pid"
status=$?
now=$(used) && ((now > peak)) && peak=$now
beyond=$((peak - start))
echo "peak-disk: $beyond bytes used beyond the start on $dir's filesystem (exit $status)" >&2
[[ -z $out ]] || echo "$beyond" >"$out"
exit "$status"
