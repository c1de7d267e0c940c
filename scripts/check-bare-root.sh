#!/usr/bin/env bash
# Checks scripts/ensure-deps.sh against a bare Debian root rather than this
# machine's accumulated state: debootstraps a minimal Debian 12
# (--variant=minbase, into $BARE_ROOT, default /var/tmp/cclab-bare-root),
# runs ensure-deps.sh in it (chroot), then checks that every program the
# build, `make test` and `make demo` call exists there. About 2 minutes
# (downloads ~250 MB from the Debian mirror); root only. The Rust toolchain
# is not a Debian package and is not checked.
set -euo pipefail
cd "$(dirname "$0")/.."
root=${BARE_ROOT:-/var/tmp/cclab-bare-root}
[ "$(id -u)" -eq 0 ] || { echo "check-bare-root: needs root (debootstrap, chroot)" >&2; exit 1; }
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap >/dev/null
if ! [ -x "$root/bin/bash" ]; then
    debootstrap --variant=minbase bookworm "$root" http://deb.debian.org/debian >/dev/null
fi
cp scripts/ensure-deps.sh "$root/root/ensure-deps.sh"
cp /etc/resolv.conf "$root/etc/resolv.conf"
mount --bind /proc "$root/proc"
trap 'umount "$root/proc"' EXIT
chroot "$root" bash /root/ensure-deps.sh
missing=()
for c in cc c++ make cmake patch pkg-config git ip tc ps kill pkill modprobe openssl python3 jq zstd \
    fc-match timeout setsid awk sed mktemp; do
    chroot "$root" bash -c "command -v $c" >/dev/null || missing+=("$c")
done
ls "$root"/usr/lib/llvm-*/lib/libclang.so* >/dev/null 2>&1 || missing+=(libclang.so)
if [ ${#missing[@]} -gt 0 ]; then
    echo "check-bare-root: FAILED: missing after ensure-deps.sh: ${missing[*]}" >&2
    exit 1
fi
echo "check-bare-root: a bare Debian 12 root has every program the build and the tests call after ensure-deps.sh"
