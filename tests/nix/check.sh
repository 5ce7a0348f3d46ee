#!/usr/bin/env bash
# Evaluate the flake the way Nix would on a user's machine, as far as a
# machine without nixpkgs allows: against the real nixpkgs lib (a copy of
# nixpkgs' lib/, `$PBF_SORT_NIXPKGS_LIB`, by default ../shared/nix/nixpkgs-lib
# beside the repository) with stub packages only (tests/nix/stub-nixpkgs).
# `nix flake check --no-build --all-systems` with no warnings, every app,
# the package's install script, and the source the real lib.fileset selects.
# It proves the flake evaluates, not that it builds. Needs Nix 2.18 or newer
# (`$PBF_SORT_NIX`, else `nix` on PATH, else /opt/nix-trixie/bin/nix from
# .ci/nix-trixie); fails when it or the lib is missing. CI runs it.
#
# Also a library for tests/nix/checkphase.sh: sourced with
# PBF_SORT_NIX_CHECK_LIB=1, it only defines nix_setup and nixx.
set -euo pipefail

# Sets NIX (a Nix of 2.18 or newer), LIB (the nixpkgs lib) and work (the flake
# as a user's checkout presents it, copied to a temporary directory).
nix_setup() {
    local root candidates c version
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    LIB=${PBF_SORT_NIXPKGS_LIB:-$root/../shared/nix/nixpkgs-lib}
    [[ -f "$LIB/lib/default.nix" ]] || {
        echo "nix-check: the nixpkgs lib is missing at $LIB (set PBF_SORT_NIXPKGS_LIB to a copy of nixpkgs' lib)" >&2
        return 1
    }
    LIB=$(cd "$LIB" && pwd)
    candidates=("${PBF_SORT_NIX:-}" "$(command -v nix || true)" /opt/nix-trixie/bin/nix)
    NIX=
    for c in "${candidates[@]}"; do
        [[ -n "$c" && -x "$c" ]] || continue
        version=$("$c" --version | awk '{ print $NF }')
        if printf '2.18\n%s\n' "$version" | sort -V -C; then
            NIX=$c
            break
        fi
        echo "nix-check: $c is Nix $version; the nixpkgs lib needs 2.18 or newer" >&2
    done
    [[ -n "$NIX" ]] || {
        echo "nix-check: no Nix 2.18 or newer (on Debian bookworm: .ci/nix-trixie)" >&2
        return 1
    }
    # Nix's configuration is the project's own (tests/nix/nix.conf), and its
    # caches are this run's: nothing of the host's Nix setup reaches it.
    unset "${!NIX_@}"
    export NIX_CONF_DIR=$root/tests/nix NIX_USER_CONF_FILES=$root/tests/nix/nix.conf
    # The flake as a user's checkout would present it: tracked and untracked
    # files, nothing ignored (no target/), copied so Nix need not see a git index.
    work=$(mktemp -d)
    (cd "$root" && git ls-files -z --cached --others --exclude-standard |
        while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done |
        tar --null -T - -cf - | tar -xf - -C "$work")
    flake="path:$work"
    export XDG_CACHE_HOME=$work.cache
}

# Run nix with the stub packages and the real lib as nixpkgs; its stderr
# goes to $work.err (shown only on failure: every call repeats the notice
# that the lock file's inputs were overridden).
nixx() {
    local rc=0
    "$NIX" --extra-experimental-features 'nix-command flakes' "$@" \
        --override-input nixpkgs "path:$work/tests/nix/stub-nixpkgs" \
        --override-input nixpkgs/nixpkgs-lib "path:$LIB" \
        --no-write-lock-file 2>"$work.err" || rc=$?
    ((rc == 0)) || { cat "$work.err" >&2; echo "nix-check: failed: nix $*" >&2; }
    return "$rc"
}

[[ -n "${PBF_SORT_NIX_CHECK_LIB:-}" ]] && return 0

cd "$(dirname "$0")/../.."
nix_setup
trap 'rm -rf -- "$work" "$work.err" "$work.cache"' EXIT
echo "nix-check: $("$NIX" --version), nixpkgs lib at $LIB"

# The tests read the real files in tests/fixtures: complete and unchanged.
echo "nix-check: tests/fixtures against the sha256 sums in its SOURCES.tsv"
(cd tests/fixtures && awk -F'\t' 'NR > 1 { print $3 "  " $1 }' SOURCES.tsv | sha256sum --quiet -c -)
listed=$(awk -F'\t' 'NR > 1 { print $1 }' tests/fixtures/SOURCES.tsv | sort)
present=$(cd tests/fixtures && printf '%s\n' *.pbf | sort)
[[ "$listed" == "$present" ]] || { echo "nix-check: tests/fixtures holds files SOURCES.tsv does not list, or lacks some" >&2; exit 1; }

echo "nix-check: nix flake check --no-build --all-systems (real lib, stub packages)"
nixx flake check --no-build --all-systems "$flake"
# Nix's warnings (an app without meta, an unknown output) fail the check; the
# notice about the overridden lock file is ours.
if grep '^warning:' "$work.err" | grep -v 'not writing modified lock file' >&2; then
    echo "nix-check: nix flake check warns (above)" >&2
    exit 1
fi

system=$("$NIX" --extra-experimental-features nix-command eval --impure --raw --expr builtins.currentSystem)
mapfile -t bins < <(sed -n '/^\[\[bin\]\]/,/^$/s/^name = "\(.*\)"/\1/p' Cargo.toml)
want=$(printf '%s\n' "${bins[@]}" default pbf-sort | sort | tr '\n' ' ')
got=$(nixx eval --raw "$flake#apps.$system" --apply 'a: builtins.concatStringsSep " " (builtins.sort builtins.lessThan (builtins.attrNames a)) + " "')
[[ "$got" == "$want" ]] || { echo "nix-check: apps are '$got', expected '$want'" >&2; exit 1; }

for app in default "${bins[@]}"; do
    program=$(nixx eval --raw "$flake#apps.$system.$app.program")
    [[ "$program" == /nix/store/*/bin/* ]] || { echo "nix-check: app $app runs '$program'" >&2; exit 1; }
    [[ -n "$(nixx eval --raw "$flake#apps.$system.$app.meta.description")" ]] ||
        { echo "nix-check: app $app has no meta.description" >&2; exit 1; }
done
[[ "$(nixx eval --raw "$flake#apps.$system.default.program")" == */bin/pbf-sort ]] ||
    { echo "nix-check: the default app is not pbf-sort" >&2; exit 1; }

# The install script must install the driver, wrap it so its stages are this
# package's binaries, and install every page and completion. ($out is Nix's,
# not ours.)
post=$(nixx eval --raw "$flake#packages.$system.default.postInstall")
# shellcheck disable=SC2016
for needle in 'install -Dm755 pbf-sort $out/bin/pbf-sort' 'wrapProgram $out/bin/pbf-sort' \
    '--prefix PATH : $out/bin' 'installManPage man/*.1 man/*.5' \
    'installShellCompletion completions/*.{bash,fish} --zsh completions/_*'; do
    [[ "$post" == *"$needle"* ]] || { echo "nix-check: postInstall lacks: $needle" >&2; exit 1; }
done
[[ "$(nixx eval --raw "$flake#packages.$system.default.meta.mainProgram")" == pbf-sort ]]

# The source the real lib.fileset.toSource selects (copied to the store while
# evaluating) holds what the checks read: README.md for the cookbook test,
# every script `make shellcheck` lints, the fixtures, the completions (the
# drift test compares them); and no test needs a ../shared beside it.
src=$(nixx eval --raw "$flake#packages.$system.default.src")
mapfile -t linted < <(make -s --no-print-directory -f - print-shellcheck <<'EOF'
include Makefile
print-shellcheck:
	@printf '%s\n' $(SHELLCHECK_FILES)
EOF
)
((${#linted[@]} > 3)) || { echo "nix-check: Makefile lists no SHELLCHECK_FILES" >&2; exit 1; }
for f in README.md Cargo.lock tests/fixtures/SOURCES.tsv man/pbf-sort.1 completions/pbf-sort.bash \
    completions/_pbf-sort completions/pbf-sort.fish "${linted[@]}"; do
    [[ -f "$src/$f" ]] || { echo "nix-check: the flake's source lacks $f" >&2; exit 1; }
done
[[ ! -e "$src/target" && ! -e "$src/.git" ]] || { echo "nix-check: the flake's source holds target/ or .git" >&2; exit 1; }
pre=$(nixx eval --raw "$flake#packages.$system.default" --apply 'p: p.preCheck or ""')
[[ "$pre" != *shared* ]] || { echo "nix-check: preCheck still reaches for ../shared: $pre" >&2; exit 1; }
echo "nix-check: flake evaluates; source $src; apps: $got"
