# The toolkit as a Nix flake: one package with every tool binary, the
# pbf-sort driver (wrapped so its default stages are this package's binaries),
# the man pages and the shell completions; an app per tool; a development
# shell; and checks that run the test suite, clippy, rustfmt, shellcheck and a
# man page lint.
#
# nixpkgs is the only input. tests/nix/check.sh evaluates this flake against
# the real nixpkgs lib with stub packages (tests/nix/stub-nixpkgs) on machines
# that cannot fetch nixpkgs, and tests/nix/checkphase.sh runs the package's
# tests the way its checkPhase would. Needs Nix 2.18 or newer (nixpkgs' lib).
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

      # Only what the build and the checks read: no target/, no .git. The
      # cookbook test reads README.md; the shellcheck check lints the scripts
      # `make shellcheck` lists (.ci/, fuzz/run.sh, bench/ and tests/nix/).
      src = lib.fileset.toSource {
        root = ./.;
        fileset = lib.fileset.unions [
          ./Cargo.toml
          ./Cargo.lock
          ./Makefile
          ./README.md
          ./pbf-sort
          ./crates
          ./tools
          ./tests
          ./man
          ./completions
          ./bench
          ./.ci
          ./fuzz/run.sh
        ];
      };

      # Every command the tests run besides the tools themselves and the
      # stdenv's (bash, coreutils, make, ...): the package's check inputs and
      # the development shell's. tests/nix/checkphase.sh runs the tests with
      # these (and the stdenv's) as the only commands on PATH.
      testTools = pkgs: [
        # The oracle: osmium cat, sort, fileinfo.
        pkgs.osmium-tool
        # The man page lint.
        pkgs.mandoc
        # script(1): the progress tests run pbf-merge on a pseudo terminal.
        pkgs.util-linux
        # GNU time: the fault tests measure each run's peak RSS.
        pkgs.time
        # The stream tests put jq and a Python JSON reader between stages;
        # pyosmium reads the outputs of the XFS tests (which skip unless root).
        pkgs.jq
        (pkgs.python3.withPackages (ps: [ ps.pyosmium ]))
        # osmconvert: default outputs must stay readable by osmctools.
        pkgs.osmctools
        # zstd: the hint for a zstd-compressed PBF is run as printed (gzip,
        # bzip2 and xz are the stdenv's).
        pkgs.zstd
        # The importer tests: osm2pgsql into a throwaway PostgreSQL cluster
        # with PostGIS (initdb, pg_ctl and psql on PATH).
        pkgs.osm2pgsql
        (pkgs.postgresql_15.withPackages (ps: [ ps.postgis ]))
        # The completion tests load completions/*.bash into bash and run
        # them with complete and compgen, which the stdenv's bash (built
        # without readline) lacks.
        pkgs.bashInteractive
      ];

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

          # The tests run every tool against the real PBF files in
          # tests/fixtures with osmium as the oracle, lint the man pages and
          # hold the driver's options to its help. The tests that mount
          # filesystems (XFS reflinks, a full tmpfs) need root and skip in
          # the sandbox.
          nativeCheckInputs = testTools pkgs;
          # The tests run the driver script and /usr/bin/env is not in the sandbox.
          postPatch = ''
            patchShebangs pbf-sort tests
          '';
          cargoTestFlags = [ "--workspace" ];
          # The tests run in cargo's dev profile, as `make test` runs them:
          # with debug assertions and overflow checks, which the release
          # profile turns off. The dev profile is optimised (opt-level 2,
          # Cargo.toml), so the suite takes minutes; the price is a second
          # compilation of the workspace beside the release build.
          checkType = "debug";

          # The driver's PATH: this package's stages first, then exactly the
          # commands the script runs (cat, dirname, mkdir, rm, stat, tee from
          # coreutils).
          postInstall = ''
            install -Dm755 pbf-sort $out/bin/pbf-sort
            wrapProgram $out/bin/pbf-sort \
              --prefix PATH : $out/bin \
              --suffix PATH : ${
                lib.makeBinPath [ pkgs.coreutils ]
              }
            installManPage man/*.1 man/*.5
            # Generated from the clap definitions and committed (make man).
            installShellCompletion completions/*.{bash,fish} --zsh completions/_*
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
            meta.description =
              if name == "pbf-sort" then
                cargoToml.package.description
              else
                "${name}, a stage of the pbf-sort pipeline (man ${name})";
          };
        in
        lib.genAttrs (tools ++ [ "pbf-sort" ]) app // { default = app "pbf-sort"; }
      );

      # Everything `make test` needs (what `.ci/deps test` probes): the
      # toolchain, the lints, the tests' tools, and xfsprogs, btrfs-progs and
      # e2fsprogs (filefrag) for the reflink tests, which run as root.
      devShells = forAllSystems (pkgs: {
        default = pkgs.mkShell {
          inputsFrom = [ self.packages.${pkgs.stdenv.hostPlatform.system}.default ];
          packages = [
            pkgs.cargo
            pkgs.clippy
            pkgs.rustfmt
            pkgs.shellcheck
            pkgs.xfsprogs
            pkgs.btrfs-progs
            pkgs.e2fsprogs
          ]
          ++ testTools pkgs;
        };
      });

      checks = forAllSystems (
        pkgs:
        let
          system = pkgs.stdenv.hostPlatform.system;
          pkg = self.packages.${system}.default;
        in
        {
          # Builds everything and runs `cargo test --workspace` (checkType).
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
