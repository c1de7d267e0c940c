#!/usr/bin/env bash
# examples/slurm/ on a real, single-node Slurm: starts munged, slurmctld and
# slurmd on localhost (everything under a temporary directory, on free
# ports, with no cgroups), submits examples/slurm/sweep.sbatch as a job array
# of two tasks and examples/slurm/merge.sbatch after it, as the example's
# comments say, with a tiny sweep on the virtual-time link, waits for both
# and checks the merged results and the report.
#
# Installs Debian's slurm-wlm and munge when missing (scripts/ensure-slurm.sh).
# When Slurm cannot be installed or cannot start here (or cannot run even a
# trivial job), prints `test-slurm: SKIPPED: <reason>` and exits 0, or under CI
# (CI=true) fails with that reason (scripts/lib/ci.sh); a failing sweep, merge or
# report fails the test (exit 1) and prints the jobs' logs.
#
# Env: TEST_SLURM_TIMEOUT (seconds for the array and the merge; default 600),
# TEST_SLURM_KEEP=1 keeps the temporary directory, TEST_SLURM_NO_BUILD=1
# skips the build (scripts/ws-build.sh, the workspace's one release build).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/sbin:/sbin
TIMEOUT=${TEST_SLURM_TIMEOUT:-600}
t_start=$(date +%s.%N)

say() { echo "test-slurm: $*" >&2; }
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }

tmp=
pids=()
jobs_submitted=()
# This test's job processes: slurmstepd and what it started, found by the
# SLURM_CONF they inherited (a path no other Slurm uses). slurmstepd outlives
# slurmd, so they are ended explicitly.
job_pids() {
    local d comm env
    [ -n "${SLURM_CONF:-}" ] || return 0
    for d in /proc/[0-9]*; do
        env=$({ tr '\0' '\n' <"$d/environ"; } 2>/dev/null) || continue
        grep -qxF "SLURM_CONF=$SLURM_CONF" <<<"$env" || continue
        comm=$(cat "$d/comm" 2>/dev/null) || continue
        if [ "$comm" = slurmstepd ] || grep -q '^SLURM_JOB_ID=' <<<"$env"; then
            echo "${d#/proc/}"
        fi
    done
}
cleanup() {
    local rc=$? p i left
    trap - EXIT INT TERM
    if [ ${#jobs_submitted[@]} -gt 0 ]; then
        scancel "${jobs_submitted[@]}" 2>/dev/null || true
        # Let the jobs end while slurmd and slurmctld are still there.
        for i in $(seq 1 60); do
            left=$(job_pids)
            [ -z "$left" ] && break
            sleep 0.25
        done
    fi
    # Reverse order: slurmd, slurmctld, munged.
    for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
        p=${pids[i]}
        kill "$p" 2>/dev/null || continue
        for _ in $(seq 1 40); do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.25
        done
        kill -KILL "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    left=$(job_pids)
    if [ -n "$left" ]; then
        say "killing job processes left behind: ${left//$'\n'/ }"
        # shellcheck disable=SC2086
        kill -KILL $left 2>/dev/null || true
    fi
    if [ -n "$tmp" ]; then
        if [ "${TEST_SLURM_KEEP:-0}" = 1 ]; then
            say "kept $tmp"
        else
            rm -rf "$tmp"
        fi
    fi
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

. scripts/lib/ci.sh
skip() { cannot_run test-slurm "$*"; }

show_logs() {
    local f
    for f in "$tmp"/log/slurm-*.out; do
        [ -e "$f" ] || continue
        echo "----- $(basename "$f") -----" >&2
        cat "$f" >&2
    done
    for f in slurmctld slurmd; do
        echo "----- $f.log (last 30 lines) -----" >&2
        tail -n 30 "$tmp/log/$f.log" >&2 2>/dev/null || true
    done
}

fail() {
    echo "FAIL: test-slurm: $*" >&2
    show_logs
    exit 1
}

# --- Slurm and the binaries ------------------------------------------------

./scripts/ensure-slurm.sh || skip "Slurm (slurm-wlm, munge) is not installed and could not be installed"
if [ "${TEST_SLURM_NO_BUILD:-0}" != 1 ]; then
    say "the workspace's release build (scripts/ws-build.sh)"
    t_build=$(date +%s.%N)
    ./scripts/ws-build.sh >/dev/null
    say "build: $(elapsed "$t_build") s"
fi
for b in cclab quic-server quic-client; do
    [ -x "target/release/$b" ] || fail "target/release/$b is missing"
done

tmp=$(mktemp -d /tmp/cclab-test-slurm.XXXXXX)
chmod 700 "$tmp"
mkdir -p "$tmp"/{munge,state,spool,run,log,out}
user=$(id -un)

# --- munged, with a key of its own -----------------------------------------

dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge/munge.key"
sock=$tmp/munge/munge.socket
# Each daemon in a session of its own, so that a Ctrl-C or a signal to this
# script's process group reaches only the script, which stops them in order.
setsid munged --foreground --force --key-file="$tmp/munge/munge.key" --socket="$sock" \
    --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/log/munged.log" \
    --seed-file="$tmp/munge/munged.seed" >"$tmp/log/munged.out" 2>&1 &
pids+=($!)
for _ in $(seq 1 40); do
    [ -S "$sock" ] && break
    kill -0 "${pids[0]}" 2>/dev/null || break
    sleep 0.25
done
if ! munge -n -S "$sock" 2>/dev/null | unmunge -S "$sock" >/dev/null 2>&1; then
    skip "munged does not start here: $(tail -n 3 "$tmp/log/munged.out" "$tmp/log/munged.log" 2>/dev/null | tr '\n' ' ')"
fi

# --- slurmctld and slurmd ----------------------------------------------------

# Two ports nothing listens on.
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 20000))
        [ "$p" != "${1:-}" ] && [ -z "$(ss -Hltn "sport = :$p")" ] && echo "$p" && return
    done
}
ctld_port=$(free_port)
slurmd_port=$(free_port "$ctld_port")
cpus=$(nproc)
[ "$cpus" -lt 2 ] && cpus=2 # sweep.sbatch asks for 2 CPUs per task
export SLURM_CONF=$tmp/slurm.conf
: >"$tmp/plugstack.conf"
cat >"$SLURM_CONF" <<EOF
# A single-node Slurm for scripts/test-slurm.sh: no cgroups, no accounting.
ClusterName=cclabtest
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$sock
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$tmp/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$tmp/log/jobcomp.txt
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
# A dependent job whose dependency failed is cancelled, not left pending.
DependencyParameters=kill_invalid_depend
# Finished jobs stay visible to scontrol for the checks.
MinJobAge=3600
ReturnToService=2
SlurmdParameters=config_overrides
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF

setsid slurmctld -D -f "$SLURM_CONF" >"$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
setsid slurmd -D -N localhost -f "$SLURM_CONF" >"$tmp/log/slurmd.out" 2>&1 &
pids+=($!)

daemon_tail() {
    tail -n 5 "$tmp/log/slurmctld.out" "$tmp/log/slurmctld.log" "$tmp/log/slurmd.out" \
        "$tmp/log/slurmd.log" 2>/dev/null | grep -v '^$' | tail -n 8
}
up=0
for _ in $(seq 1 120); do
    kill -0 "${pids[1]}" 2>/dev/null || skip "slurmctld exited: $(daemon_tail)"
    kill -0 "${pids[2]}" 2>/dev/null || skip "slurmd exited: $(daemon_tail)"
    state=$(sinfo -h -N -n localhost -o %T 2>/dev/null || true)
    if [ "$state" = idle ]; then
        up=1
        break
    fi
    sleep 0.25
done
[ $up -eq 1 ] || skip "the node did not become idle within 30 s (state: ${state:-none}): $(daemon_tail)"
say "slurmctld (port $ctld_port) and slurmd (port $slurmd_port) up, $cpus CPUs, $(elapsed "$t_start") s into the test"

# --- the jobs ----------------------------------------------------------------

# scontrol's JobState of one job (of every task, for an array).
job_states() { scontrol -o show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2; }
terminal() {
    case $1 in
        COMPLETED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE | PREEMPTED) return 0 ;;
        *) return 1 ;;
    esac
}
# Waits until every record of job $1 is in a terminal state, up to $2 seconds.
wait_job() {
    local id=$1 limit=$2 t0=$SECONDS s all
    while :; do
        all=1
        s=$(job_states "$id")
        [ -n "$s" ] || all=0
        for x in $s; do terminal "$x" || all=0; done
        [ $all -eq 1 ] && return 0
        [ $((SECONDS - t0)) -ge "$limit" ] && return 1
        sleep 0.5
    done
}

# Can this Slurm run a job at all? If not, the environment is at fault.
probe=$(sbatch --parsable --output="$tmp/log/slurm-probe-%j.out" --wrap 'echo probe ok' 2>"$tmp/log/sbatch.err") ||
    skip "sbatch refuses a trivial job: $(cat "$tmp/log/sbatch.err")"
probe=${probe%%;*}
jobs_submitted+=("$probe")
wait_job "$probe" 60 || skip "Slurm did not run a trivial job within 60 s (state: $(job_states "$probe"))"
if [ "$(job_states "$probe")" != COMPLETED ] || ! grep -q 'probe ok' "$tmp"/log/slurm-probe-*.out; then
    skip "Slurm cannot run a trivial job here (state: $(job_states "$probe")): $(daemon_tail)"
fi

# The sweep: 2 algorithms x 2 RTTs, 2 s each, on the virtual-time link. The
# backend is the base scenario's: cclab sweep resolves it once for every
# point, so it cannot be a grid key.
cat >"$tmp/base.toml" <<EOF
name = "slurm-test"
duration = "2s"
[link]
backend = "sim"
rate = "20mbit"
rtt = "40ms"
queue = "1bdp"
[[flows]]
cc = "cubic"
EOF
cat >"$tmp/sweep.toml" <<EOF
scenario = "base.toml"
repetitions = 1
seed = 1
[grid]
"flows.0.cc" = ["cubic", "vegas"]
"link.rtt" = ["20ms", "80ms"]
EOF
npoints=4
export SWEEP=$tmp/sweep.toml OUT=$tmp/out

# As examples/slurm/sweep.sbatch says, from the repository's root; two
# array tasks, and the logs in the temporary directory.
t_jobs=$(date +%s.%N)
s_jobs=$SECONDS
jobid=$(sbatch --parsable --array=0-1 --output="$tmp/log/slurm-%A_%a.out" examples/slurm/sweep.sbatch) ||
    fail "sbatch examples/slurm/sweep.sbatch failed"
jobid=${jobid%%;*}
jobs_submitted+=("$jobid")
mergeid=$(sbatch --parsable --dependency=afterok:"$jobid" --output="$tmp/log/slurm-merge-%j.out" \
    examples/slurm/merge.sbatch) || fail "sbatch examples/slurm/merge.sbatch failed"
mergeid=${mergeid%%;*}
jobs_submitted+=("$mergeid")
say "submitted the sweep array (job $jobid, tasks 0-1) and the merge (job $mergeid, afterok:$jobid)"

wait_job "$jobid" "$TIMEOUT" || fail "the sweep array did not finish within $TIMEOUT s (states: $(job_states "$jobid" | tr '\n' ' '))"
left=$((TIMEOUT - (SECONDS - s_jobs)))
[ $left -lt 60 ] && left=60
wait_job "$mergeid" "$left" || fail "the merge did not finish in time (state: $(job_states "$mergeid"))"
t_jobs_wall=$(elapsed "$t_jobs")

# --- checks ------------------------------------------------------------------

array_states=$(scontrol -o show job "$jobid" | grep -o 'ArrayTaskId=[0-9]* .*JobState=[A-Z_]*' |
    sed -E 's/ArrayTaskId=([0-9]*) .*JobState=([A-Z_]*)/\1:\2/' | sort | tr '\n' ' ')
[ "$array_states" = "0:COMPLETED 1:COMPLETED " ] || fail "sweep array tasks: $array_states(want both COMPLETED)"
[ "$(job_states "$mergeid")" = COMPLETED ] || fail "merge job: $(job_states "$mergeid") (want COMPLETED)"
[ -s "$OUT/report.html" ] || fail "no report at $OUT/report.html"

# Each shard ran its half of the points (index mod 2), all complete; the
# merge has every point once, from the shards' runs, each on sim.
: >"$tmp/shard-dirs"
for i in 0 1; do
    f=$OUT/shard-$i/sweep.json
    jq -e --argjson i "$i" '.points | length > 0 and all(.[]; .status == "complete" and .index % 2 == $i)' "$f" >/dev/null ||
        fail "shard-$i ran no point, or one not complete or not its own: $(jq -c '[.points[] | [.index, .status]]' "$f")"
    echo "test-slurm: shard-$i: $(jq -r '"\(.points | length) point(s): \([.points[].dir] | sort | join(" "))"' "$f")" >&2
    jq -r '.points[].dir' "$f" >>"$tmp/shard-dirs"
done
sort -o "$tmp/shard-dirs" "$tmp/shard-dirs"
jq -e --argjson n "$npoints" '.points | length == $n and ([.[].index] | sort) == [range($n)] and all(.[]; .status == "complete")' \
    "$OUT/all/sweep.json" >/dev/null || fail "merged: not the $npoints complete points 0..$((npoints - 1))"
jq -r '.points[].dir' "$OUT/all/sweep.json" | sort >"$tmp/merged-dirs"
cmp -s "$tmp/shard-dirs" "$tmp/merged-dirs" || fail "merged points $(tr '\n' ' ' <"$tmp/merged-dirs")!= the shards' $(tr '\n' ' ' <"$tmp/shard-dirs")"
(cd "$OUT/all/runs" && ls | sort) | cmp -s - "$tmp/merged-dirs" || fail "all/runs has $(ls "$OUT/all/runs" | tr '\n' ' ')"
while read -r d; do
    jq -e '.link.backend == "sim"' "$OUT/all/runs/$d/summary.json" >/dev/null || fail "$d: not a sim run's summary"
done <"$tmp/merged-dirs"
grep -q "report.html: $npoints run(s)" "$tmp"/log/slurm-merge-*.out ||
    fail "the merge job's log does not say the report has $npoints runs"

say "sweep array + merge: $t_jobs_wall s"

# --- a tune in waves, as examples/slurm/tune.sbatch says ----------------------
# Two array tasks per wave, one wave per batch (2 PSO iterations + the
# validation batch), then the merge job; the merge must find nothing left to
# run (the shards did it all) and write the table.
export TUNE="vegas --param alpha=1..4 --param beta=2..6 --objective smcc --rate 5mbit --rtt 40ms --swarm 2 --iterations 2 --duration 2s --validate 1 --jobs 1"
export OUT=$tmp/tune/vegas.toml
t_tune=$(date +%s.%N)
prev=""
for wave in 1 2 3; do
    dep=()
    [ -n "$prev" ] && dep=(--dependency=afterok:"$prev")
    prev=$(sbatch --parsable "${dep[@]}" --array=0-1 --output="$tmp/log/slurm-tune-%A_%a.out" \
        examples/slurm/tune.sbatch) || fail "sbatch examples/slurm/tune.sbatch (wave $wave) failed"
    prev=${prev%%;*}
    jobs_submitted+=("$prev")
done
tmerge=$(sbatch --parsable --dependency=afterok:"$prev" --output="$tmp/log/slurm-tune-merge-%j.out" \
    examples/slurm/tune-merge.sbatch) || fail "sbatch examples/slurm/tune-merge.sbatch failed"
tmerge=${tmerge%%;*}
jobs_submitted+=("$tmerge")
say "submitted 3 tune waves (last job $prev) and the tune merge (job $tmerge)"
wait_job "$tmerge" "$TIMEOUT" || fail "the tune merge did not finish within $TIMEOUT s (state: $(job_states "$tmerge"))"
[ "$(job_states "$tmerge")" = COMPLETED ] || fail "tune merge job: $(job_states "$tmerge") (want COMPLETED)"
[ -s "$OUT" ] || fail "the tune merge wrote no table at $OUT"
grep -q "^0 evaluations run" "$tmp"/log/slurm-tune-merge-*.out ||
    fail "the tune merge had to run evaluations itself: the waves did not do the work ($(grep 'evaluations run' "$tmp"/log/slurm-tune-merge-*.out))"
ntasks=$(grep -l "shard .* ran [1-9]" "$tmp"/log/slurm-tune-*_*.out | wc -l)
[ "$ntasks" -ge 2 ] || fail "only $ntasks tune task(s) ran evaluations"
t_tune_wall=$(elapsed "$t_tune")
say "tune: 3 waves x 2 tasks + merge: $t_tune_wall s; $ntasks tasks ran evaluations; table $(grep -c '^\[\[entry' "$OUT") entry"

say "whole test: $(elapsed "$t_start") s"
echo "PASS: test-slurm: 2 array tasks and the dependent merge ran; $npoints points merged from both shards, report written (array+merge ${t_jobs_wall} s); a tune in 3 waves of 2 tasks and its merge (${t_tune_wall} s); total $(elapsed "$t_start") s"
