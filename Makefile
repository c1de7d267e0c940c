# Every target first makes sure the patched quiche is in place
# (patches/bootstrap.sh is idempotent and quick when nothing changed).

CARGO ?= cargo

.PHONY: all bootstrap build test demo bench bench-link bench-qlog bench-loopback lint clean

all: build

bootstrap:
	@./patches/bootstrap.sh

build: bootstrap
	$(CARGO) build --workspace --all-targets

test: bootstrap
	$(CARGO) test --workspace
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Until the cclab harness exists, the demo is the closest end-to-end thing:
# a real quiche client and server in one process, over an emulated
# bottleneck, once per registered algorithm.
demo: bootstrap
	$(CARGO) run --release -p cc-algorithms --example pair-demo

bench: bootstrap
	$(CARGO) bench -p cc-algorithms --bench events

# The userspace emulator's accuracy and top rate, measured with a UDP probe.
bench-link: bootstrap
	$(CARGO) run --release -p harness --example emu-accuracy

# qlog-analysis summary against jq on a 520 MB quiche-format file.
bench-qlog: bootstrap
	./scripts/bench-qlog.sh

# Unshaped 1 GB loopback download: goodput, CPU and RSS of both ends.
bench-loopback: bootstrap
	./scripts/bench-loopback.sh

lint: bootstrap
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf .patched
