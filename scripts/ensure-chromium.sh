#!/usr/bin/env bash
# Installs Debian's `chromium` package when no Chromium is present, for the
# report's browser test (tests/tests/report_chromium.rs). Quiet when a
# browser is already there; with --print-path, prints the browser's path.
#
# Honours $CHROMIUM (a browser binary to use instead). Exits non-zero, with
# the reason on standard error, when no browser is found and none can be
# installed (not root and no sudo, no apt-get, or the install failed).
set -euo pipefail

print=0
[ "${1:-}" = "--print-path" ] && print=1

find_browser() {
    local p
    if [ -n "${CHROMIUM:-}" ]; then
        if p=$(command -v "$CHROMIUM" 2>/dev/null); then
            [ $print -eq 1 ] && echo "$p"
            return 0
        fi
        echo "ensure-chromium: \$CHROMIUM=$CHROMIUM is not an executable" >&2
        return 2
    fi
    for b in chromium chromium-browser google-chrome-stable google-chrome; do
        if p=$(command -v "$b" 2>/dev/null); then
            [ $print -eq 1 ] && echo "$p"
            return 0
        fi
    done
    return 1
}

if find_browser; then
    exit 0
elif [ $? -eq 2 ]; then
    exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "ensure-chromium: no Chromium found and no apt-get to install it (set CHROMIUM=/path/to/chromium)" >&2
    exit 1
fi
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO=sudo
    else
        echo "ensure-chromium: no Chromium found; need root to install it (apt-get install -y chromium)" >&2
        exit 1
    fi
fi

echo "ensure-chromium: installing Debian's chromium package" >&2
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! { ${SUDO:-} apt-get update -qq && ${SUDO:-} apt-get install -y -qq --no-install-recommends chromium; } >"$log" 2>&1; then
    echo "ensure-chromium: apt-get install chromium failed:" >&2
    tail -n 20 "$log" >&2
    exit 1
fi
if ! find_browser; then
    echo "ensure-chromium: chromium was installed but no browser binary is on PATH" >&2
    exit 1
fi
