# A stub of nixpkgs for evaluating ../../../flake.nix where nixpkgs cannot be
# fetched: the real nixpkgs `lib` (the input `nixpkgs-lib`, which
# tests/nix/check.sh points at a copy of nixpkgs' lib with --override-input),
# and stub packages (pkgs.nix). Packages are real but trivial derivations
# (nothing is ever built); the builders check the arguments the real ones need
# and keep them, so the flake's build scripts are evaluated and a missing or
# misspelt attribute fails the check. It proves the flake evaluates, not that
# it builds.
{
  description = "Stub nixpkgs (real lib, stub packages) for evaluating the pbf-sort flake offline";

  # Always overridden by tests/nix/check.sh; the URL says what it stands for.
  inputs.nixpkgs-lib.url = "github:nix-community/nixpkgs.lib";

  outputs =
    { self, nixpkgs-lib }:
    let
      inherit (nixpkgs-lib) lib;
      systems = [
        "x86_64-linux"
        "aarch64-linux"
        "x86_64-darwin"
        "aarch64-darwin"
      ];
    in
    {
      inherit lib;
      legacyPackages = lib.genAttrs systems (system: import ./pkgs.nix { inherit lib system; });
    };
}
