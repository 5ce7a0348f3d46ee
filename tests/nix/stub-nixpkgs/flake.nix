# A stub of nixpkgs with just what ../../../flake.nix uses, so the flake can
# be evaluated (`nix flake check --no-build`) where nixpkgs cannot be fetched.
# Packages are real but trivial derivations (nothing is ever built); the
# builders check the arguments the real ones need and keep them, so the
# flake's build scripts are evaluated and a missing or misspelt attribute
# fails the check. It is not nixpkgs: it proves the flake evaluates, not that
# it builds.
{
  description = "Stub nixpkgs for evaluating the pbf-sort flake offline";

  outputs =
    { self }:
    let
      lib = import ./lib.nix;
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
