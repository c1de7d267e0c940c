#!/usr/bin/env bash
# Puts quiche 0.30.0 from crates.io, with our congestion-control patch applied,
# into .patched/quiche, which the workspace's [patch.crates-io] names.
#
# Idempotent: does nothing when .patched/quiche already carries this exact
# patch. The pristine crate comes through cargo itself (patches/fetch is a
# one-dependency manifest), so no registry address is written here.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
patch_file="$root/patches/quiche-0.30.0-cc-plugin.patch"
manifest="$root/patches/fetch/Cargo.toml"
dest="$root/.patched/quiche"
stamp="$dest/.cclab-patch-sha256"

want=$(sha256sum "$patch_file" | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    exit 0
fi

"$root/scripts/ensure-deps.sh"

echo "bootstrap: fetching quiche 0.30.0 through cargo" >&2
if ! cargo fetch --locked --manifest-path "$manifest" >&2; then
    echo "bootstrap: error: cargo could not fetch the pristine quiche 0.30.0 crate." >&2
    echo "bootstrap: check that crates.io (or your configured registry mirror) is reachable." >&2
    exit 1
fi

src_manifest=$(cargo metadata --locked --format-version 1 --manifest-path "$manifest" |
    grep -o '"manifest_path":"[^"]*/quiche-0\.30\.0/Cargo\.toml"' | head -n 1 |
    sed 's/^"manifest_path":"//; s/"$//')
if [ -z "$src_manifest" ] || [ ! -f "$src_manifest" ]; then
    echo "bootstrap: error: cargo fetched quiche but its source was not found in cargo's registry cache." >&2
    exit 1
fi
src=$(dirname "$src_manifest")

mkdir -p "$root/.patched"
tmp=$(mktemp -d "$root/.patched/.quiche.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cp -R "$src/." "$tmp/"
chmod -R u+w "$tmp"
if ! patch -d "$tmp" -p1 --quiet --forward --batch < "$patch_file"; then
    echo "bootstrap: error: $patch_file does not apply to quiche 0.30.0 from $src" >&2
    exit 1
fi
echo "$want" > "$tmp/.cclab-patch-sha256"

rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "bootstrap: patched quiche ready in .patched/quiche" >&2
