# Sourced by the measurement scripts: `stamp TARGET` prints what a figure
# was measured at, first: the commit (-dirty with uncommitted changes), the
# UTC date, and the load on this machine's cores.
stamp() {
    local dirty
    dirty=$([ -n "$(GIT_OPTIONAL_LOCKS=0 git status --porcelain --untracked-files=no 2>/dev/null)" ] && echo -dirty || true)
    echo "# make $1 at $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$dirty on $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "# load average $(cut -d" " -f1-3 /proc/loadavg 2>/dev/null) on $(nproc) cores"
}
