# Entry points a newcomer and CI use. `make test` is the test command CI runs.
CARGO ?= cargo

.PHONY: all build test lint fmt-check clippy man demo bench clean

all: build

build:
	$(CARGO) build --release --workspace

test:
	$(CARGO) test --workspace --all-targets
	$(MAKE) lint

lint: fmt-check clippy

fmt-check:
	$(CARGO) fmt --all -- --check

clippy:
	$(CARGO) clippy --workspace --all-targets -- -D warnings
