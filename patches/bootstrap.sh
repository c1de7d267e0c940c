#!/usr/bin/env bash
# Puts quiche 0.30.0 from crates.io, with our patch series applied, into
# .patched/quiche, which the workspace's [patch.crates-io] names.
#
# The series is patches/quiche/series: the patch files of patches/quiche/,
# one a line, applied in that order (blank lines and # comments skipped).
# Each patch applies exactly (no fuzz) on top of the ones before it; the
# first that does not is named and nothing is installed.
#
# Idempotent: does nothing when .patched/quiche already carries this exact
# series. Its stamp, .patched/quiche/.cclab-patch-sha256, is the SHA-256 of
# the series' patch files concatenated in order
# (cd patches/quiche && cat $(cat series) | sha256sum). The pristine crate
# comes through cargo itself (patches/fetch is a one-dependency manifest),
# so no registry address is written here.
#
# Usage: patches/bootstrap.sh                the whole series, into .patched/quiche
#        patches/bootstrap.sh --first N DIR  the first N patches only, into DIR
#                                            (replaced; no stamp, no shortcut),
#                                            for scripts/test-quiche.sh --each-step
#        patches/bootstrap.sh --list         the series' patch files, one a line
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
series_dir="$root/patches/quiche"
manifest="$root/patches/fetch/Cargo.toml"
say() { echo "bootstrap: $*" >&2; }

mapfile -t patches < <(sed -e 's/#.*//' -e 's/[[:space:]]*$//' "$series_dir/series" | grep -v '^$' || true)
if [ ${#patches[@]} -eq 0 ]; then
    say "error: patches/quiche/series lists no patch"
    exit 1
fi
for p in "${patches[@]}"; do
    if [ ! -f "$series_dir/$p" ]; then
        say "error: patches/quiche/$p, listed in patches/quiche/series, does not exist"
        exit 1
    fi
done

if [ "${1:-}" = --list ]; then
    printf '%s\n' "${patches[@]}"
    exit 0
fi

total=${#patches[@]}
stamp_value=
if [ "${1:-}" = --first ]; then
    n=${2:-}
    dest=${3:-}
    if ! [[ $n =~ ^[0-9]+$ ]] || [ "$n" -gt ${#patches[@]} ] || [ -z "$dest" ]; then
        say "usage: bootstrap.sh --first N DIR (N from 0 to ${#patches[@]})"
        exit 2
    fi
    patches=("${patches[@]:0:n}")
    mkdir -p "$(dirname "$dest")"
    dest=$(cd "$(dirname "$dest")" && pwd)/$(basename "$dest")
elif [ $# -eq 0 ]; then
    dest="$root/.patched/quiche"
    stamp_value=$(cd "$series_dir" && cat "${patches[@]}" | sha256sum | cut -d' ' -f1)
    if [ -f "$dest/.cclab-patch-sha256" ] && [ "$(cat "$dest/.cclab-patch-sha256")" = "$stamp_value" ]; then
        exit 0
    fi
else
    say "usage: bootstrap.sh [--first N DIR]"
    exit 2
fi

"$root/scripts/ensure-deps.sh"

say "fetching quiche 0.30.0 through cargo"
if ! cargo fetch --locked --manifest-path "$manifest" >&2; then
    say "error: cargo could not fetch the pristine quiche 0.30.0 crate."
    say "check that crates.io (or your configured registry mirror) is reachable."
    exit 1
fi

src_manifest=$(cargo metadata --locked --format-version 1 --manifest-path "$manifest" |
    grep -o '"manifest_path":"[^"]*/quiche-0\.30\.0/Cargo\.toml"' | head -n 1 |
    sed 's/^"manifest_path":"//; s/"$//')
if [ -z "$src_manifest" ] || [ ! -f "$src_manifest" ]; then
    say "error: cargo fetched quiche but its source was not found in cargo's registry cache."
    exit 1
fi
src=$(dirname "$src_manifest")

mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$(dirname "$dest")/.quiche.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

cp -R "$src/." "$tmp/"
chmod -R u+w "$tmp"
i=0
for p in "${patches[@]}"; do
    i=$((i + 1))
    if ! out=$(patch -d "$tmp" -p1 --forward --batch --fuzz=0 --no-backup-if-mismatch \
        <"$series_dir/$p" 2>&1); then
        printf '%s\n' "$out" >&2
        say "error: patch $i of $total, patches/quiche/$p, does not apply to quiche 0.30.0 from $src with the patches before it in patches/quiche/series"
        exit 1
    fi
done
if [ -n "$stamp_value" ]; then
    echo "$stamp_value" >"$tmp/.cclab-patch-sha256"
fi

rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
say "patched quiche ready in ${dest#"$root"/} (patches 1 to ${#patches[@]} of $total)"
