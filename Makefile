# Every target first makes sure the patched quiche is in place
# (patches/bootstrap.sh is idempotent and quick when nothing changed).

CARGO ?= cargo

.PHONY: all bootstrap build test reproduce-quick reproduce demo bench bench-link bench-qlog bench-harness bench-loopback bench-sim sim-vs-emu lint clean

all: build

bootstrap:
	@./patches/bootstrap.sh

build: bootstrap
	$(CARGO) build --workspace --all-targets

test: bootstrap
	$(CARGO) test --workspace
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(MAKE) reproduce-quick

# Every seed paper's evaluation, shortened (fewer repetitions, shorter
# runs), on the virtual-time link; checks that every claim got a verdict
# with its figures. Verdicts are results, not test failures.
reproduce-quick: bootstrap
	$(CARGO) build --release -p harness
	rm -rf target/reproduce-quick
	./target/release/cclab reproduce all --quick --quiet --json --out target/reproduce-quick > target/reproduce-quick.json
	python3 scripts/check-reproduction.py target/reproduce-quick.json br-tcp dcm-plus ewphcc smcc tcp-exp

# The full reproduction (results/reproduce/<paper>/REPRODUCTION.md).
reproduce: bootstrap
	$(CARGO) build --release -p harness
	./target/release/cclab reproduce all

# The main job: every registered algorithm alone on the default link
# (20 Mbit/s, 40 ms RTT, 1 BDP drop-tail) on the userspace emulator; prints a
# table and the path of the HTML report. No root needed.
demo: bootstrap
	$(CARGO) build --release -p harness -p quic-server -p quic-client
	./target/release/cclab demo

bench: bootstrap
	$(CARGO) bench -p cc-algorithms --bench events

# The userspace emulator's accuracy and top rate, measured with a UDP probe.
bench-link: bootstrap
	$(CARGO) run --release -p harness --example emu-accuracy

# qlog-analysis summary against jq on a 520 MB quiche-format file.
bench-qlog: bootstrap
	./scripts/bench-qlog.sh

# cclab's overhead per run and the CPU the emulator leaves at 100 Mbit/s.
bench-harness: bootstrap
	./scripts/bench-harness.sh

# Unshaped 1 GB loopback download: goodput, CPU and RSS of both ends.
bench-loopback: bootstrap
	./scripts/bench-loopback.sh

# The virtual-time link's speed: simulated seconds per wall second.
bench-sim: bootstrap
	./scripts/bench-sim.sh

# The same scenarios on sim and on emu (real processes), side by side.
sim-vs-emu: bootstrap
	./scripts/sim-vs-emu.sh

lint: bootstrap
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf .patched
