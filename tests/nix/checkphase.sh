#!/usr/bin/env bash
# Run the package's tests the way the flake's checkPhase runs them in a Nix
# build, as far as a machine without nixpkgs allows, so a test that passes
# under `make test` but cannot pass in the Nix sandbox fails here first:
#  - the source is the one the flake's lib.fileset selects (evaluated with
#    the real nixpkgs lib by tests/nix/check.sh's nixx, copied from the store),
#    with no ../shared beside it; the flake's postPatch runs on it;
#  - the tests are built as cargoCheckHook builds them (`cargo test
#    --target <host>`, the flake's checkType and cargoTestFlags);
#  - they run as an unprivileged user (named, as the sandbox names it, in an
#    /etc/passwd and /etc/group of its own) in a private mount namespace where
#    /usr/bin, /usr/sbin and /usr/local/bin are empty tmpfs (only /bin/sh is
#    there, as in the sandbox), with a PATH holding only the stdenv's commands
#    and those of the check inputs the flake declares (Debian stand-ins,
#    tests/nix/check-inputs.tsv), HOME=/homeless-shelter, and the flake's
#    preCheck sourced first;
#  - the flake's shellcheck and mandoc checks run their scripts the same way.
# Needs root (unshare -m, mounts, setpriv) and Nix 2.18+ (see check.sh).
#
# Also runs `.ci/deps test` the same way with the development shell's
# packages on PATH: `nix develop` must provide what `make test` probes.
#
# Usage: tests/nix/checkphase.sh [TEST-NAME-FILTER]   (a filter is passed to
# every test binary, for a quick run of some tests; PBF_SORT_CHECKPHASE_DIR=DIR
# keeps the work directory, and with it the build, between runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD

die() { echo "checkphase: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "run as root (it mounts in a private namespace and drops to an unprivileged user)"
command -v jq >/dev/null || die "jq is missing"

# The sandbox's build user and group (Nix's nixbld1), and its core count.
build_uid=30001 build_gid=30000
cores=$(nproc)

# shellcheck source=tests/nix/check.sh
PBF_SORT_NIX_CHECK_LIB=1 source tests/nix/check.sh
nix_setup
W=${PBF_SORT_CHECKPHASE_DIR:-}
if [[ -z "$W" ]]; then
    W=$(mktemp -d /tmp/pbf-sort-checkphase.XXXXXX)
    trap 'rm -rf -- "$work" "$work.err" "$work.cache" "$W"' EXIT
else
    mkdir -p "$W"
    W=$(cd "$W" && pwd)
    trap 'rm -rf -- "$work" "$work.err" "$work.cache"' EXIT
fi
chmod 755 "$W"
build=$W/build src_dir=$W/build/source path_dir=$W/path host=$W/host

# What the flake says about the package's check.
system=$("$NIX" --extra-experimental-features nix-command eval --impure --raw --expr builtins.currentSystem)
pkg="$flake#packages.$system.default"
flake_src=$(nixx eval --raw "$pkg.src")
mapfile -t check_inputs < <(nixx eval --json "$pkg.nativeCheckInputs" --apply 'map (p: p.name)' | jq -r '.[]')
check_type=$(nixx eval --raw "$pkg" --apply 'p: p.checkType or "release"')
mapfile -t test_flags < <(nixx eval --json "$pkg" --apply 'p: p.cargoTestFlags or [ ]' | jq -r '.[]')
post_patch=$(nixx eval --raw "$pkg" --apply 'p: p.postPatch or ""')
pre_check=$(nixx eval --raw "$pkg" --apply 'p: p.preCheck or ""')
echo "checkphase: source $flake_src; check inputs: ${check_inputs[*]}; checkType $check_type"

# Link every command of `spec` (a Debian package, or a command by absolute
# path) into $path_dir, pointing into the bind mounts of the hidden
# directories ($host/usr/bin, ...), which only the namespace below has.
link_commands() {
    local spec=$1 cmds c real name
    [[ $spec != - ]] || return 0
    if [[ $spec == /* || $spec == *=/* ]]; then
        cmds=("$spec")
    else
        dpkg-query -W -f='${Status}' "$spec" 2>/dev/null | grep -q 'install ok installed' ||
            die "Debian package $spec (a stand-in, tests/nix/check-inputs.tsv) is not installed"
        mapfile -t cmds < <(dpkg -L "$spec" | grep -E '^/(usr/)?s?bin/[^/]+$')
    fi
    for c in "${cmds[@]}"; do
        name=${c%%=*} c=${c#*=}
        real=$(readlink -f "$c")
        [[ -x "$real" && ! -d "$real" ]] || continue
        case $real in /usr/bin/* | /usr/sbin/* | /usr/local/bin/*) real=$host$real ;; esac
        ln -sfn "$real" "$path_dir/${name##*/}"
    done
}

# A PATH directory of the stdenv's commands and those of `nix_names`.
make_path() {
    local name specs
    rm -rf "$path_dir"
    mkdir -p "$path_dir"
    for name in stdenv "$@"; do
        specs=$(awk -F'\t' -v n="$name" '!/^#/ && $1 == n { print $2 }' tests/nix/check-inputs.tsv)
        [[ -n "$specs" ]] || die "no Debian stand-in for the flake's check input '$name': add it to tests/nix/check-inputs.tsv"
        for spec in $specs; do link_commands "$spec"; done
    done
}

# nixpkgs' patchShebangs, as far as the flake's postPatch uses it: rewrite
# the interpreter of every executable script to the one on the build's PATH.
# (Called from the flake's postPatch, through eval.)
# shellcheck disable=SC2317
patchShebangs() {
    local f line interp
    while IFS= read -r -d '' f; do
        IFS= read -r line <"$f" || true
        [[ $line == '#!'* ]] || continue
        read -r -a interp <<<"${line#\#!}"
        if [[ ${interp[0]} == */env ]]; then interp=("${interp[@]:1}"); fi
        interp[0]=$path_dir/$(basename "${interp[0]}")
        [[ -L "${interp[0]}" ]] || die "patchShebangs: no ${interp[0]##*/} on the build's PATH for $f"
        sed -i "1s|.*|#!${interp[*]}|" "$f"
    done < <(find "$@" -type f -perm -u+x -print0)
}

# 1. The source: exactly what the flake's fileset selects, writable (as the
# unpack phase leaves it), with fresh mtimes so cargo rebuilds a kept
# directory's changed files (a kept target/ is all that is left of a run).
mkdir -p "$src_dir"
find "$src_dir" -mindepth 1 -maxdepth 1 ! -name target -exec rm -rf {} +
cp -r "$flake_src/." "$src_dir"
chmod -R u+w,a+rX "$src_dir"
[[ ! -e "$build/../shared" && ! -e "$build/shared" ]] || die "a shared folder is beside the copied source"
make_path "${check_inputs[@]}"
(cd "$src_dir" && eval "$post_patch")

# 2. The build, with the host's toolchain and PATH (a Nix build has cargo
# and rustc on PATH; no test runs them). cargoCheckHook: --target <host>,
# no profile flag for checkType "debug", --<type> otherwise.
triple=$(rustc -vV | sed -n 's/^host: //p')
profile=()
[[ $check_type == debug ]] || profile=(--profile "$check_type")
cargo_args=(--target "$triple" "${profile[@]}" "${test_flags[@]}")
echo "checkphase: cargo test --no-run ${cargo_args[*]}"
(cd "$src_dir" && cargo test --no-run "${cargo_args[@]}" --message-format=json-render-diagnostics) |
    jq -r 'select(.reason == "compiler-artifact" and .profile.test and .executable != null)
           | "\(.executable)\t\(.manifest_path)"' >"$W/tests.tsv"
(($(wc -l <"$W/tests.tsv") > 5)) || die "cargo built too few test binaries"
# Doc tests compile with rustdoc, which the hidden directories would cut off
# here (the sandbox has rustc on PATH): they run now, before hiding.
(cd "$src_dir" && cargo test --doc "${cargo_args[@]}" -q)
chown -R "$build_uid:$build_gid" "$build"

# 3. The runner: the preCheck, then every test binary from its package's
# directory (as cargo runs them), the way cargoCheckHook passes threads.
cat >"$W/run-tests.sh" <<EOF
set -u
cd $(printf %q "$src_dir")
$pre_check
failed=()
while IFS=\$'\\t' read -r exe manifest; do
    (cd "\${manifest%/*}" && "\$exe" --test-threads=$cores $(printf %q "${1:-}")) || failed+=("\${exe##*/}")
done <$(printf %q "$W/tests.tsv")
for check in $(printf %q "$W")/checks/*; do
    [[ -z $(printf %q "${1:-}") ]] || break
    echo "checkphase: check \${check##*/}"
    (export PATH=\$check/path out=\$check/out && cd "\$check/work" && bash -e "\$check/script") ||
        failed+=("check-\${check##*/}")
done
if ((\${#failed[@]})); then
    echo "checkphase: FAILED: \${failed[*]}" >&2
    exit 1
fi
EOF

# The flake's script checks (shellcheck, mandoc): their whole build script
# (it copies the flake's source from the store) in an empty directory, with
# the stdenv and their own inputs on PATH.
rm -rf "$W/checks"
for check in shellcheck mandoc; do
    d=$W/checks/$check
    mkdir -p "$d/work"
    nixx eval --raw "$flake#checks.$system.$check.script" >"$d/script"
    mapfile -t inputs < <(nixx eval --json "$flake#checks.$system.$check.nativeBuildInputs" --apply 'map (p: p.name)' | jq -r '.[]')
    path_dir=$d/path make_path "${inputs[@]}"
done
# The development shell: `.ci/deps test` in a copy of the source, with the
# stdenv and the shell's packages on PATH (a probe that reaches for a
# command by absolute path, or a missing package, fails it). Run through
# bash: `nix develop` runs on the user's host, where /usr/bin/env of the
# script's #! line exists (NixOS has it too).
d=$W/checks/devshell-deps
mkdir -p "$d/work"
mapfile -t inputs < <(nixx eval --json "$flake#devShells.$system.default.packages" --apply 'map (p: p.name)' | jq -r '.[]')
path_dir=$d/path make_path "${inputs[@]}"
# shellcheck disable=SC2016
printf 'cp -r %q source\ncd source\nbash .ci/deps test\ntouch "$out"\n' "$flake_src" >"$d/script"
chown -R "$build_uid:$build_gid" "$W/checks"

# 4. The sandbox: the host's command directories bind-mounted under $host
# (the PATH links point there), then hidden under tmpfs; /bin/sh, which
# the sandbox provides, is the only command left in them (/bin is /usr/bin).
hide=(/usr/bin /usr/sbin /usr/local/bin)
for d in /bin /sbin; do [[ -L $d ]] || hide+=("$d"); done
# The sandbox's /etc/passwd and /etc/group, which name the build user
# (initdb, for one, looks the user up), in this namespace only.
printf 'root:x:0:0:Nix build user:/build:/noshell\nnixbld:x:%s:%s:Nix build user:/build:/noshell\nnobody:x:65534:65534:Nobody:/:/noshell\n' \
    "$build_uid" "$build_gid" >"$W/passwd"
printf 'root:x:0:\nnixbld:!:%s:\nnogroup:x:65534:\n' "$build_gid" >"$W/group"
cat >"$W/enter.sh" <<EOF
set -eu
mount --bind "$W/passwd" /etc/passwd
mount --bind "$W/group" /etc/group
for d in ${hide[*]}; do mkdir -p "$host\$d"; mount --bind "\$d" "$host\$d"; done
for d in ${hide[*]}; do "$host/usr/bin/mount" -t tmpfs -o mode=755 tmpfs "\$d"; done
"$host/usr/bin/ln" -s "$host/usr/bin/bash" /bin/sh
exec "$host/usr/bin/setpriv" --reuid=$build_uid --regid=$build_gid --clear-groups \\
    "$host/usr/bin/env" -i PATH="$path_dir" HOME=/homeless-shelter SHELL="$path_dir/bash" \\
    TMPDIR="$build" TMP="$build" TEMP="$build" TEMPDIR="$build" NIX_BUILD_TOP="$build" \\
    NIX_BUILD_CORES=$cores TERM=xterm-256color SOURCE_DATE_EPOCH=315532800 \\
    "$path_dir/bash" "$W/run-tests.sh"
EOF
echo "checkphase: running $(wc -l <"$W/tests.tsv") test binaries as uid $build_uid with PATH=$path_dir only"
unshare -m --propagation private bash "$W/enter.sh"
echo "checkphase: passed"
