#!/usr/bin/env bash
# Evaluate the flake against the stub nixpkgs in tests/nix/stub-nixpkgs:
# `nix flake check --no-build` (every package, app, shell and check must be a
# valid derivation or app), then an evaluation of every app and of the
# package's man pages and wrapper. Nix cannot fetch the real nixpkgs here, so
# this proves the flake evaluates, not that it builds. CI runs it; it fails
# when Nix is missing.
set -euo pipefail
cd "$(dirname "$0")/../.."

command -v nix >/dev/null || { echo "nix-check: nix is not installed (Debian: nix-bin)" >&2; exit 1; }

# The flake as a user's checkout would present it: tracked and untracked
# files, nothing ignored (no target/), copied so Nix need not see a git index.
work=$(mktemp -d)
trap 'rm -rf -- "$work"' EXIT
git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' f; do [[ -e "$f" ]] && printf '%s\0' "$f"; done |
    tar --null -T - -cf - | tar -xf - -C "$work"

# Run nix with the stub as nixpkgs; its stderr is shown only on failure
# (every call repeats the notice that the lock file input was overridden).
nixx() {
    local err=$work.err rc=0
    nix --extra-experimental-features 'nix-command flakes' "$@" \
        --override-input nixpkgs "path:$work/tests/nix/stub-nixpkgs" --no-write-lock-file 2>"$err" || rc=$?
    ((rc == 0)) || { cat "$err" >&2; echo "nix-check: failed: nix $*" >&2; }
    rm -f "$err"
    return "$rc"
}
flake="path:$work"

# The Nix build's tests read the committed copy of ../shared/data in
# tests/fixtures (see flake.nix): it must be complete and unchanged.
echo "nix-check: tests/fixtures against the sha256 sums in its SOURCES.tsv"
(cd tests/fixtures && awk -F'\t' 'NR > 1 { print $3 "  " $1 }' SOURCES.tsv | sha256sum --quiet -c -)
listed=$(awk -F'\t' 'NR > 1 { print $1 }' tests/fixtures/SOURCES.tsv | sort)
present=$(cd tests/fixtures && printf '%s\n' *.pbf | sort)
[[ "$listed" == "$present" ]] || { echo "nix-check: tests/fixtures holds files SOURCES.tsv does not list, or lacks some" >&2; exit 1; }

echo "nix-check: nix flake check --no-build (stub nixpkgs)"
nixx flake check --no-build "$flake"

system=$(nix --extra-experimental-features nix-command eval --impure --raw --expr builtins.currentSystem)
mapfile -t bins < <(sed -n '/^\[\[bin\]\]/,/^$/s/^name = "\(.*\)"/\1/p' Cargo.toml)
want=$(printf '%s\n' "${bins[@]}" default pbf-sort | sort | tr '\n' ' ')
got=$(nixx eval --raw "$flake#apps.$system" --apply 'a: builtins.concatStringsSep " " (builtins.sort builtins.lessThan (builtins.attrNames a)) + " "')
[[ "$got" == "$want" ]] || { echo "nix-check: apps are '$got', expected '$want'" >&2; exit 1; }

for app in default "${bins[@]}"; do
    program=$(nixx eval --raw "$flake#apps.$system.$app.program")
    [[ "$program" == /nix/store/*/bin/* ]] || { echo "nix-check: app $app runs '$program'" >&2; exit 1; }
done
[[ "$(nixx eval --raw "$flake#apps.$system.default.program")" == */bin/pbf-sort ]] ||
    { echo "nix-check: the default app is not pbf-sort" >&2; exit 1; }

# The install script must install the driver, wrap it so its stages are this
# package's binaries, and install every page. ($out is Nix's, not ours.)
post=$(nixx eval --raw "$flake#packages.$system.default.postInstall")
# shellcheck disable=SC2016
for needle in 'install -Dm755 pbf-sort $out/bin/pbf-sort' 'wrapProgram $out/bin/pbf-sort' \
    '--prefix PATH : $out/bin' 'installManPage man/*.1 man/*.5'; do
    [[ "$post" == *"$needle"* ]] || { echo "nix-check: postInstall lacks: $needle" >&2; exit 1; }
done
[[ "$(nixx eval --raw "$flake#packages.$system.default.meta.mainProgram")" == pbf-sort ]]
[[ "$(nixx eval --raw "$flake#packages.$system.default.preCheck")" == *PBF_SORT_TEST_DATA=*tests/fixtures* ]]
echo "nix-check: flake evaluates; apps: $got"
