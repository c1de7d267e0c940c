//! `examples/slurm/` on a real, single-node Slurm: the `slurm` stage of
//! `make test` (`cargo test --workspace --release --test slurm --
//! --ignored`; a plain `cargo test` leaves it out, as it starts daemons).
//!
//! It starts munged, slurmctld and slurmd on localhost (everything under a
//! temporary directory, on free ports, with no cgroups), submits
//! `examples/slurm/sweep.sbatch` as a job array of two tasks and
//! `merge.sbatch` after it, as the example's comments say, with a tiny
//! sweep on the virtual-time link, then a tune in three waves of two-task
//! arrays (`tune.sbatch`) and its merge (`tune-merge.sbatch`), and checks
//! what they wrote. Debian's slurm-wlm and munge are installed when missing
//! (`scripts/ensure-slurm.sh`). Where Slurm cannot be installed, cannot
//! start or cannot run a trivial job, the test skips (fails under CI,
//! `test_support::skip`); a sweep, merge or tune that fails is a failure,
//! with the jobs' logs.
//!
//! Env: `TEST_SLURM_TIMEOUT` (seconds for each wait; default 600),
//! `TEST_SLURM_KEEP=1` keeps the temporary directory. The binaries are the
//! workspace's release build (`scripts/ws-build.sh`).

use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace")
        .to_path_buf()
}

/// A command with the daemons' directories on the path (Debian puts
/// slurmctld, slurmd and munged in /usr/sbin).
fn cmd(program: &str) -> Command {
    let mut c = Command::new(program);
    let path = std::env::var("PATH").unwrap_or_default();
    c.env("PATH", format!("{path}:/usr/sbin:/sbin"));
    c
}

fn run(c: &mut Command) -> Output {
    c.output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", c.get_program()))
}

fn stdout(c: &mut Command) -> String {
    String::from_utf8_lossy(&run(c).stdout).trim().to_string()
}

/// The single-node cluster: its daemons (stopped in reverse order on
/// drop), the jobs submitted (cancelled on drop) and its directory.
struct Cluster {
    dir: tempfile::TempDir,
    conf: PathBuf,
    daemons: Vec<Child>,
    jobs: Vec<String>,
}

impl Cluster {
    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    /// A Slurm client command against this cluster.
    fn slurm(&self, program: &str) -> Command {
        let mut c = cmd(program);
        c.env("SLURM_CONF", &self.conf).current_dir(repo());
        c
    }

    /// Starts a daemon in a process group of its own, so that a signal to
    /// the test's group reaches the test alone, which stops it in order on
    /// drop; if the test's process dies first (Ctrl-C ends it without a
    /// drop), the kernel sends the daemon SIGTERM.
    fn spawn(&mut self, mut c: Command, log: &str) {
        let out = std::fs::File::create(self.path(log)).expect("a daemon's log");
        let err = out.try_clone().expect("a daemon's log");
        c.stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        // SAFETY: prctl is async-signal-safe and touches no memory of the
        // parent's.
        unsafe {
            c.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = c
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", c.get_program()));
        self.daemons.push(child);
    }

    /// Whether daemon `i` is still running.
    fn alive(&mut self, i: usize) -> bool {
        matches!(self.daemons[i].try_wait(), Ok(None))
    }

    /// The last lines of the daemons' logs, for a skip's reason.
    fn daemon_tail(&self) -> String {
        let mut s = String::new();
        for f in [
            "log/slurmctld.out",
            "log/slurmctld.log",
            "log/slurmd.out",
            "log/slurmd.log",
        ] {
            let text = std::fs::read_to_string(self.path(f)).unwrap_or_default();
            let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
            for l in &lines[lines.len().saturating_sub(2)..] {
                let _ = write!(s, "{l} | ");
            }
        }
        s
    }

    /// Every job's log and the daemons' last lines.
    fn logs(&self) -> String {
        let mut s = String::new();
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.path("log"))
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            if name.starts_with("slurm-") {
                let _ = writeln!(s, "----- {name} -----\n{text}");
            } else if name == "slurmctld.log" || name == "slurmd.log" {
                let lines: Vec<&str> = text.lines().collect();
                let tail = lines[lines.len().saturating_sub(30)..].join("\n");
                let _ = writeln!(s, "----- {name} (last 30 lines) -----\n{tail}");
            }
        }
        s
    }

    /// Submits a batch job; its id.
    fn sbatch(&mut self, args: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
        let mut c = self.slurm("sbatch");
        c.arg("--parsable").args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        let o = run(&mut c);
        if !o.status.success() {
            return Err(format!(
                "sbatch {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        let out = String::from_utf8_lossy(&o.stdout);
        let id = out.trim().split(';').next().unwrap_or_default().to_string();
        self.jobs.push(id.clone());
        Ok(id)
    }

    /// scontrol's JobState of each record of a job (each task of an
    /// array), by array task (`None` for a plain job).
    fn states(&self, job: &str) -> Vec<(Option<u32>, String)> {
        let text = stdout(self.slurm("scontrol").args(["-o", "show", "job", job]));
        text.lines()
            .filter_map(|l| {
                let field = |k: &str| {
                    l.split_whitespace()
                        .find_map(|w| w.strip_prefix(k).map(str::to_string))
                };
                let state = field("JobState=")?;
                Some((field("ArrayTaskId=").and_then(|t| t.parse().ok()), state))
            })
            .collect()
    }

    /// Waits until every record of `job` is in a terminal state, up to
    /// `limit`; false when the time ran out.
    fn wait(&self, job: &str, limit: Duration) -> bool {
        const TERMINAL: [&str; 9] = [
            "COMPLETED",
            "FAILED",
            "CANCELLED",
            "TIMEOUT",
            "NODE_FAIL",
            "OUT_OF_MEMORY",
            "BOOT_FAIL",
            "DEADLINE",
            "PREEMPTED",
        ];
        let t0 = Instant::now();
        loop {
            let s = self.states(job);
            if !s.is_empty() && s.iter().all(|(_, st)| TERMINAL.contains(&st.as_str())) {
                return true;
            }
            if t0.elapsed() > limit {
                return false;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// The processes of this cluster's jobs: slurmstepd and what it
    /// started, found by the SLURM_CONF they inherited (a path no other
    /// Slurm uses). slurmstepd outlives slurmd, so they are ended
    /// explicitly.
    fn job_pids(&self) -> Vec<String> {
        let want = format!("SLURM_CONF={}", self.conf.display());
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| {
                let pid = e.file_name().to_string_lossy().to_string();
                pid.parse::<u32>().ok()?;
                let env = std::fs::read(e.path().join("environ")).ok()?;
                let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
                if !vars.contains(&want.as_bytes()) {
                    return None;
                }
                let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
                let job = vars.iter().any(|v| v.starts_with(b"SLURM_JOB_ID="));
                (comm.trim() == "slurmstepd" || job).then_some(pid)
            })
            .collect()
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.jobs.is_empty() {
            let _ = self.slurm("scancel").args(&self.jobs).output();
            // Let the jobs end while slurmd and slurmctld are still there.
            for _ in 0..60 {
                if self.job_pids().is_empty() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(250));
            }
        }
        // slurmd, slurmctld, munged.
        while let Some(mut d) = self.daemons.pop() {
            let _ = Command::new("kill").arg(d.id().to_string()).output();
            let t0 = Instant::now();
            while matches!(d.try_wait(), Ok(None)) && t0.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(250));
            }
            let _ = d.kill();
            let _ = d.wait();
        }
        let left = self.job_pids();
        if !left.is_empty() {
            eprintln!(
                "test-slurm: killing job processes left behind: {}",
                left.join(" ")
            );
            let _ = Command::new("kill").arg("-KILL").args(&left).output();
        }
        if std::env::var("TEST_SLURM_KEEP").as_deref() == Ok("1") {
            let kept = std::mem::replace(&mut self.dir, tempfile::tempdir().expect("a scratch"));
            eprintln!("test-slurm: kept {}", kept.keep().display());
        }
    }
}

/// A port nothing listens on now.
fn free_port(not: u16) -> u16 {
    loop {
        let p = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        if p != not {
            return p;
        }
    }
}

/// Starts munged, slurmctld and slurmd; `Err` says why Slurm cannot run
/// here (a skip, not a failure).
fn start() -> Result<Cluster, String> {
    let ensure = repo().join("scripts/ensure-slurm.sh");
    let o = run(&mut Command::new(&ensure));
    if !o.status.success() {
        return Err(format!(
            "Slurm (slurm-wlm, munge) is not installed and could not be installed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    let dir = tempfile::Builder::new()
        .prefix("cclab-test-slurm.")
        .tempdir()
        .map_err(|e| format!("a temporary directory: {e}"))?;
    for d in ["munge", "state", "spool", "run", "log", "out"] {
        std::fs::create_dir_all(dir.path().join(d)).expect("the cluster's directories");
    }
    let mut c = Cluster {
        conf: dir.path().join("slurm.conf"),
        dir,
        daemons: Vec::new(),
        jobs: Vec::new(),
    };

    // munged, with a key of its own.
    let key = c.path("munge/munge.key");
    let mut bytes = vec![0u8; 1024];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes)
        .expect("random bytes");
    std::fs::write(&key, &bytes).expect("the munge key");
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o400))
        .expect("the munge key's mode");
    let sock = c.path("munge/munge.socket");
    let mut m = cmd("munged");
    m.arg("--foreground")
        .arg("--force")
        .arg(format!("--key-file={}", key.display()))
        .arg(format!("--socket={}", sock.display()))
        .arg(format!(
            "--pid-file={}",
            c.path("munge/munged.pid").display()
        ))
        .arg(format!("--log-file={}", c.path("log/munged.log").display()))
        .arg(format!(
            "--seed-file={}",
            c.path("munge/munged.seed").display()
        ));
    c.spawn(m, "log/munged.out");
    for _ in 0..40 {
        if sock.exists() || !c.alive(0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    let cred = run(cmd("munge").arg("-n").arg("-S").arg(&sock));
    let decoded = cmd("unmunge")
        .arg("-S")
        .arg(&sock)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .and_then(|mut u| {
            use std::io::Write;
            u.stdin.take().expect("stdin").write_all(&cred.stdout)?;
            u.wait()
        });
    if !cred.status.success() || !decoded.is_ok_and(|s| s.success()) {
        let log = std::fs::read_to_string(c.path("log/munged.log")).unwrap_or_default();
        return Err(format!("munged does not start here: {}", log.trim()));
    }

    // slurmctld and slurmd.
    let ctld_port = free_port(0);
    let slurmd_port = free_port(ctld_port);
    // sweep.sbatch asks for 2 CPUs per task.
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get().max(2));
    let user = stdout(Command::new("id").arg("-un"));
    let root = c.dir.path().to_path_buf();
    let t = move |p: &str| root.join(p).display().to_string();
    std::fs::write(c.path("plugstack.conf"), "").expect("plugstack.conf");
    let conf = format!(
        "# A single-node Slurm for tests/tests/slurm.rs: no cgroups, no accounting.
ClusterName=cclabtest
SlurmctldHost=localhost
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser={user}
SlurmdUser={user}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={sock}
StateSaveLocation={state}
SlurmdSpoolDir={spool}
SlurmctldPidFile={run}/slurmctld.pid
SlurmdPidFile={run}/slurmd.pid
SlurmctldLogFile={log}/slurmctld.log
SlurmdLogFile={log}/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig={plugstack}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={log}/jobcomp.txt
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
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=test Nodes=localhost Default=YES MaxTime=INFINITE State=UP
",
        sock = sock.display(),
        state = t("state"),
        spool = t("spool"),
        run = t("run"),
        log = t("log"),
        plugstack = t("plugstack.conf"),
    );
    std::fs::write(&c.conf, conf).expect("slurm.conf");
    let conf = c.conf.clone();
    let mut ctld = cmd("slurmctld");
    ctld.arg("-D").arg("-f").arg(&conf).env("SLURM_CONF", &conf);
    c.spawn(ctld, "log/slurmctld.out");
    let mut d = cmd("slurmd");
    d.args(["-D", "-N", "localhost", "-f"])
        .arg(&conf)
        .env("SLURM_CONF", &conf);
    c.spawn(d, "log/slurmd.out");
    let mut state = String::new();
    for _ in 0..120 {
        if !c.alive(1) {
            return Err(format!("slurmctld exited: {}", c.daemon_tail()));
        }
        if !c.alive(2) {
            return Err(format!("slurmd exited: {}", c.daemon_tail()));
        }
        state = stdout(
            c.slurm("sinfo")
                .args(["-h", "-N", "-n", "localhost", "-o", "%T"]),
        );
        if state == "idle" {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    if state != "idle" {
        return Err(format!(
            "the node did not become idle within 30 s (state: {state}): {}",
            c.daemon_tail()
        ));
    }

    // Can this Slurm run a job at all? If not, the environment is at fault.
    let out = format!("--output={}", t("log/slurm-probe-%j.out"));
    let probe = c.sbatch(&[out.as_str(), "--wrap", "echo probe ok"], &[])?;
    if !c.wait(&probe, Duration::from_secs(60)) {
        return Err(format!(
            "Slurm did not run a trivial job within 60 s (state: {:?})",
            c.states(&probe)
        ));
    }
    let ok = c.states(&probe).iter().all(|(_, s)| s == "COMPLETED")
        && std::fs::read_to_string(c.path(&format!("log/slurm-probe-{probe}.out")))
            .is_ok_and(|s| s.contains("probe ok"));
    if !ok {
        return Err(format!(
            "Slurm cannot run a trivial job here (state: {:?}): {}",
            c.states(&probe),
            c.daemon_tail()
        ));
    }
    Ok(c)
}

fn read_json(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A sweep file's points as (index, status, dir).
fn points(sweep: &Value) -> Vec<(u64, String, String)> {
    sweep["points"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| {
                    (
                        p["index"].as_u64().unwrap_or(u64::MAX),
                        p["status"].as_str().unwrap_or_default().to_string(),
                        p["dir"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
#[ignore = "starts a Slurm cluster: make test's slurm stage runs it"]
fn sweep_and_tune_as_the_slurm_examples_say() {
    let t_start = Instant::now();
    let timeout = Duration::from_secs(
        std::env::var("TEST_SLURM_TIMEOUT")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(600),
    );
    for b in ["cclab", "quic-server", "quic-client"] {
        let p = repo().join("target/release").join(b);
        assert!(
            p.exists(),
            "{} is missing: run scripts/ws-build.sh",
            p.display()
        );
    }
    let mut c = match start() {
        Ok(c) => c,
        Err(why) => {
            test_support::skip(&why);
            return;
        }
    };
    eprintln!(
        "test-slurm: the cluster is up, {:.1} s into the test",
        t_start.elapsed().as_secs_f64()
    );
    fn fail(c: &Cluster, what: String) -> ! {
        panic!("{what}\n{}", c.logs())
    }

    // The sweep: 2 algorithms x 2 RTTs, 2 s each, on the virtual-time
    // link. The backend is the base scenario's: cclab sweep resolves it once
    // for every point, so it cannot be a grid key.
    std::fs::write(
        c.path("base.toml"),
        "name = \"slurm-test\"\nduration = \"2s\"\n[link]\nbackend = \"sim\"\nrate = \"20mbit\"\nrtt = \"40ms\"\nqueue = \"1bdp\"\n[[flows]]\ncc = \"cubic\"\n",
    )
    .unwrap();
    std::fs::write(
        c.path("sweep.toml"),
        "scenario = \"base.toml\"\nrepetitions = 1\nseed = 1\n[grid]\n\"flows.0.cc\" = [\"cubic\", \"vegas\"]\n\"link.rtt\" = [\"20ms\", \"80ms\"]\n",
    )
    .unwrap();
    let npoints = 4;
    let (sweep, out) = (c.path("sweep.toml"), c.path("out"));
    let (sweep, out) = (sweep.to_str().unwrap(), out.to_str().unwrap());
    let env = [("SWEEP", sweep), ("OUT", out)];
    let t_jobs = Instant::now();
    let logs = c.path("log");
    let log = |n: &str| format!("--output={}", logs.join(n).display());
    let (array_log, merge_log) = (log("slurm-%A_%a.out"), log("slurm-merge-%j.out"));
    let job = c
        .sbatch(
            &["--array=0-1", &array_log, "examples/slurm/sweep.sbatch"],
            &env,
        )
        .unwrap_or_else(|e| fail(&c, e));
    let after = format!("--dependency=afterok:{job}");
    let merge = c
        .sbatch(&[&after, &merge_log, "examples/slurm/merge.sbatch"], &env)
        .unwrap_or_else(|e| fail(&c, e));
    eprintln!("test-slurm: submitted the sweep array (job {job}, tasks 0-1) and the merge (job {merge}, afterok)");
    if !c.wait(&job, timeout) || !c.wait(&merge, timeout) {
        fail(
            &c,
            format!("the sweep or its merge did not finish within {timeout:?}"),
        );
    }
    let array = c.states(&job);
    let want = vec![
        (Some(0), "COMPLETED".to_string()),
        (Some(1), "COMPLETED".to_string()),
    ];
    let mut got = array.clone();
    got.sort();
    if got != want {
        fail(
            &c,
            format!("sweep array tasks: {array:?} (want both COMPLETED)"),
        );
    }
    if c.states(&merge).iter().any(|(_, s)| s != "COMPLETED") {
        fail(
            &c,
            format!("merge job: {:?} (want COMPLETED)", c.states(&merge)),
        );
    }
    let out = c.path("out");
    if !out.join("report.html").exists() {
        fail(
            &c,
            format!("no report at {}", out.join("report.html").display()),
        );
    }
    // Each shard ran its half of the points (index mod 2), all complete;
    // the merge has every point once, from the shards' runs, each on sim.
    let mut shard_dirs = BTreeSet::new();
    for i in 0..2u64 {
        let p = points(&read_json(&out.join(format!("shard-{i}/sweep.json"))));
        if p.is_empty() || p.iter().any(|(k, s, _)| s != "complete" || k % 2 != i) {
            fail(
                &c,
                format!("shard-{i} ran no point, or one not complete or not its own: {p:?}"),
            );
        }
        eprintln!("test-slurm: shard-{i}: {} point(s)", p.len());
        shard_dirs.extend(p.into_iter().map(|(_, _, d)| d));
    }
    let merged = points(&read_json(&out.join("all/sweep.json")));
    let indices: BTreeSet<u64> = merged.iter().map(|(k, _, _)| *k).collect();
    if merged.len() != npoints
        || indices != (0..npoints as u64).collect()
        || merged.iter().any(|(_, s, _)| s != "complete")
    {
        fail(
            &c,
            format!("merged: not the {npoints} complete points: {merged:?}"),
        );
    }
    let merged_dirs: BTreeSet<String> = merged.into_iter().map(|(_, _, d)| d).collect();
    if merged_dirs != shard_dirs {
        fail(
            &c,
            format!("merged points {merged_dirs:?} != the shards' {shard_dirs:?}"),
        );
    }
    let runs: BTreeSet<String> = std::fs::read_dir(out.join("all/runs"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect()
        })
        .unwrap_or_default();
    if runs != merged_dirs {
        fail(&c, format!("all/runs has {runs:?}, want {merged_dirs:?}"));
    }
    for d in &runs {
        let s = read_json(&out.join("all/runs").join(d).join("summary.json"));
        if s["link"]["backend"] != "sim" {
            fail(
                &c,
                format!("{d}: not a sim run's summary: {}", s["link"]["backend"]),
            );
        }
    }
    let merge_out = std::fs::read_to_string(c.path(&format!("log/slurm-merge-{merge}.out")))
        .unwrap_or_default();
    if !merge_out.contains(&format!("report.html: {npoints} run(s)")) {
        fail(
            &c,
            format!("the merge job's log does not say the report has {npoints} runs"),
        );
    }
    let sweep_s = t_jobs.elapsed().as_secs_f64();
    eprintln!("test-slurm: sweep array + merge: {sweep_s:.1} s");

    // A tune in waves, as examples/slurm/tune.sbatch says: two array tasks
    // per wave, one wave per batch (2 PSO iterations + the validation
    // batch), then the merge job, which must find nothing left to run (the
    // shards did it all) and write the table.
    let tune = "vegas --param alpha=1..4 --param beta=2..6 --objective smcc --rate 5mbit --rtt 40ms --swarm 2 --iterations 2 --duration 2s --validate 1 --jobs 1";
    let table = c.path("tune/vegas.toml");
    let env = [("TUNE", tune), ("OUT", table.to_str().unwrap())];
    let t_tune = Instant::now();
    let wave_log = log("slurm-tune-%A_%a.out");
    let mut prev: Option<String> = None;
    for _ in 0..3 {
        let dep = prev.as_ref().map(|p| format!("--dependency=afterok:{p}"));
        let mut args: Vec<&str> = dep.iter().map(String::as_str).collect();
        args.extend([
            "--array=0-1",
            wave_log.as_str(),
            "examples/slurm/tune.sbatch",
        ]);
        prev = Some(c.sbatch(&args, &env).unwrap_or_else(|e| fail(&c, e)));
    }
    let after = format!("--dependency=afterok:{}", prev.unwrap());
    let tmerge_log = log("slurm-tune-merge-%j.out");
    let tmerge = c
        .sbatch(
            &[&after, &tmerge_log, "examples/slurm/tune-merge.sbatch"],
            &env,
        )
        .unwrap_or_else(|e| fail(&c, e));
    eprintln!("test-slurm: submitted 3 tune waves and the tune merge (job {tmerge})");
    if !c.wait(&tmerge, timeout) {
        fail(
            &c,
            format!("the tune merge did not finish within {timeout:?}"),
        );
    }
    if c.states(&tmerge).iter().any(|(_, s)| s != "COMPLETED") {
        fail(
            &c,
            format!("tune merge job: {:?} (want COMPLETED)", c.states(&tmerge)),
        );
    }
    let table_text = std::fs::read_to_string(&table).unwrap_or_default();
    if table_text.is_empty() {
        fail(
            &c,
            format!("the tune merge wrote no table at {}", table.display()),
        );
    }
    let tmerge_out = std::fs::read_to_string(c.path(&format!("log/slurm-tune-merge-{tmerge}.out")))
        .unwrap_or_default();
    if !tmerge_out
        .lines()
        .any(|l| l.starts_with("0 evaluations run"))
    {
        fail(
            &c,
            "the tune merge had to run evaluations itself: the waves did not do the work".into(),
        );
    }
    let ran = std::fs::read_dir(c.path("log"))
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    let n = e.file_name().to_string_lossy().to_string();
                    n.starts_with("slurm-tune-") && n.contains('_')
                })
                .filter(|e| {
                    std::fs::read_to_string(e.path()).is_ok_and(|t| {
                        t.lines().any(|l| {
                            l.split_once(" ran ").is_some_and(|(a, b)| {
                                a.contains("shard")
                                    && b.starts_with(|ch: char| ('1'..='9').contains(&ch))
                            })
                        })
                    })
                })
                .count()
        })
        .unwrap_or(0);
    if ran < 2 {
        fail(&c, format!("only {ran} tune task(s) ran evaluations"));
    }
    let entries = table_text
        .lines()
        .filter(|l| l.starts_with("[[entry"))
        .count();
    eprintln!(
        "test-slurm: PASS: 2 array tasks and the dependent merge ran, {npoints} points merged from both shards, report written ({sweep_s:.1} s); a tune in 3 waves of 2 tasks and its merge ({:.1} s), {ran} tasks ran evaluations, {entries} table entry; total {:.1} s",
        t_tune.elapsed().as_secs_f64(),
        t_start.elapsed().as_secs_f64()
    );
}
