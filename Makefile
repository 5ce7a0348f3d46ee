# Entry points a newcomer and CI use. `make test` is the test command CI runs.
CARGO ?= cargo

.PHONY: all build test lint fmt-check clippy shellcheck man demo install nix-check checkphase bench bench-scaling clean

# The tool binaries: every [[bin]] of the root Cargo.toml.
BINS := $(shell sed -n '/^\[\[bin\]\]/,/^$$/s/^name = "\(.*\)"/\1/p' Cargo.toml)
PREFIX ?= /usr/local
DEMO_IN ?= tests/fixtures/unsorted-vex.osm.pbf
DEMO_OUT ?= target/demo/sorted.osm.pbf

all: build

build:
	$(CARGO) build --release --workspace

# What the tests and the demo need besides Rust (.ci/deps holds the one list):
# installed when run as root, else named with the command that installs them.
test:
	.ci/deps test
	$(CARGO) test --workspace --all-targets
	$(MAKE) lint

lint: fmt-check clippy shellcheck

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# The shell scripts, listed once: `make lint`, the flake's shellcheck check
# and tests/nix/check.sh (which requires each in the flake's source) read it.
SHELLCHECK_FILES := pbf-sort .ci/run .ci/deps .ci/nix-trixie .ci/nix-fresh \
	tests/nix/check.sh tests/nix/checkphase.sh \
	bench/common.sh bench/run.sh bench/reflink.sh fuzz/run.sh

shellcheck:
	shellcheck -x $(SHELLCHECK_FILES)

# Regenerate the man pages of the tools and the driver and every shell
# completion (from their clap definitions and templates in crates/pbf-man)
# after changing a flag or a template (`cargo test` fails on drift).
man:
	$(CARGO) run -q -p pbf-man -- man/ --completions completions/

# Sort a bundled unsorted real file (VEX output) and show osmium's verdict
# before and after.
demo:
	.ci/deps demo
	$(MAKE) build
	@mkdir -p $(dir $(DEMO_OUT))
	@echo "demo: $(DEMO_IN) as written by VEX:"
	@osmium fileinfo -e $(DEMO_IN) | grep -E 'Objects ordered|Number of (nodes|ways|relations)'
	PATH="$(CURDIR)/target/release:$$PATH" ./pbf-sort -O -v --check $(DEMO_IN) -o $(DEMO_OUT)
	@echo "demo: $(DEMO_OUT) after pbf-sort:"
	@osmium fileinfo -e $(DEMO_OUT) | grep -E 'Objects ordered|Number of (nodes|ways|relations)|Sort.Type_then_ID'

# Binaries, the driver beside them, the man pages and the bash, zsh and fish
# completions under $(PREFIX).
BASH_COMPLETIONS := $(PREFIX)/share/bash-completion/completions
ZSH_COMPLETIONS := $(PREFIX)/share/zsh/site-functions
FISH_COMPLETIONS := $(PREFIX)/share/fish/vendor_completions.d
install: build
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/man/man5
	install -m 755 $(addprefix target/release/,$(BINS)) pbf-sort $(DESTDIR)$(PREFIX)/bin/
	install -m 644 man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 644 man/*.5 $(DESTDIR)$(PREFIX)/share/man/man5/
	install -d $(DESTDIR)$(BASH_COMPLETIONS) $(DESTDIR)$(ZSH_COMPLETIONS) $(DESTDIR)$(FISH_COMPLETIONS)
	for name in $(BINS) pbf-sort; do \
		install -m 644 completions/$$name.bash $(DESTDIR)$(BASH_COMPLETIONS)/$$name && \
		install -m 644 completions/_$$name $(DESTDIR)$(ZSH_COMPLETIONS)/ && \
		install -m 644 completions/$$name.fish $(DESTDIR)$(FISH_COMPLETIONS)/ || exit 1; \
	done

# Evaluate flake.nix against the real nixpkgs lib with stub packages (needs
# Nix 2.18+; CI runs it), and run the tests as the flake's checkPhase would.
nix-check:
	tests/nix/check.sh

checkphase:
	tests/nix/checkphase.sh

# Generate large inputs into bench/data/ and run the tools side by side;
# writes bench/RESULTS.md. Settings: BENCH_* variables (bench/run.sh --help).
bench:
	bench/run.sh

# The same plus the scaling run (0.25 to 4 GB sorted and shuffled; 1, 4 and
# 8 GB interleaved and permuted, cold and warm, with peak disk use).
bench-scaling:
	bench/run.sh --scaling
