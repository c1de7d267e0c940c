#!/usr/bin/env bash
# Installs Debian's Slurm (slurm-wlm: slurmctld, slurmd and the client
# commands; 22.05 on bookworm) and munge when they are missing, for
# tests/tests/slurm.rs (`make test-slurm`). Quick and quiet when they are present; says what it
# does on standard error.
#
# Exits non-zero, with the reason on standard error, when they are missing
# and cannot be installed (not root and no sudo, no apt-get, or the install
# failed). No service is started: the packages' maintainer scripts are kept
# from starting slurmctld, slurmd or munged (the test starts its own).
set -euo pipefail

cmds=(slurmctld slurmd sbatch squeue sacct scontrol munged munge)

have_all() {
    local c
    for c in "${cmds[@]}"; do
        command -v "$c" >/dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin command -v "$c" >/dev/null 2>&1 || return 1
    done
}

if have_all; then
    exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-slurm: Slurm or munge is missing and there is no apt-get to install them" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=sudo
    else
        echo "ensure-slurm: Slurm or munge is missing; need root to install them (apt-get install -y slurm-wlm munge)" >&2
        exit 1
    fi
fi

echo "ensure-slurm: installing Debian's slurm-wlm and munge (apt-get)" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
# While installing, /usr/sbin/policy-rc.d (if we created it) tells invoke-rc.d
# not to start any service.
policy=/usr/sbin/policy-rc.d
made_policy=0
cleanup() {
    rm -f "$log"
    [ $made_policy -eq 1 ] && ${SUDO:-} rm -f "$policy"
    return 0
}
trap cleanup EXIT
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' | ${SUDO:-} tee "$policy" >/dev/null
    ${SUDO:-} chmod 755 "$policy"
    made_policy=1
fi
if ! { ${SUDO:-} apt-get update -qq &&
    ${SUDO:-} apt-get install -y -qq --no-install-recommends slurm-wlm munge; } >"$log" 2>&1; then
    echo "ensure-slurm: apt-get install slurm-wlm munge failed:" >&2
    tail -n 20 "$log" >&2
    exit 1
fi
if ! have_all; then
    echo "ensure-slurm: slurm-wlm and munge were installed but some of ${cmds[*]} are not on PATH" >&2
    exit 1
fi
echo "ensure-slurm: installed $(dpkg-query -W -f='slurm-wlm ${Version}' slurm-wlm), $(dpkg-query -W -f='munge ${Version}' munge)" >&2
