# The toolkit as a Nix flake: one package with every tool binary, the
# pbf-sort driver (wrapped so its default stages are this package's binaries)
# and the man pages; an app per tool; a development shell; and checks that run
# the test suite, clippy, rustfmt, shellcheck and a man page lint.
#
# nixpkgs is the only input. tests/nix/check.sh evaluates this flake against a
# stub nixpkgs (tests/nix/stub-nixpkgs) on machines that cannot fetch nixpkgs.
{
  description = "Sort OpenStreetMap PBF files with composable Unix filters";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs =
    { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;
      # Linux only: the copier uses copy_file_range and FICLONERANGE, the
      # indexer io_uring.
      systems = [
        "x86_64-linux"
        "aarch64-linux"
      ];
      forAllSystems = f: lib.genAttrs systems (system: f nixpkgs.legacyPackages.${system});

      cargoToml = lib.importTOML ./Cargo.toml;
      version = cargoToml.workspace.package.version;
      # Every binary of the root package ([[bin]] in Cargo.toml), plus the driver.
      tools = map (bin: bin.name) cargoToml.bin;

      # Only what the build and the tests read: no target/, no .git.
      src = lib.fileset.toSource {
        root = ./.;
        fileset = lib.fileset.unions [
          ./Cargo.toml
          ./Cargo.lock
          ./Makefile
          ./pbf-sort
          ./crates
          ./tools
          ./tests
          ./man
          (lib.fileset.maybeMissing ./bench)
        ];
      };

      package =
        pkgs:
        pkgs.rustPlatform.buildRustPackage {
          pname = "pbf-sort";
          inherit version src;
          cargoLock.lockFile = ./Cargo.lock;

          nativeBuildInputs = [
            pkgs.installShellFiles
            pkgs.makeWrapper
          ];

          # The tests run every tool against real PBF files with osmium as the
          # oracle, lint the man pages and run the driver's --help. The files
          # are the committed copy of ../shared/data in tests/fixtures: the
          # tests look for `$PBF_SORT_TEST_DATA`, and some for ../shared/data
          # beside the source tree, so both point there.
          nativeCheckInputs = [
            pkgs.osmium-tool
            pkgs.mandoc
            # script(1): the progress tests run pbf-merge on a pseudo terminal.
            pkgs.util-linux
          ];
          # The tests run the driver script and /usr/bin/env is not in the sandbox.
          postPatch = ''
            patchShebangs pbf-sort tests
          '';
          cargoTestFlags = [ "--workspace" ];
          preCheck = ''
            export PBF_SORT_TEST_DATA=$PWD/tests/fixtures
            mkdir -p ../shared
            ln -sfn "$PBF_SORT_TEST_DATA" ../shared/data
          '';

          postInstall = ''
            install -Dm755 pbf-sort $out/bin/pbf-sort
            wrapProgram $out/bin/pbf-sort \
              --prefix PATH : $out/bin \
              --suffix PATH : ${
                lib.makeBinPath [
                  pkgs.coreutils
                  pkgs.gnugrep
                  pkgs.gawk
                ]
              }
            installManPage man/*.1 man/*.5
          '';

          # Sort a bundled unsorted file with the installed driver and check
          # the result with the driver's own --check.
          doInstallCheck = true;
          installCheckPhase = ''
            runHook preInstallCheck
            $out/bin/pbf-sort --version
            $out/bin/pbf-sort -q --check tests/fixtures/unsorted-vex.osm.pbf -o "$TMPDIR/sorted.osm.pbf"
            runHook postInstallCheck
          '';

          meta = {
            description = cargoToml.package.description;
            license = [
              lib.licenses.mit
              lib.licenses.asl20
            ];
            mainProgram = "pbf-sort";
            platforms = lib.platforms.linux;
          };
        };

      # A check that runs `script` in a copy of the source with `inputs` on PATH.
      checkIn =
        pkgs: name: inputs: script:
        pkgs.runCommand "pbf-sort-${name}" { nativeBuildInputs = inputs; } ''
          cp -r ${src} source
          chmod -R u+w source
          cd source
          ${script}
          touch $out
        '';
    in
    {
      packages = forAllSystems (pkgs: rec {
        pbf-sort = package pkgs;
        default = pbf-sort;
      });

      apps = forAllSystems (
        pkgs:
        let
          pkg = self.packages.${pkgs.stdenv.hostPlatform.system}.default;
          app = name: {
            type = "app";
            program = "${pkg}/bin/${name}";
          };
        in
        lib.genAttrs (tools ++ [ "pbf-sort" ]) app // { default = app "pbf-sort"; }
      );

      devShells = forAllSystems (pkgs: {
        default = pkgs.mkShell {
          inputsFrom = [ self.packages.${pkgs.stdenv.hostPlatform.system}.default ];
          packages = [
            pkgs.cargo
            pkgs.clippy
            pkgs.rustfmt
            pkgs.shellcheck
            pkgs.mandoc
            pkgs.osmium-tool
            pkgs.jq
          ];
        };
      });

      checks = forAllSystems (
        pkgs:
        let
          system = pkgs.stdenv.hostPlatform.system;
          pkg = self.packages.${system}.default;
        in
        {
          # Builds everything and runs `cargo test --workspace` (see preCheck).
          package = pkg;
          clippy = pkg.overrideAttrs (old: {
            pname = "pbf-sort-clippy";
            nativeBuildInputs = old.nativeBuildInputs ++ [ pkgs.clippy ];
            buildPhase = ''
              runHook preBuild
              cargo clippy --workspace --all-targets --offline -- -D warnings
              runHook postBuild
            '';
            doCheck = false;
            doInstallCheck = false;
            installPhase = "touch $out";
          });
          rustfmt = checkIn pkgs "rustfmt" [
            pkgs.cargo
            pkgs.rustfmt
          ] "cargo fmt --all -- --check";
          # The same scripts as `make lint` (the Makefile lists them).
          shellcheck = checkIn pkgs "shellcheck" [ pkgs.shellcheck ] "make shellcheck";
          mandoc = checkIn pkgs "mandoc" [ pkgs.mandoc ] "mandoc -Tlint -Wstyle man/*.1 man/*.5";
        }
      );
    };
}
