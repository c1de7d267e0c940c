#!/usr/bin/env bash
# The tests that need kernel netem (harness/tests/netem_kernel.rs, and the
# netem end-to-end case of harness/tests/kernel_links.rs), run where a
# kernel has netem: on this host if it does, else in a user-mode Linux guest
# (`cclab vm`). When neither is possible the tests are skipped and this
# script says why; it never skips silently.
#
# Env: CCLAB_VM_KIND (uml | qemu; default uml), PROFILE (debug | release;
# default debug, the profile `cargo test` builds).
set -euo pipefail
cd "$(dirname "$0")/.."
PROFILE=${PROFILE:-debug}
KIND=${CCLAB_VM_KIND:-uml}
rel=()
[ "$PROFILE" = release ] && rel=(--release)

skip() {
    echo "test-netem: SKIPPED: $*" >&2
    exit 0
}

[ "$(id -u)" -eq 0 ] || skip "not root (namespaces and qdiscs need root, and so does starting a guest)"

cargo build -q "${rel[@]}" -p harness -p quic-server -p quic-client
# The test executables, as cargo built them.
mapfile -t tests < <(cargo test -q "${rel[@]}" -p harness --test netem_kernel --test kernel_links \
    --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["test"]:
        print(m["executable"])')
[ ${#tests[@]} -eq 2 ] || { echo "test-netem: could not find the test executables" >&2; exit 1; }
cclab=target/$PROFILE/cclab

# Each executable, then `cclab cleanup` must find nothing left.
# kernel_links: only its netem case (its tbf/htb/emu cases run on the host
# in `cargo test`, and measure rates a guest's CPU would distort).
body='set -e; for t in "$@"; do echo "test-netem: $(basename "$t")"; case $t in *kernel_links*) f=netem_ ;; *) f= ;; esac; "$t" --include-ignored --test-threads=1 -q $f; done; '"$cclab"' cleanup'

if "$cclab" link probe --json 2>/dev/null | grep -q '"netem": true'; then
    echo "test-netem: this kernel has netem: running on the host" >&2
    exec bash -c "$body" _ "${tests[@]}"
fi

echo "test-netem: this kernel has no netem: running in a $KIND guest (cclab vm)" >&2
SECONDS=0
set +e
"$cclab" vm --kind "$KIND" --timeout 900s -- bash -c "$body" _ "${tests[@]}"
rc=$?
set -e
case $rc in
    0) echo "test-netem: passed in the guest in ${SECONDS} s (boot included)" >&2 ;;
    124) echo "test-netem: FAILED: the guest ran past its 900 s limit" >&2; exit 1 ;;
    *)
        # cclab vm's own failures (it cannot start a guest) are skips, with
        # the reason it gives; the tests' failures are failures.
        if ! reason=$("$cclab" vm --kind "$KIND" --quiet --timeout 120s -- true 2>&1 >/dev/null); then
            skip "a $KIND guest cannot start here: $(echo "$reason" | tail -n 3)"
        fi
        echo "test-netem: FAILED (exit status $rc)" >&2
        exit 1
        ;;
esac
