//! The virtual-time link (`sim`): determinism, the seed's effect, every
//! algorithm under virtual time, and the result directory matching emu's.

mod common;
use common::files;
use std::path::Path;
use std::process::Command;

use harness::link::Backend;
use harness::run::run;
use harness::scenario::Scenario;
use serde_json::Value;

fn scenario(text: &str) -> Scenario {
    Scenario::parse(text, "test", Path::new(".")).unwrap()
}

/// The error a bad scenario text is refused with.
fn refused(text: &str) -> String {
    Scenario::parse(text, "test", Path::new("."))
        .unwrap_err()
        .to_string()
}

fn sim(sc: &Scenario, out: &Path) -> Value {
    let cfg = common::sim_config(out, quic_app::QlogLevel::Base);
    run(sc, &cfg).unwrap();
    serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
}

const LOSSY: &str = r#"
name = "determinism"
duration = "3s"
repetitions = 2
seed = 7
[link]
backend = "sim"
rate = "20mbit"
rtt = "40ms"
queue = "1bdp"
loss = "1%"
jitter = "1ms"
[[flows]]
cc = "cubic"
[[flows]]
cc = "vegas"
start = "0.5s"
[[cross]]
rate = "2mbit"
on = "300ms"
off = "200ms"
"#;

#[test]
fn the_same_seed_gives_identical_files_and_another_seed_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let sc = scenario(LOSSY);
    let a = sim(&sc, &dir.path().join("a"));
    sim(&sc, &dir.path().join("b"));
    assert_eq!(a["status"], "complete");
    assert_eq!(a["link"]["backend"], "sim");
    let (fa, fb) = (files(&dir.path().join("a")), files(&dir.path().join("b")));
    let names: Vec<&String> = fa.iter().map(|(n, _)| n).collect();
    // Both repetitions, both flows, both ends' qlog and the bottleneck log.
    for want in [
        "summary.json",
        "scenario.toml",
        "rep-1/bottleneck.bin",
        "rep-1/bottleneck-samples.jsonl",
        "rep-2/flow-1/client.json",
    ] {
        assert!(
            names.iter().any(|n| n.as_str() == want),
            "{want} in {names:?}"
        );
    }
    for rep in 1..=2 {
        for flow in 0..2 {
            for role in ["client-", "server-"] {
                let prefix = format!("rep-{rep}/flow-{flow}/{role}");
                assert!(
                    names
                        .iter()
                        .any(|n| n.starts_with(&prefix) && quic_app::qlog_file::is_qlog_name(n)),
                    "{prefix}*.sqlog[.zst] in {names:?}"
                );
            }
        }
    }
    assert_eq!(
        fa.iter().map(|f| &f.0).collect::<Vec<_>>(),
        fb.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    // Byte for byte: summaries, bottleneck logs, client reports and the
    // qlogs of both ends. No field is exempt: TLS key material is random,
    // but nothing written depends on it.
    for ((n, x), (_, y)) in fa.iter().zip(&fb) {
        assert!(x == y, "{n} differs between two runs of the same seed");
    }
    // The first flow's traces say what changed while they ran: the second
    // flow's start and the cross traffic switching on and off.
    let root = dir.path().join("a");
    for role in ["client-", "server-"] {
        let (name, _) = fa
            .iter()
            .find(|(n, _)| {
                n.starts_with(&format!("rep-1/flow-0/{role}"))
                    && quic_app::qlog_file::is_qlog_name(n)
            })
            .unwrap();
        let fs = qlog_analysis::summary::summarize_file(&root.join(name), 0.1).unwrap();
        let c = &fs.connections[0];
        assert_eq!(c.conditions.as_ref().unwrap()["backend"], "sim");
        let kinds: Vec<&str> = c
            .markers
            .iter()
            .filter_map(|m| m.data["type"].as_str())
            .collect();
        assert!(kinds.contains(&"flow_start"), "{role}: {kinds:?}");
        assert!(kinds.contains(&"cross_off"), "{role}: {kinds:?}");
        let start = c
            .markers
            .iter()
            .find(|m| m.data["type"] == "flow_start")
            .unwrap();
        assert_eq!(start.data["flow"], 1);
    }
    // The two repetitions (seeds 7 and 8) differ, and so does seed 9.
    let ra = &a["repetitions"];
    assert_ne!(ra[0]["bottleneck"], ra[1]["bottleneck"]);
    let mut other = sc.clone();
    other.seed = 9;
    other.repetitions = 1;
    let c = sim(&other, &dir.path().join("c"));
    assert_ne!(
        c["repetitions"][0]["bottleneck"]["drops"],
        a["repetitions"][0]["bottleneck"]["drops"]
    );
    // The data moved: the link carried most of what it could.
    let util = a["bottleneck"]["utilization"].as_f64().unwrap();
    assert!(util > 0.5, "utilization {util}");
    let dropped = a["bottleneck"]["drops_by_reason"]["loss"].as_u64().unwrap();
    assert!(dropped > 0, "a 1% lossy link dropped nothing");
}

/// Every registered algorithm (the plugins and quiche's reno, cubic and
/// bbr2) moves data under virtual time, twice with identical bottleneck
/// logs: a plugin that read the wall clock or its own random source would
/// differ between the two.
#[test]
fn every_algorithm_runs_deterministically_under_sim() {
    let dir = tempfile::tempdir().unwrap();
    for info in cc_algorithms::registry::algorithms() {
        // Required parameters at example values (BR-TCP's reservation
        // below this link's rate).
        let name = info.example_spec().replace("40mbit", "4mbit");
        let text = format!(
            "name = \"{name}\"\nduration = \"2s\"\nseed = 3\n[link]\nbackend = \"sim\"\nrate = \"10mbit\"\nrtt = \"30ms\"\nloss = \"0.5%\"\n[[flows]]\ncc = \"{name}\"\n"
        );
        let sc = scenario(&text);
        let a = sim(&sc, &dir.path().join(format!("{name}-a")));
        let b = sim(&sc, &dir.path().join(format!("{name}-b")));
        let bytes = a["repetitions"][0]["flows"][0]["bytes"].as_f64().unwrap();
        assert!(bytes > 200_000.0, "{name} moved only {bytes} B in 2 s");
        for f in ["rep-1/bottleneck.bin", "summary.json"] {
            let x = std::fs::read(dir.path().join(format!("{name}-a/{f}"))).unwrap();
            let y = std::fs::read(dir.path().join(format!("{name}-b/{f}"))).unwrap();
            assert!(x == y, "{name}: {f} differs between two identical runs");
        }
        assert_eq!(a["link"]["backend"], "sim", "{name}");
        assert_eq!(b["flows"][0]["completed"], 1, "{name}: {b}");
    }
}

/// `cclab run --link sim` needs no quic-server or quic-client binaries,
/// and the result opens in `cclab report` and `qlog-analysis` like emu's.
/// `cclab run --json | head -c 100`: the reader goes away before the
/// summary is written out; cclab ends quietly (it panicked before) and the
/// result directory is complete.
#[test]
fn json_into_a_closed_pipe_ends_quietly() {
    use std::process::Stdio;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let mut child = Command::new(env!("CARGO_BIN_EXE_cclab"))
        .args([
            "run",
            "--link",
            "sim",
            "--cc",
            "newreno",
            "--duration",
            "1s",
        ])
        .args(["--json", "--quiet", "--out"])
        .arg(&out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Close the reading end before anything is printed.
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.join("summary.json").is_file());
}

#[test]
fn cclab_run_link_sim_writes_a_result_the_tools_read() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r");
    let o = Command::new(env!("CARGO_BIN_EXE_cclab"))
        .args([
            "run",
            "--link",
            "sim",
            "--cc",
            "newreno",
            "--duration",
            "2s",
            "--json",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .env("CCLAB_BIN_DIR", "/nonexistent")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(s["link"]["backend"], "sim");
    let sender = s["repetitions"][0]["flows"][0]["qlog"]["sender"]
        .as_str()
        .unwrap()
        .to_string();
    let qlog = out.join(&sender);
    let mut text = String::new();
    std::io::Read::read_to_string(&mut qlog_analysis::input::open(&qlog).unwrap(), &mut text)
        .unwrap();
    assert!(
        text.contains("simulation:scenario"),
        "the sender's qlog says what it was taken under"
    );
    let fs = qlog_analysis::summary::summarize_file(&qlog, 0.1).unwrap();
    let cond = fs.connections[0].conditions.as_ref().expect("conditions");
    assert_eq!(cond["backend"], "sim");
    assert_eq!(cond["flows"][0]["cc"], "newreno");
    let html = dir.path().join("r.html");
    let o = Command::new(env!("CARGO_BIN_EXE_cclab"))
        .arg("report")
        .arg(&out)
        .arg("--out")
        .arg(&html)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read_to_string(&html).unwrap().contains("newreno"));
}

#[test]
fn a_wrong_backend_name_is_refused_naming_the_field() {
    let e = refused("name = \"x\"\n[link]\nbackend = \"ns3\"\n[[flows]]\ncc = \"cubic\"\n");
    assert!(
        e.contains("link.backend") && e.contains("sim"),
        "error names the field and the choices: {e}"
    );
}

#[test]
fn link_sim_shorthand_picks_the_backend() {
    let s = scenario("name = \"x\"\nlink = \"sim\"\n[[flows]]\ncc = \"cubic\"\n");
    assert_eq!(s.link.backend, Backend::Sim);
    let e = refused("name = \"x\"\nlink = 3\n[[flows]]\ncc = \"cubic\"\n");
    assert!(e.contains("link") && e.contains("backend name"), "{e}");
}

/// A figure nothing measured is null, not 0: with the qlog off the flows'
/// losses are unknown (while the bottleneck, which counts its own drops,
/// still reports them); with the qlog on they are counted. And the two
/// utilizations: over the whole run (slow start included) and from 1 s
/// after the start.
#[test]
fn unmeasured_losses_are_null_and_both_utilizations_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let run = |qlog: &str| -> Value {
        let out = dir.path().join(qlog);
        let o = Command::new(env!("CARGO_BIN_EXE_cclab"))
            .args(["run", "--link", "sim", "--cc", "newreno"])
            .args(["--rate", "5mbit", "--rtt", "100ms", "--queue", "0.5bdp"])
            .args(["--duration", "8s", "--qlog-level", qlog, "--quiet"])
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
    };
    let off = run("off");
    let b = &off["bottleneck"];
    assert!(
        b["drops"].as_u64().unwrap() > 0,
        "the scenario must drop: {b}"
    );
    let f = &off["flows"][0];
    assert!(f["lost_packets"].is_null(), "qlog off: {f}");
    assert!(f["ci95"].get("lost_packets").is_none(), "{f}");
    assert!(off["repetitions"][0]["flows"][0]["lost_packets"].is_null());
    let on = run("metrics");
    let lost = on["flows"][0]["lost_packets"].as_f64().expect("measured");
    assert!(lost > 0.0, "{}", on["flows"][0]);
    // The metrics level: recovery metrics and losses, no packet events.
    let sender = on["repetitions"][0]["flows"][0]["qlog"]["sender"]
        .as_str()
        .expect("the sender's qlog");
    let q = qlog_analysis::summary::summarize_file(&dir.path().join("metrics").join(sender), 0.1)
        .unwrap();
    let c = &q.connections[0].counts;
    assert_eq!((c.packets_sent, c.packets_received), (0, 0), "{c:?}");
    assert!(c.metrics_updated > 100 && c.packet_lost_events > 0, "{c:?}");
    let (u, us) = (
        b["utilization"].as_f64().unwrap(),
        b["utilization_steady"].as_f64().expect("an 8 s run has it"),
    );
    assert!(u > 0.5 && u < us && us <= 1.0, "whole {u}, steady {us}");
    assert!(off["ci95"].get("utilization_steady").is_some());
}

/// Flow 0's data packets (downstream, at least 1000 bytes) reaching the
/// bottleneck after `from_ns`, from `rep`'s per-packet log, grouped by
/// instant: (time, how many arrived then).
fn bunches(rep: &Path, from_ns: u64) -> Vec<(u64, usize)> {
    let mut out: Vec<(u64, usize)> = Vec::new();
    for r in harness::bottleneck::Reader::open(&rep.join("bottleneck.bin"))
        .unwrap()
        .filter(|r| r.flow == 0 && r.dir == 1 && r.kind == 0 && r.size >= 1000)
        .filter(|r| r.t_ns >= from_ns)
    {
        match out.last_mut() {
            Some((t, n)) if *t == r.t_ns => *n += 1,
            _ => out.push((r.t_ns, 1)),
        }
    }
    out
}

/// The bunches in `b` larger than the pacer's credit allows: 2 ms at the
/// pacing rate but at least 10 full-size packets, beyond the packet due
/// now. The pacing rate is read from the packets that follow a bunch:
/// the shortest gap among the next five instants is at most one pacing
/// interval (a sender that then waits for ACKs only leaves longer gaps,
/// which makes the bound stricter).
fn over_credit(b: &[(u64, usize)]) -> Vec<(u64, usize, u64)> {
    let mut over = Vec::new();
    for (i, &(t, n)) in b.iter().enumerate() {
        if n <= 11 {
            continue;
        }
        let gap = b[i..]
            .windows(2)
            .take(5)
            .map(|w| w[1].0 - w[0].0)
            .min()
            .unwrap_or(u64::MAX);
        let allowed = ((2_000_000 / gap.max(1)) as usize).max(10) + 1;
        if n > allowed {
            over.push((t, n, gap));
        }
    }
    over
}

#[test]
fn pacing_can_be_turned_off_per_flow() {
    // What pacing changes is when packets leave the sender, so that is
    // what is measured, at the bottleneck's entrance (the per-packet log).
    // The receiver acknowledges about four times per round trip
    // (`per-rtt`), so each ACK frees about a quarter of the window: at
    // 20 Mbit/s and 100 ms (a BDP of 185 packets, the window between about
    // half and twice that) at least BDP / 8 = 23 packets. Unpaced, they
    // leave at once, far more than a paced sender's credit; paced, no
    // bunch exceeds the credit (`over_credit`).
    let dir = tempfile::tempdir().unwrap();
    let run = |p: &str| -> Vec<(u64, usize)> {
        let sc = scenario(&format!(
            "name = \"t\"\nduration = \"5s\"\n[link]\nbackend = \"sim\"\nrate = \"20mbit\"\nrtt = \"100ms\"\nqueue = \"1bdp\"\n[[flows]]\ncc = \"newreno\"\nack_policy = \"per-rtt\"\nsmall_packets = \"avoid\"\npacing = {p}\n"
        ));
        let out = dir.path().join(p.replace('"', ""));
        sim(&sc, &out);
        // After the first second: slow start and its recovery are over.
        bunches(&out.join("rep-1"), 1_000_000_000)
    };
    let (paced, unpaced) = (run("\"on\""), run("false"));
    let largest = |b: &[(u64, usize)]| b.iter().map(|x| x.1).max().unwrap();
    let count = |b: &[(u64, usize)]| b.iter().map(|x| x.1).sum::<usize>();
    eprintln!(
        "largest bunch: paced {} of {}, unpaced {} of {}",
        largest(&paced),
        count(&paced),
        largest(&unpaced),
        count(&unpaced)
    );
    assert!(count(&paced) > 5_000 && count(&unpaced) > 5_000);
    let over = over_credit(&paced);
    assert!(
        over.is_empty(),
        "paced bunches beyond the credit (t, n, gap): {over:?}"
    );
    assert!(
        largest(&unpaced) >= 23,
        "unpaced: at most {} packets at once",
        largest(&unpaced)
    );
    assert!(!over_credit(&unpaced).is_empty());
    let e = refused("name = \"t\"\n[[flows]]\ncc = \"cubic\"\npacing = \"sometimes\"\n");
    assert!(e.contains("flows[0].pacing") && e.contains("off"), "{e}");
}

#[test]
fn a_delayed_ack_is_not_held_by_the_pacer() {
    // ns-3's delayed ACKs on DCM+'s lossy 1 Mbit/s path: the receiver's
    // ACK deadline passed while its pacer held data, quiche sends that ACK
    // only from send(), and the simulator woke on the expired deadline
    // forever at one instant (SimError::Stuck since). The transfer must
    // finish, and ACK every second packet or so.
    let dir = tempfile::tempdir().unwrap();
    let sc = scenario(
        "name = \"t\"\nduration = \"30s\"\n[link]\nbackend = \"sim\"\nrate = \"1mbit\"\nrtt = \"90ms\"\nqueue = \"1bdp\"\nloss = \"0.001%\"\n[[flows]]\ncc = \"westwood+:filter=1\"\nsize = \"1000000\"\nmtu = 1200\nack_policy = \"delayed:packets=2,max_delay=200ms\"\n",
    );
    let s = sim(&sc, dir.path());
    let f = &s["flows"][0];
    assert_eq!(f["completed"], 1, "{f}");
    let apd = f["acks_per_data_packet"].as_f64().unwrap();
    assert!((0.4..0.7).contains(&apd), "{f}");
}

#[test]
fn ack_policy_and_small_packets_are_honoured() {
    // One CUBIC download per (ack_policy, small_packets); the receiver's
    // ACK-only packets per data packet and the sender's data packet sizes,
    // read back from both ends' qlog.
    let dir = tempfile::tempdir().unwrap();
    let run = |ack: &str, small: &str| -> Value {
        let sc = scenario(&format!(
            "name = \"t\"\nduration = \"4s\"\n[link]\nbackend = \"sim\"\nrate = \"20mbit\"\nrtt = \"40ms\"\nqueue = \"1bdp\"\n[[flows]]\ncc = \"cubic\"\nack_policy = \"{ack}\"\nsmall_packets = \"{small}\"\n"
        ));
        let s = sim(&sc, &dir.path().join(format!("{ack}-{small}")));
        s["flows"][0].clone()
    };
    let num = |f: &Value, k: &str| f[k].as_f64().unwrap_or_else(|| panic!("{k} in {f}"));
    // quiche's own: about one ACK per data packet, most data packets small.
    let own = run("immediate", "allow");
    assert!(num(&own, "acks_per_data_packet") > 0.9, "{own}");
    assert!(num(&own, "data_packet_small_share") > 0.5, "{own}");
    // Every second packet, and full packets only.
    let rfc = run("rfc9000", "avoid");
    let apd = num(&rfc, "acks_per_data_packet");
    assert!((0.45..0.56).contains(&apd), "{rfc}");
    assert!(num(&rfc, "data_packet_small_share") < 0.02, "{rfc}");
    assert!(num(&rfc, "data_packet_bytes_mean") > 1300.0, "{rfc}");
    // Every fourth.
    let four = run("delayed:packets=4,max_delay=25ms", "avoid");
    let apd = num(&four, "acks_per_data_packet");
    assert!((0.22..0.3).contains(&apd), "{four}");
    // About 4 and 16 ACKs per round trip: at 20 Mbit/s and a 40-80 ms
    // RTT, 80-150 data packets per round trip, so one ACK per 20-40 data
    // packets, and four times as many at 16.
    let per_rtt = num(&run("per-rtt", "avoid"), "acks_per_data_packet");
    assert!((0.02..0.06).contains(&per_rtt), "per-rtt: {per_rtt}");
    let sixteen = num(&run("per-rtt:ratio=16", "avoid"), "acks_per_data_packet");
    assert!(
        (0.08..0.2).contains(&sixteen),
        "per-rtt:ratio=16: {sixteen}"
    );
    assert!(sixteen > 2.5 * per_rtt, "{sixteen} vs {per_rtt}");
    // A bad value is refused naming the field and the forms.
    let e = refused("name = \"t\"\n[[flows]]\ncc = \"cubic\"\nack_policy = \"sometimes\"\n");
    assert!(
        e.contains("flows[0].ack_policy") && e.contains("rfc9000"),
        "{e}"
    );
    let e = refused("name = \"t\"\n[[flows]]\ncc = \"cubic\"\nsmall_packets = \"never\"\n");
    assert!(
        e.contains("flows[0].small_packets") && e.contains("avoid"),
        "{e}"
    );
}

#[test]
fn the_host_timer_slack_is_honoured_and_checked() {
    // BBR2 paces. With a pacer that keeps no credit (`on:credit=0`, as
    // quiche 0.30's did) a host whose timers wake late sends less and
    // queues less; with the default credit the late sender makes up what
    // it lost, so the same host gives (nearly) the exact host's figures.
    let dir = tempfile::tempdir().unwrap();
    let run = |slack: &str, pacing: &str| -> Value {
        let sc = scenario(&format!(
            "name = \"t\"\nduration = \"6s\"\n[link]\nbackend = \"sim\"\nrate = \"20mbit\"\nrtt = \"40ms\"\nqueue = \"1bdp\"\n[[flows]]\ncc = \"bbr2\"\npacing = \"{pacing}\"\n[host]\ntimer_slack = \"{slack}\"\n"
        ));
        assert_eq!(
            sc.host.timer_slack_ns,
            harness::link::units::parse_duration_ns(slack).unwrap()
        );
        let tag = format!("{slack}-{}", pacing.replace([':', '=', ','], "-"));
        sim(&sc, &dir.path().join(tag))["bottleneck"].clone()
    };
    let q = |b: &Value| b["queue_delay_ms_mean"].as_f64().unwrap();
    let u = |b: &Value| b["utilization"].as_f64().unwrap();
    let (exact, late) = (run("0us", "on:credit=0"), run("200us", "on:credit=0"));
    assert!(q(&late) < q(&exact) / 2.0, "{exact} {late}");
    assert!(u(&late) < u(&exact) - 0.02, "{exact} {late}");
    let (exact, late) = (run("0us", "on"), run("200us", "on"));
    assert!((u(&late) - u(&exact)).abs() < 0.005, "{exact} {late}");
    assert!(
        (q(&late) - q(&exact)).abs() < 0.05 * q(&exact),
        "{exact} {late}"
    );
    // The default, measured against emu.
    assert_eq!(scenario("name = \"t\"\n").host.timer_slack_ns, 20_000);
    for (bad, what) in [
        ("[host]\ntimer_slack = \"11ms\"\n", "host.timer_slack"),
        ("[host]\ntimer_slack = \"soon\"\n", "host.timer_slack"),
        ("[host]\nwake = \"1us\"\n", "host"),
        ("host = 3\n", "host"),
    ] {
        let e = refused(&format!("name = \"t\"\n{bad}"));
        assert!(e.contains(what), "{bad}: {e}");
    }
}

#[test]
fn null_and_real_packet_protection_give_identical_results() {
    // The null cipher changes what the keys would encrypt and nothing
    // else: every packet keeps its size, so every figure, log and qlog
    // event is the same byte for byte. Only the resolved scenario names
    // the setting. (That the setting reaches quiche at all is shown by
    // `sim::tests::the_protection_setting_takes_effect`: the body crosses
    // the link in the clear under the null cipher only.)
    let dir = tempfile::tempdir().unwrap();
    let with = |protection: &str| {
        let text = format!("{LOSSY}[host]\nprotection = \"{protection}\"\n");
        let sc = scenario(&text);
        let out = dir.path().join(protection);
        let summary = sim(&sc, &out);
        assert_eq!(summary["status"], "complete");
        files(&out)
    };
    let (null, aead) = (with("null"), with("aead"));
    assert_eq!(
        null.iter().map(|f| &f.0).collect::<Vec<_>>(),
        aead.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    let mut compared = 0;
    for ((n, x), (_, y)) in null.iter().zip(&aead) {
        if n == "scenario.toml" {
            let (x, y) = (String::from_utf8_lossy(x), String::from_utf8_lossy(y));
            assert!(x.contains("protection = \"null\""), "{x}");
            assert!(y.contains("protection = \"aead\""), "{y}");
            continue;
        }
        assert!(x == y, "{n} differs between null and real protection");
        compared += 1;
    }
    assert!(compared > 10, "{compared} files compared");
    assert_eq!(
        scenario("name = \"t\"\n").host.protection,
        harness::scenario::Protection::Null
    );
    let e = refused("name = \"t\"\n[host]\nprotection = \"rot13\"\n");
    assert!(
        e.contains("host.protection") && e.contains("null, aead"),
        "{e}"
    );
}

#[test]
fn the_host_wake_latency_batches_reads_and_is_checked() {
    // A host that wakes 1 ms after a datagram arrives reads the two or so
    // that arrive meanwhile at 20 Mbit/s together, and quiche acknowledges
    // them with one ACK; both ends' reads come 1 ms late, so the smallest
    // RTT grows by 2 ms. With no latency each datagram is read alone.
    let dir = tempfile::tempdir().unwrap();
    let run = |latency: &str| -> Value {
        let sc = scenario(&format!(
            "name = \"t\"\nduration = \"4s\"\n[link]\nbackend = \"sim\"\nrate = \"20mbit\"\nrtt = \"40ms\"\nqueue = \"1bdp\"\n[[flows]]\ncc = \"cubic\"\n[host]\nwake_latency = \"{latency}\"\n"
        ));
        let out = dir.path().join(latency);
        let cfg = common::sim_config(&out, quic_app::QlogLevel::Core);
        run(&sc, &cfg).unwrap();
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap()
    };
    let (now, late) = (run("0us"), run("1ms"));
    let acks = |s: &Value| s["flows"][0]["acks_per_data_packet"].as_f64().unwrap();
    let rtt_min = |s: &Value| s["flows"][0]["rtt_ms"]["min"].as_f64().unwrap();
    assert!(acks(&now) > 0.9, "{}", acks(&now));
    assert!(acks(&late) < 0.7, "{}", acks(&late));
    let grew = rtt_min(&late) - rtt_min(&now);
    assert!((1.8..2.6).contains(&grew), "min RTT grew by {grew} ms");
    assert_eq!(scenario("name = \"t\"\n").host.wake_latency_ns, 0);
    for (bad, what) in [
        ("[host]\nwake_latency = \"11ms\"\n", "host.wake_latency"),
        ("[host]\nwake_latency = 5\n", "host.wake_latency"),
        ("[host]\nwake = \"1us\"\n", "host.wake"),
    ] {
        let e = refused(&format!("name = \"t\"\n{bad}"));
        assert!(e.contains(what), "{bad}: {e}");
    }
}

#[test]
fn several_requests_run_one_after_another_on_one_connection() {
    let dir = tempfile::tempdir().unwrap();
    for (dirn, k) in [("download", 4u64), ("upload", 3)] {
        let sc = scenario(&format!(
            "name = \"t\"\nduration = \"20s\"\n[link]\nbackend = \"sim\"\nrate = \"10mbit\"\nrtt = \"20ms\"\n[[flows]]\ncc = \"newreno\"\nsize = \"300000\"\nrequests = {k}\ndirection = \"{dirn}\"\n"
        ));
        let out = dir.path().join(dirn);
        let s = sim(&sc, &out);
        let f = &s["repetitions"][0]["flows"][0];
        assert_eq!(f["complete"], true, "{f}");
        assert_eq!(f["bytes"].as_u64(), Some(300_000 * k), "{f}");
        let c: Value =
            serde_json::from_slice(&std::fs::read(out.join("rep-1/flow-0/client.json")).unwrap())
                .unwrap();
        let ends: Vec<f64> = c["request_ends_s"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(ends.len() as u64, k, "{c}");
        // The summary's completion time is the last response's end.
        assert_eq!(f["completion_s"].as_f64(), Some(ends[ends.len() - 1]));
        assert_eq!(
            s["flows"][0]["completion_s"].as_f64(),
            Some(ends[ends.len() - 1])
        );
        // Each response takes at least a round trip after the previous.
        assert!(ends.windows(2).all(|w| w[1] > w[0] + 0.02), "{ends:?}");
        // The report's duration runs on to the connection's close.
        assert!(
            c["duration_s"].as_f64().unwrap() >= ends[ends.len() - 1],
            "{c}"
        );
        // One connection: the server's qlog is the only one.
        let n = std::fs::read_dir(out.join("rep-1/flow-0"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("server-")
            })
            .count();
        assert_eq!(n, 1);
    }
}
