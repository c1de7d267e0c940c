# Sourced by the test scripts: what a stage does when it cannot run.
#
# Under CI (the CI variable set to anything but "", "0" or "false"; CI
# systems set CI=true) a stage that cannot run is a failure naming what is
# missing; elsewhere it is a skip, printed as one visible line. A test that
# ran and failed is always a failure, never either of these.

under_ci() {
    case "${CI:-}" in "" | 0 | false | FALSE | False) return 1 ;; *) return 0 ;; esac
}

# cannot_run STAGE REASON...: exits 1 under CI, else 0 after printing SKIPPED.
cannot_run() {
    local stage=$1
    shift
    if under_ci; then
        echo "$stage: FAILED: cannot run under CI (CI=$CI): $*" >&2
        exit 1
    fi
    echo "$stage: SKIPPED: $* (under CI=true this is a failure)" >&2
    exit 0
}

# lock_version LOCKFILE CRATE: the crate's version(s) in a Cargo.lock, on
# one line.
lock_version() {
    awk -v want="name = \"$2\"" '$0 == want { getline; gsub(/^version = "|"$/, ""); print }' "$1" | xargs
}
