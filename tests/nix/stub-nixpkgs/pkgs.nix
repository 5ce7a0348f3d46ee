# Stub packages and builders for one system. Every value is a derivation
# that writes a one-line file; builders keep the arguments they were given
# (as environment strings, so they are all evaluated) and, as nixpkgs'
# derivations do, as attributes (`pkg.nativeCheckInputs` is a list of
# packages). A package's name is its nixpkgs attribute, so
# tests/nix/checkphase.sh can map the check inputs to Debian packages.
{ lib, system }:
let
  # Attributes that cannot be passed to builtins.derivation as they are.
  toEnv =
    attrs:
    builtins.mapAttrs (
      _: v:
      if builtins.isAttrs v || builtins.isList v || builtins.isFunction v then
        builtins.toJSON (builtins.mapAttrs (_: x: if builtins.isFunction x then "<function>" else x) (
          if builtins.isAttrs v then v else { list = v; }
        ))
      else if v == null then
        ""
      else
        v
    ) (builtins.removeAttrs attrs [ "passthru" "meta" ]);

  mkDerivation =
    attrs:
    let
      name = attrs.name or "${attrs.pname}-${attrs.version}";
      drv = derivation (
        toEnv attrs
        // {
          inherit name system;
          builder = "/bin/sh";
          args = [
            "-c"
            "echo stub > $out"
          ];
        }
      );
    in
    drv
    // builtins.removeAttrs attrs [
      "passthru"
      "meta"
    ]
    // (attrs.passthru or { })
    // {
      meta = attrs.meta or { };
      overrideAttrs = f: mkDerivation (attrs // f attrs);
    };

  package = name: mkDerivation { inherit name; };

  # nixpkgs' buildRustPackage needs a source, a lock (file or hash) and names.
  buildRustPackage =
    attrs:
    assert attrs ? src;
    assert attrs ? pname && attrs ? version;
    assert
      (attrs ? cargoLock && builtins.pathExists attrs.cargoLock.lockFile)
      || attrs ? cargoHash
      || throw "buildRustPackage: cargoLock.lockFile or cargoHash is required";
    mkDerivation (
      attrs
      // {
        nativeBuildInputs = (attrs.nativeBuildInputs or [ ]) ++ [ cargo rustc ];
      }
    );

  cargo = package "cargo";
  rustc = package "rustc";

  # python3.withPackages: the packages must exist in the stub's set (a
  # misspelt one fails); the environment is named after them.
  pythonPackages = {
    pyosmium = package "pyosmium";
  };
  # postgresql_15.withPackages: as python3's, the environment named after
  # the extensions.
  postgresqlPackages = {
    postgis = package "postgis";
  };
  postgresql_15 = package "postgresql_15" // {
    pkgs = postgresqlPackages;
    withPackages =
      f:
      package "postgresql_15-with-${
        builtins.concatStringsSep "-" (map (p: p.name) (f postgresqlPackages))
      }";
  };
  python3 = package "python3" // {
    pkgs = pythonPackages;
    withPackages =
      f: package "python3-with-${builtins.concatStringsSep "-" (map (p: p.name) (f pythonPackages))}";
  };
in
{
  inherit
    cargo
    rustc
    python3
    postgresql_15
    ;
  python3Packages = pythonPackages;
  stdenv.hostPlatform.system = system;
  rustPlatform = {
    inherit buildRustPackage;
  };
  mkShell =
    attrs:
    mkDerivation (
      {
        name = "shell";
      }
      // builtins.removeAttrs attrs [ "inputsFrom" ]
      // {
        inputsFrom = map (d: d.name) (attrs.inputsFrom or [ ]);
      }
    );
  runCommand =
    name: env: script:
    mkDerivation (env // { inherit name script; });
  installShellFiles = package "install-shell-files";
  makeWrapper = package "make-wrapper";
  coreutils = package "coreutils";
  gnugrep = package "gnugrep";
  gawk = package "gawk";
  clippy = package "clippy";
  rustfmt = package "rustfmt";
  shellcheck = package "shellcheck";
  mandoc = package "mandoc";
  osmium-tool = package "osmium-tool";
  util-linux = package "util-linux";
  jq = package "jq";
  time = package "time";
  xfsprogs = package "xfsprogs";
  btrfs-progs = package "btrfs-progs";
  osmctools = package "osmctools";
  zstd = package "zstd";
  osm2pgsql = package "osm2pgsql";
  e2fsprogs = package "e2fsprogs";
  bashInteractive = package "bashInteractive";
}
