#!/usr/bin/env bash
# Installs the Debian packages that `make test` and `make demo` need when
# they are missing (checked against a bare Debian 12 root made by
# debootstrap --variant=minbase):
#   build:   build-essential (cc, c++, make), libclang-dev (bindgen for
#            BoringSSL's bindings), cmake (BoringSSL's build), patch
#            (applying our quiche patch), pkg-config, git, ca-certificates
#   running: iproute2 (ip, tc: namespaces and qdiscs), procps (ps, kill),
#            kmod (modprobe: the user-mode Linux guest loads sch_netem and
#            the other qdisc modules with the host's), openssl (the
#            embedding test's certificate), python3 (the test scripts),
#            jq (the qlog benchmark compares with it), fontconfig and
#            fonts-dejavu-core (labels in plots)
# The stages that need more install it themselves: user-mode-linux (cclab
# vm), chromium (scripts/ensure-chromium.sh), slurm-wlm and munge
# (scripts/ensure-slurm.sh). Quiet when everything is present.
set -euo pipefail

need=()
for pkg in build-essential libclang-dev cmake patch pkg-config git ca-certificates \
    iproute2 procps kmod openssl python3 jq zstd fontconfig fonts-dejavu-core; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" ||
        need+=("$pkg")
done

[ ${#need[@]} -eq 0 ] && exit 0

echo "ensure-deps: installing missing system packages: ${need[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
        SUDO=sudo
    else
        echo "ensure-deps: error: need root to install ${need[*]} (apt-get install -y ${need[*]})" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
${SUDO:-} apt-get update -qq
${SUDO:-} apt-get install -y -qq "${need[@]}" >/dev/null
