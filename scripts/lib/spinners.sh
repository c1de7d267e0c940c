# Sourced by the measurement scripts that load the host on purpose:
# `start_spinners N` starts N busy processes (CPU spinners), `stop_spinners`
# stops them. Sourcing installs an EXIT trap that stops them (and removes
# $tmp_out when set), so they never outlive the script however it ends.
spinners=()
tmp_out=
start_spinners() {
    local _
    for _ in $(seq "$1"); do
        (while :; do :; done) &
        spinners+=($!)
    done
}
stop_spinners() {
    local p
    for p in "${spinners[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${spinners[@]}"; do wait "$p" 2>/dev/null || true; done
    spinners=()
}
trap 'stop_spinners; [ -z "$tmp_out" ] || rm -rf "$tmp_out"' EXIT
trap 'exit 130' INT TERM
