#!/usr/bin/env bash
# The tests that need kernel netem (harness/tests/netem_kernel.rs, the
# netem cases of harness/tests/kernel_links.rs and tcp_flows.rs, and
# harness/tests/guest_router.rs), run where a kernel has netem: on this
# host if it does; else in the layout `cclab run --link netem` uses here,
# the user-mode Linux guest as the router and the endpoints on the host
# (every test that goes through `cclab run`; Linux TCP algorithms this
# host's kernel lacks, such as dctcp, run their ends in the guest), and
# inside a guest (`cclab vm`) for the tests that build a link in-process.
# `cclab vm` and the guest router install user-mode-linux and kmod when
# missing.
#
# In the guest, the first check is that sch_netem is loaded (with
# modprobe's own error when it is not): a missing module is a failure with
# its reason, never a test that quietly could not run.
#
# When the tests cannot run at all (not root; no guest can start here) the
# stage is skipped with one line saying why, or, under CI (CI=true), fails
# saying why (scripts/lib/ci.sh). Whether a guest can start is checked
# before the tests run, so a test that fails is always a failure.
#
# Env: CCLAB_VM_KIND (uml | qemu; default uml); CCLAB_VM_KERNEL (the guest
# kernel: linux.uml for uml, a vmlinuz for qemu); when it is set and the
# guest cannot start, that is a failure, not a skip.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib/ci.sh
KIND=${CCLAB_VM_KIND:-uml}

[ "$(id -u)" -eq 0 ] ||
    cannot_run test-netem "not root (namespaces and qdiscs need root, and so does starting a guest)"

eval "$(./scripts/ws-build.sh)"
for v in bin_cclab bin_quic_server bin_quic_client bin_tcp_bulk test_harness__netem_kernel test_harness__kernel_links test_harness__tcp_flows test_harness__guest_router; do
    [ -n "${!v:-}" ] || { echo "test-netem: FAILED: the workspace build did not report $v" >&2; exit 1; }
done
cclab=$bin_cclab
tests=("$test_harness__netem_kernel" "$test_harness__kernel_links" "$test_harness__tcp_flows")

# Each executable, then `cclab cleanup` must find nothing left.
# kernel_links: only its netem case (its tbf/htb/emu cases run on the host
# in `cargo test`, and measure rates a guest's CPU would distort);
# tcp_flows: only its netem case (a QUIC and a Linux TCP flow together).
run_tests='for t in "$@"; do echo "test-netem: $(basename "$t")"; case $t in *kernel_links*) f=netem_ ;; *tcp_flows*) f=on_netem ;; *) f= ;; esac; "$t" --include-ignored --test-threads=1 -q $f; done; '"$cclab"' cleanup'

# The tests that go through `cclab run` (on a host without netem: the
# guest router), and those that build links in-process (in a guest).
cli_tests=(a_quic_flow_runs_end_to_end_on_netem flows_take_their_own_paths_through_a_chain_of_kernel_links a_quic_senders_losses_are_the_bottlenecks_drops ecn_marks_on_kernel_links the_kernels_red_marks scheduled_changes_take_effect_on_netem a_policer_on_netem_drops_what_exceeds_it)
skip_cli=()
for t in "${cli_tests[@]}"; do skip_cli+=(--skip "$t"); done

if "$cclab" link probe --json 2>/dev/null | grep -q '"netem": true'; then
    echo "test-netem: this kernel has netem: running on the host" >&2
    bash -c "set -e; $run_tests" _ "${tests[@]}"
    echo "test-netem: the guest router (CCLAB_NETEM_ROUTER=guest)" >&2
    CCLAB_NETEM_ROUTER=guest "$test_harness__guest_router" --include-ignored --test-threads=1 -q
    exit 0
fi

# The guest's first check: sch_netem is loaded (the guest's init loaded its
# modules through /run/modprobe, the host's kmod pointed at the guest
# kernel's modules); if not, modprobe says why.
assert_netem='if ! grep -q "^sch_netem " /proc/modules; then
    mp=/run/modprobe; [ -x $mp ] || mp=modprobe
    echo "test-netem: FAILED: sch_netem is not loaded in the guest; $mp sch_netem says: $($mp sch_netem 2>&1 || true)" >&2
    exit 3
fi
echo "test-netem: sch_netem is loaded in the guest ($(uname -r))" >&2'

echo "test-netem: this kernel has no netem: running in a $KIND guest (cclab vm)" >&2
SECONDS=0
if ! reason=$("$cclab" vm --kind "$KIND" --quiet --timeout 120s -- true 2>&1 >/dev/null); then
    why="a $KIND guest cannot start here: $(echo "$reason" | tail -n 3)"
    if [ -n "${CCLAB_VM_KERNEL:-}" ]; then
        echo "test-netem: FAILED: CCLAB_VM_KERNEL=$CCLAB_VM_KERNEL was given, and $why" >&2
        exit 1
    fi
    cannot_run test-netem "$why"
fi
# 1. The guest as the router, the endpoints here: what `cclab run --link
# netem` does on this host.
echo "test-netem: netem through the guest router, the endpoints on this host" >&2
SECONDS=0
export CCLAB_NETEM_ROUTER=guest
"$test_harness__guest_router" --include-ignored --test-threads=1 -q
"$test_harness__netem_kernel" --include-ignored --test-threads=1 -q "${cli_tests[@]}"
"$test_harness__tcp_flows" --include-ignored --test-threads=1 -q on_netem
unset CCLAB_NETEM_ROUTER
left=$("$cclab" cleanup --json 2>/dev/null | jq '.namespaces // [] | length' || echo "?")
[ "$left" = 0 ] || { echo "test-netem: FAILED: the guest-router tests left $left namespaces behind" >&2; exit 1; }
echo "test-netem: the guest router's tests passed in ${SECONDS} s" >&2

# 2. Inside a guest: the links built in-process (their rates, delays,
# losses, AQMs, GSO trains) and the netem case of kernel_links.
run_tests='for t in "$@"; do echo "test-netem: $(basename "$t")"; case $t in *kernel_links*) f=(netem_) ;; *netem_kernel*) f=('"${skip_cli[*]}"') ;; *) continue ;; esac; "$t" --include-ignored --test-threads=1 -q "${f[@]}"; done; '"$cclab"' cleanup'
SECONDS=0
set +e
"$cclab" vm --kind "$KIND" --timeout 900s -- bash -c "set -e; $assert_netem; $run_tests" _ "${tests[@]}"
rc=$?
set -e
case $rc in
    0) echo "test-netem: passed in the guest in ${SECONDS} s (boot included)" >&2 ;;
    124) echo "test-netem: FAILED: the guest ran past its 900 s limit" >&2; exit 1 ;;
    *) echo "test-netem: FAILED (exit status $rc)" >&2; exit 1 ;;
esac

# `cclab run --vm` brings its results home: an --out under the host's /tmp
# holds summary.json on the host once the guest has gone.
out=$(mktemp -d /tmp/cclab-test-netem-out.XXXXXX)
trap 'rm -rf "$out"' EXIT
rmdir "$out"
# On a CPU with more extended state than the user-mode kernel can switch
# (AMX) `--vm` refuses, naming the guest router (docs/links.md): that
# refusal is what is checked there, and the run is not.
err=$(mktemp)
if ! "$cclab" run --vm --link netem --cc cubic --rate 10mbit --rtt 40ms --duration 3s --quiet --out "$out" 2>"$err"; then
    if grep -q "cannot run cclab itself" "$err"; then
        echo "test-netem: cclab run --vm refuses on this CPU (AMX: the user-mode guest keeps only x87/SSE registers), as documented; its run in the guest is NOT checked here" >&2
        rm -f "$err"
        exit 0
    fi
    cat "$err" >&2
    echo "test-netem: FAILED: cclab run --vm --out $out" >&2
    exit 1
fi
rm -f "$err"
g=$(jq -e '.flows[0].goodput_bps | select(. > 5e6)' "$out/summary.json" 2>/dev/null) ||
    { echo "test-netem: FAILED: no usable $out/summary.json on the host after cclab run --vm (goodput above 5 Mbit/s)" >&2; exit 1; }
echo "test-netem: cclab run --vm --out $out: summary.json on the host, goodput $g bit/s" >&2
