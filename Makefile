# Every target first makes sure the patched quiche is in place
# (patches/bootstrap.sh is idempotent and quick when nothing changed).

CARGO ?= cargo

.PHONY: all bootstrap build test bench-fairness check-docs test-quiche test-demo check-bare-root test-slurm test-netem test-report report-screenshots test-quiche-example-client test-embed reproduce-quick reproduce publish-reproduction demo bench bench-link bench-qlog bench-harness bench-loopback bench-sim small-packets sim-vs-emu topology-figures rtt-fairness-map cellular bbr-cases bbr-compare slow-start harm link-elements compare-revisions netem-vs-emu aggregation link-changes netem-run kernel-vs-plugin coexistence syscalls host-load high-rates guest-router lint clean

all: build

bootstrap:
	@./patches/bootstrap.sh

# The build every `make test` stage shares (scripts/ws-build.sh: the tests
# and the binaries in target/release, one feature set).
build: bootstrap
	./scripts/ws-build.sh >/dev/null

# Every stage, timed, from one release build (scripts/test-all.sh): the
# workspace's tests, quiche's own tests, the embedding examples, fmt, clippy,
# the short reproduction, a short demo, the report in Chromium, Slurm and
# netem. Under CI=true a stage that cannot run fails; elsewhere it prints
# SKIPPED. TEST_STAGES="tests clippy" runs only those stages.
test: bootstrap
	./scripts/test-all.sh

# The patched quiche's own library tests (about 1150, with the patch's).
test-quiche: bootstrap
	./scripts/test-quiche.sh

# README.md and docs/: quoted code matches the files, every link resolves.
check-docs:
	python3 scripts/check-docs.py

# scripts/ensure-deps.sh against a bare Debian 12 root (debootstrap, chroot):
# every program the build and the tests call is there afterwards. Root.
check-bare-root:
	./scripts/check-bare-root.sh

# `make demo` in a short form (two algorithms, 2 s each), checked.
test-demo: bootstrap
	./scripts/test-demo.sh

# examples/slurm/ on a one-node Slurm on localhost (installs Debian's
# slurm-wlm and munge when missing; prints SKIP and passes when Slurm cannot
# start here): a 2-task sweep array and its dependent merge, and a tune in
# waves of 2-task arrays and its merge, checked. About 15 s after the build.
test-slurm: bootstrap
	./scripts/ws-build.sh >/dev/null
	$(CARGO) test --workspace --release --test slurm -- --ignored --nocapture

# The tests that need kernel netem, in a user-mode Linux guest when this
# host's kernel has none (`cclab vm`); skipped with the reason printed when
# no guest can start.
test-netem: bootstrap
	./scripts/test-netem.sh

# The HTML report in headless Chromium (installs Debian's chromium when
# missing; prints SKIP and passes when it cannot): fails on a JavaScript
# error, a network request or a blank figure.
test-report: bootstrap
	./scripts/ws-build.sh >/dev/null
	$(CARGO) test --workspace --release --test report_chromium -- --ignored --nocapture

# docs/images/report-*.png: every algorithm on the sim link (about a minute).
report-screenshots: bootstrap
	./scripts/report-screenshots.sh

# The embedding examples (examples/embed/: a plain quiche client and a
# tokio-quiche server picking plugins by spec) against quic-server and
# quic-client, and the README's plugin walkthrough checked against the code.
# Uses the workspace's `cargo test` build (free after `cargo test --workspace`,
# so it runs right after it in `make test`); the examples build into
# target/embed/<example> and link the workspace's BoringSSL: about 3 minutes
# cold on 2 busy cores, 10 s warm.
test-embed: bootstrap
	./scripts/test-embed.sh

# quiche 0.30.0's own example HTTP/3 client fetches from quic-server
# (QUICHE_CLIENT=path/to/quiche-client adds quiche's app client and checks
# Version Negotiation). Builds quiche's example once (minutes, ~800 MB).
test-quiche-example-client: bootstrap
	$(CARGO) test --workspace --release --test interop quiche_example_client -- --ignored --nocapture

# Every seed paper's evaluation, shortened (fewer repetitions, shorter
# runs), on the virtual-time link; checks that every claim got a verdict
# with its figures. Verdicts are results, not test failures.
reproduce-quick: bootstrap
	./scripts/reproduce-quick.sh

# The full reproduction (results/reproduce/<paper>/REPRODUCTION.md).
reproduce: bootstrap
	$(CARGO) build --release -p harness -p quic-server -p quic-client
	./target/release/cclab reproduce all

# The full reproduction in results/reproduce (made by `make reproduce` with
# this build, every run from scratch, from a clean tree) into
# docs/reproduction/, with the quick figures make test compares against.
publish-reproduction: bootstrap
	$(CARGO) build --release -p harness -p quic-server -p quic-client
	./target/release/cclab reproduce --publish results/reproduce $(PUBLISH_ARGS)

# The main job: every registered algorithm alone on the default link
# (20 Mbit/s, 40 ms RTT, 1 BDP drop-tail) on the userspace emulator; prints a
# table and the path of the HTML report. No root needed.
# (Builds only the three binaries; their BoringSSL is the one `make test`'s
# build uses, so running both compiles it once.)
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

# Jain's index of two flows of one algorithm (quiche's CUBIC with
# HyStart++ on and off, quiche's Reno, NewReno) on the default link, on sim
# and with real processes on the emulator: studies/fairness.toml, published
# in docs/running-experiments.md (about 7 minutes).
bench-fairness: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client
	target/release/cclab study studies/fairness.toml --publish $(STUDY_ARGS)

# The virtual-time link's speed: simulated seconds per wall second.
bench-sim: bootstrap
	./scripts/bench-sim.sh

# Every algorithm with small_packets = allow (quiche's own) and avoid (the
# default), on sim: goodput, data packet sizes, utilization, losses:
# studies/small-packets.toml, published in docs/virtual-time.md (about
# 30 s).
small-packets: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client
	target/release/cclab study studies/small-packets.toml --publish $(STUDY_ARGS)

# The same scenarios on sim and on emu (real processes), side by side, with
# the agreement goals: studies/sim-vs-emu.toml, published in
# docs/virtual-time.md (about 13 minutes; STUDY_ARGS adds cclab study
# flags, e.g. STUDY_ARGS="--axis rate=100mbit,500mbit --set link.rtt=20ms").
sim-vs-emu: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client
	target/release/cclab study studies/sim-vs-emu.toml --publish $(STUDY_ARGS)

# docs/topologies.md's figures: RTT fairness on sim (CUBIC, NewReno), the
# parking lot on sim and emu per link with the sim-vs-emu goals, and at
# 2 Mbit/s per link on sim, emu and netem (the guest router where the host
# has no netem): studies/topologies.toml (about 8 minutes: the emu and
# netem runs take real time).
topology-figures: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client
	target/release/cclab study studies/topologies.toml --publish $(STUDY_ARGS)

# docs/links.md's recorded cellular links: five algorithms over the two
# shipped LTE traces on sim (cclab study studies/cellular.toml).
cellular: bootstrap
	$(CARGO) build --release -q -p harness
	target/release/cclab study studies/cellular.toml --publish $(STUDY_ARGS)

# docs/topologies.md's RTT-fairness map: the sweep of
# scenarios/sweeps/rtt-fairness-map.toml on sim (64 points, 2 repetitions of 60 s,
# 2 min 17 s on 2 cores at 361f8c4), its report in results/rtt-map/report.md, and the
# map's figure copied to docs/images/rtt-fairness-map.svg.
rtt-fairness-map: bootstrap
	$(CARGO) build --release -q -p harness
	target/release/cclab sweep scenarios/sweeps/rtt-fairness-map.toml --link sim --out results/rtt-map --qlog-level off
	target/release/cclab report results/rtt-map --out results/rtt-map/report.md
	cp results/rtt-map/report-figures/rtt-fairness.svg docs/images/rtt-fairness-map.svg
	@echo "the map's table: the 'RTT fairness' section of results/rtt-map/report.md"

# docs/bbr.md: bbr3 on each scenario of scenarios/bbr/, one figure per case
# and the table of their figures: studies/bbr-cases.toml (sim, 15 runs,
# about 25 s).
bbr-cases: bootstrap
	$(CARGO) build --release -q -p harness --bin cclab
	target/release/cclab study studies/bbr-cases.toml --publish $(STUDY_ARGS)

# docs/bbr.md: bbr3, BBR2 and CUBIC on the same simulated links:
# studies/bbr-compare.toml (about 30 s; on netem with Linux's tcp_bbr:
# STUDY_ARGS="--link netem --axis cc=tcp:bbr,bbr3,bbr2,cubic", an hour).
bbr-compare: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client
	target/release/cclab study studies/bbr-compare.toml --publish $(STUDY_ARGS)

# docs/slow-start.md: every slow start of NewReno (and Westwood+, quiche's
# Reno and CUBIC) on simulated drop-tail links of 1 to 4 BDP: when, why and
# with what window it ended, its overshoot: studies/slow-start.toml (sim,
# 40 runs, about 30 s).
slow-start: bootstrap
	$(CARGO) build --release -q -p harness --bin cclab
	target/release/cclab study studies/slow-start.toml --publish $(STUDY_ARGS)

# docs/links.md: the policer and aggregation elements, NewReno, CUBIC,
# Vegas, BBR2 and bbr3 on the plain link and on scenarios/changes/
# aggregation.toml and policer.toml, and each one's recovery from the
# shipped change scenarios: studies/link-elements.toml (sim; about a
# minute).
link-elements: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client
	target/release/cclab study studies/link-elements.toml --publish $(STUDY_ARGS)

# docs/metrics.md: harm (Ware et al., HotNets 2019) of CUBIC to NewReno and
# of BBR2 to CUBIC on sim, 20 Mbit/s, 40 ms, 1 and 4 BDP, 5 runs of 30 s
# each, and Linux's CUBIC to Linux's Reno on the emulator (IP mode, root;
# 3 runs of 30 s, real time): about 8 minutes. HARM_OUT keeps the runs.
HARM_OUT ?= $(shell mktemp -d -u /tmp/cclab-harm-XXXXXX)
harm: bootstrap
	$(CARGO) build --release -q -p harness --bin cclab
	target/release/cclab harm --quiet --reference newreno --candidate cubic --queue 1bdp,4bdp --repetitions 5 --out $(HARM_OUT)/cubic-to-newreno
	target/release/cclab harm --quiet --reference cubic --candidate bbr2 --queue 1bdp,4bdp --repetitions 5 --out $(HARM_OUT)/bbr2-to-cubic
	target/release/cclab harm --quiet --link emu --reference tcp:reno --candidate tcp:cubic --queue 1bdp,4bdp --repetitions 3 --out $(HARM_OUT)/linux-cubic-to-reno
	@echo "(make harm at $$(git rev-parse --short HEAD))"

# The shipped single-link scenarios at REV and here, every result file
# compared byte for byte (REV is built once under target/rev/).
compare-revisions: bootstrap
	./scripts/compare-revisions.sh $(REV)

# One QUIC flow on kernel netem (20 Mbit/s, 40 ms, 1 BDP drop-tail, CUBIC,
# 10 s), through the guest router (netem in a user-mode Linux guest, the
# endpoints on this host) when this host's kernel has no netem; writes
# results/cli-<time>/ like any run.
netem-run: bootstrap
	$(CARGO) build --release -p harness -p quic-server -p quic-client
	./target/release/cclab run --link netem --cc cubic --rate 20mbit --rtt 40ms --queue 1bdp --duration 10s

# Kernel netem (through the guest router when this host has none) against
# the emulator's IP mode, per queue discipline: QUIC flows on drop-tail,
# RED, CoDel, PIE and fq_codel (studies/netem-vs-emu.toml, published in
# docs/links.md). Root. About 15 minutes.
netem-vs-emu: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client
	target/release/cclab study studies/netem-vs-emu.toml --publish $(STUDY_ARGS)

# Aggregation (delivery in bursts) on sim, emu and the kernel's netem slot
# (through the guest router where this host has no netem), at two RTTs,
# three repetitions (studies/aggregation.toml, published in docs/links.md).
# About 15 minutes.
aggregation: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client
	target/release/cclab study studies/aggregation.toml --publish $(STUDY_ARGS)

# The shipped link changes on sim, emu and netem (through the guest router
# where this host has no netem): when netem's changes took effect and each
# algorithm's recovery (studies/link-changes.toml, docs/links.md). About
# 15 minutes.
link-changes: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client
	target/release/cclab study studies/link-changes.toml --publish $(STUDY_ARGS)

# Our plugins against Linux's own TCP implementations of the same
# algorithms, one flow alone on the same kernel netem link (through the
# guest router when this host has no netem), with sim and the emulator's IP
# mode as references, controls, tables and cwnd/queue figures:
# studies/kernel-vs-plugin.toml, published in docs/kernel-vs-plugin.md:
# every experiment once (KVP_ARGS; "" for the file's 3 repetitions, about
# 70 minutes), then the close call, Vegas (ours, with Linux's choices, and
# tcp_vegas) on netem and sim, 5 times (the block kernel-vs-plugin-vegas).
# Root. About 40 minutes.
KVP_ARGS ?= --repetitions 1
kernel-vs-plugin: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk
	target/release/cclab study studies/kernel-vs-plugin.toml --publish $(KVP_ARGS) $(STUDY_ARGS)
	target/release/cclab study studies/kernel-vs-plugin.toml --publish --name kernel-vs-plugin-vegas \
	    --experiment pairs --link netem,sim --axis cc=vegas,vegas-linux,tcp:vegas --repetitions 5 $(STUDY_ARGS)

# System calls per data packet over the whole endpoint processes (the
# kernel's raw_syscalls counter, every thread, through cclab-syscount): QUIC
# at 20 and 100 Mbit/s (NewReno, CUBIC, BBRv2) and Linux TCP beside them,
# on the emulator's IP mode: studies/syscalls.toml, published in
# docs/endpoint-cost.md. Root; about 2 minutes.
syscalls: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk
	target/release/cclab study studies/syscalls.toml --publish $(STUDY_ARGS)

# NewReno, CUBIC and BBRv2 on the emulator (20 Mbit/s, 40 ms, 1 BDP, 30 s,
# 3 repetitions) on a quiet host and beside two busy processes, with the
# goals (utilization within 2 points, queue within 20% or 2 ms):
# studies/host-load.toml, published in docs/endpoint-cost.md. About 10
# minutes. STUDY_ARGS="--set flows.0.pacing=on:credit=0" runs it with a
# pacer that keeps no credit.
host-load: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client
	target/release/cclab study studies/host-load.toml --publish $(STUDY_ARGS)

# Paced NewReno, BBRv2, Vegas and Prague at 20, 100 and 500 Mbit/s, sim
# against emu, emu on a quiet host and beside two busy processes, with the
# sim-vs-emu goals: studies/high-rates.toml, published in
# docs/endpoint-cost.md. About 15 minutes.
high-rates: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client
	target/release/cclab study studies/high-rates.toml --publish $(STUDY_ARGS)

# Each QUIC algorithm against one Linux CUBIC flow (20 Mbit/s, 40 ms,
# 1 BDP, 30 s, 3 repetitions) on the emulator's IP mode (host kernel; root)
# and on netem (through the guest router when this host has none): each
# one's share, Jain's index, per backend: studies/coexistence.toml,
# published in docs/coexistence.md; then BBRv2, whose share swings most
# from run to run, 8 times more on both (the block coexistence-bbr2).
# About 50 minutes.
coexistence: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client -p tcp-bulk
	target/release/cclab study studies/coexistence.toml --publish $(STUDY_ARGS)
	target/release/cclab study studies/coexistence.toml --publish --name coexistence-bbr2 \
	    --axis cc=bbr2 --repetitions 8 $(STUDY_ARGS)

lint: bootstrap
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

clean:
	$(CARGO) clean
	rm -rf .patched

# Kernel netem through the user-mode Linux guest as the router, the QUIC
# endpoints on the host: the guest's forwarding delay, NewReno/CUBIC/BBR2
# against emu (IP mode) and sim, CUBIC's line rate and the parking lot:
# studies/guest-router.toml (27 runs, one repetition each; root), published
# in docs/links.md.
guest-router: bootstrap
	$(CARGO) build --release -q -p harness -p quic-server -p quic-client
	target/release/cclab study studies/guest-router.toml --publish $(STUDY_ARGS)
