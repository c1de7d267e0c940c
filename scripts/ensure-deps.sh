#!/usr/bin/env bash
# Installs the system packages the build needs when they are missing:
# libclang-dev (bindgen for BoringSSL's bindings), cmake (BoringSSL's build),
# patch (applying our quiche patch), jq (the qlog benchmark compares with it)
# and fonts-dejavu-core (labels in qlog-analysis plots). Quiet when everything
# is present.
set -euo pipefail

need=()
for pkg in libclang-dev cmake patch jq fonts-dejavu-core; do
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
