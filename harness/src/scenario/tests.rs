//! The scenario's parsing, resolved form and overrides.

use std::path::Path;

use super::parse::Ctx;
use super::*;

fn parse(s: &str) -> Result<Scenario, ScenarioError> {
    Scenario::parse(s, "t.toml", Path::new("."))
}

#[test]
fn a_full_scenario() {
    let s = parse(
        "name = \"x\"\nduration = \"30s\"\nrepetitions = 3\nseed = 9\n[link]\nrate = \"10mbit\"\nrtt = \"50ms\"\n[[flows]]\ncc = \"vegas:alpha=2,beta=4\"\ncount = 2\n[[flows]]\ncc = \"cubic\"\ndirection = \"upload\"\nstart = \"5s\"\nsize = \"10mb\"\nrequests = 3\nrate = \"1.5mbit\"\nmtu = 1250\n[[cross]]\nrate = \"2mbit\"\non = \"1s\"\noff = \"2s\"\n",
    )
    .unwrap();
    assert_eq!(
        (s.duration_ns, s.repetitions, s.seed, s.link.seed),
        (30_000_000_000, 3, 9, 9)
    );
    assert_eq!(s.expanded_flows().len(), 3);
    assert_eq!(s.flows[1].size, Some(10 * 1024 * 1024));
    assert_eq!((s.flows[0].requests, s.flows[1].requests), (1, 3));
    assert_eq!(s.cross[0].on_ns, Some(1_000_000_000));
    assert_eq!(
        (s.flows[1].rate_bps, s.flows[1].mtu),
        (Some(1.5e6), Some(1250))
    );
    assert_eq!(s.flows[1].request_path(), "/upload?rate=1500000");
    assert_eq!(s.flows[0].request_path(), "/bytes/1000000000000");
    // Round trip through the resolved form.
    let back = Scenario::from_table(&s.to_toml(), &Ctx { source: "x" }, Path::new(".")).unwrap();
    assert_eq!(back, s);
}

#[test]
fn start_jitter_offsets_are_per_seed_and_flow() {
    let s = parse(
        "duration = \"30s\"\n[[flows]]\ncc = \"cubic\"\nstart = \"2s\"\nstart_jitter = \"1s\"\ncount = 3\n[[flows]]\ncc = \"vegas\"\n[[cross]]\nrate = \"1mbit\"\nstart_jitter = \"500ms\"\n",
    )
    .unwrap();
    let j = s.flows[0].start_jitter_ns;
    assert_eq!(j, 1_000_000_000);
    let starts = |seed| -> Vec<u64> { s.rep_flows(seed).iter().map(|(_, f)| f.start_ns).collect() };
    // Deterministic per (seed, flow); in [start, start + jitter); each
    // flow of the group on its own; the unjittered group at its start.
    assert_eq!(starts(7), starts(7));
    for seed in 0..200 {
        let st = starts(seed);
        for &t in &st[..3] {
            assert!((2_000_000_000..3_000_000_000).contains(&t), "{t}");
        }
        assert_ne!(st[0], st[1]);
        assert_eq!(st[3], 0);
        let c = s.rep_cross(seed)[0].start_ns;
        assert!(c < 500_000_000, "{c}");
        assert_eq!(s.cross[0].start_in_rep(seed, 0), c);
        assert_eq!(s.flows[0].start_in_rep(seed, 1), st[1]);
    }
    // Another seed, other offsets; spread over the whole interval.
    assert_ne!(starts(7), starts(8));
    let offs: Vec<u64> = (0..1000)
        .map(|seed| jitter_offset_ns(j, seed, FLOW_JITTER_STREAM, 0))
        .collect();
    let mean = offs.iter().sum::<u64>() as f64 / offs.len() as f64 / j as f64;
    assert!(
        (mean - 0.5).abs() < 0.05,
        "mean offset {mean} of the jitter"
    );
    assert!(offs.iter().all(|&o| o < j));
    assert!(offs.iter().any(|&o| o < j / 10) && offs.iter().any(|&o| o > j * 9 / 10));
    // Tiny and huge spreads stay inside [0, jitter).
    for seed in 0..100 {
        assert_eq!(jitter_offset_ns(1, seed, FLOW_JITTER_STREAM, 3), 0);
        assert!(jitter_offset_ns(u64::MAX, seed, CROSS_JITTER_STREAM, 0) < u64::MAX);
    }
    // The run's scenario.toml keeps the field; duration counts from the
    // flow's own start.
    let back = Scenario::from_table(&s.to_toml(), &Ctx { source: "x" }, Path::new(".")).unwrap();
    assert_eq!(back, s);
    let (_, f) = &s.rep_flows(3)[0];
    assert_eq!(f.run_ns(s.duration_ns), 30_000_000_000 - f.start_ns);
    assert_eq!(f.start_jitter_ns, 0);
    // No jitter: exactly today's starts, and no field in the TOML.
    let plain =
        parse("[[flows]]\ncc = \"cubic\"\nstart = \"1s\"\nstart_jitter = \"0s\"\n").unwrap();
    assert_eq!(
        plain,
        parse("[[flows]]\ncc = \"cubic\"\nstart = \"1s\"\n").unwrap()
    );
    assert_eq!(plain.rep_flows(5)[0].1, plain.flows[0]);
    assert!(!toml::to_string(&plain.to_toml())
        .unwrap()
        .contains("start_jitter"));
}

#[test]
fn weights_for_wfq() {
    let s = parse(
        "[link]\nrate = \"100mbit\"\nsched = \"wfq\"\n[[flows]]\ncc = \"cubic\"\nweight = 40\ncount = 2\n[[cross]]\nrate = \"80mbit\"\nweight = 60.5\n",
    )
    .unwrap();
    assert_eq!(s.class_weights(), vec![40.0, 40.0, 60.5]);
    let back = Scenario::from_table(&s.to_toml(), &Ctx { source: "x" }, Path::new(".")).unwrap();
    assert_eq!(back, s);
    // fq needs no weights; the flows' rates go into the request.
    let s = parse("[link]\nsched = \"fq\"\n[[flows]]\ncc = \"cubic\"\nrate = \"2mbit\"\n").unwrap();
    assert_eq!(
        s.flows[0].request_path(),
        "/bytes/1000000000000?rate=2000000"
    );
    let o = s
        .with_overrides(&[("link.sched".into(), "wfq".into())], "sweep")
        .unwrap_err();
    assert_eq!(o.field, "flows[0].weight");
}

#[test]
fn overrides_every_flow_with_a_star() {
    let s = parse("[[flows]]\ncc = \"cubic\"\n[[flows]]\ncc = \"reno\"\n").unwrap();
    let o = s
        .with_overrides(&[("flows.*.cc".into(), "vegas".into())], "sweep")
        .unwrap();
    let ccs: Vec<&str> = o.flows.iter().map(|f| f.cc.as_str()).collect();
    assert_eq!(ccs, ["vegas", "vegas"]);
    let e = s
        .with_overrides(&[("flows.*.bogus".into(), "1".into())], "sweep")
        .unwrap_err();
    assert!(e.to_string().contains("bogus"), "{e}");
}

#[test]
fn an_aqm_override_of_fq_codel_brings_its_scheduler() {
    // The resolved link states `sched = "fifo"`; `--aqm fq_codel` (and a
    // study's `link.aqm`) replaced the AQM and kept it, and was refused.
    use link_model::link::Sched;
    let s = parse("[[flows]]\ncc = \"cubic\"\n").unwrap();
    let o = s
        .with_overrides(&[("link.aqm".into(), "fq_codel".into())], "command line")
        .unwrap();
    assert_eq!((o.link.down.sched, o.link.up.sched), (Sched::Fq, Sched::Fq));
    // Another AQM keeps the scheduler the scenario had.
    let o = o
        .with_overrides(&[("link.aqm".into(), "red".into())], "command line")
        .unwrap();
    assert_eq!(o.link.down.sched, Sched::Fq);
}

#[test]
fn overrides_for_sweeps() {
    let s = parse("[[flows]]\ncc = \"cubic\"\n").unwrap();
    let o = s
        .with_overrides(
            &[
                ("link.rate".into(), "5mbit".into()),
                ("link.rtt".into(), "100ms".into()),
                ("flows.0.cc".into(), "vegas".into()),
                ("duration".into(), "5s".into()),
            ],
            "sweep",
        )
        .unwrap();
    assert_eq!(
        (
            o.link.down.rate_bps,
            o.link.rtt_ns(),
            o.flows[0].cc.as_str()
        ),
        (5e6, 100_000_000, "vegas")
    );
    assert_eq!(o.duration_ns, 5_000_000_000);
    let e = s
        .with_overrides(&[("flows.3.cc".into(), "vegas".into())], "sweep")
        .unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
}

/// Each of `cases` (scenario text, the field its error names, a piece of
/// the error) fails as it says.
fn check_errors(cases: &[(&str, &str, &str)]) {
    for (text, field, needle) in cases {
        let e = parse(text).unwrap_err();
        assert_eq!(&e.field, field, "{text}: {e}");
        assert!(e.to_string().starts_with("t.toml: "), "{e}");
        assert!(e.to_string().contains(needle), "{text}: {e}");
    }
}

#[test]
fn errors_name_file_field_and_allowed() {
    check_errors(&[
        ("durtion = \"5s\"", "durtion", "allowed: name, duration"),
        ("duration = \"5\"", "duration", "30s"),
        ("[link]\nrate = \"fast\"", "link.rate", "fast"),
        (
            "[[cross]]\non = \"1s\"\nrate = \"1mbit\"",
            "cross[0].on",
            "both on and off",
        ),
        (
            "[[cross]]\nrate = \"1mbit\"\npacket_size = 9000",
            "cross[0].packet_size",
            "64 to 1472",
        ),
        ("repetitions = 0", "repetitions", "1 to 1000"),
        (
            "[link]\nsched = \"wfq\"\n[[flows]]\ncc = \"cubic\"\nweight = 1\n[[cross]]\nrate = \"1mbit\"",
            "cross[0].weight",
            "required because the link's sched is wfq",
        ),
        (
            "duration = \"10s\"\n[[cross]]\nrate = \"1mbit\"\nstart_jitter = \"11s\"",
            "cross[0].start_jitter",
            "at most the scenario's duration",
        ),
        ("flows = []", "flows", "at least one"),
        ("this is not toml", "(file)", "not valid TOML"),
    ]);
}

#[test]
fn flow_errors_name_the_field_and_allowed() {
    check_errors(&[
        ("[[flows]]\ncc = \"nosuchcc\"", "flows[0].cc", "nosuchcc"),
        ("[[flows]]\ndirection = \"down\"", "flows[0].cc", "required"),
        (
            "[[flows]]\ncc = \"cubic\"\ndirection = \"sideways\"",
            "flows[0].direction",
            "download or upload",
        ),
        (
            "[[flows]]\ncc = \"cubic\"\ncount = 0",
            "flows[0].count",
            "1 to 200",
        ),
        (
            "[[flows]]\ncc = \"cubic\"\nsize = \"1mb\"\nduration = \"2s\"",
            "flows[0].size",
            "not both",
        ),
        (
            "[[flows]]\ncc = \"cubic\"\nsize = \"1mb\"\nrequests = 0",
            "flows[0].requests",
            "1 to 1000",
        ),
        (
            "[[flows]]\ncc = \"cubic\"\nrequests = 4",
            "flows[0].requests",
            "need a size",
        ),
        (
            "duration = \"5s\"\n[[flows]]\ncc = \"cubic\"\nstart = \"6s\"",
            "flows[0].start",
            "before the scenario's end",
        ),
        (
            "duration = \"10s\"\n[[flows]]\ncc = \"cubic\"\nstart = \"4s\"\nstart_jitter = \"7s\"",
            "flows[0].start_jitter",
            "allowed: a time from 0 to 6s",
        ),
        (
            "[[flows]]\ncc = \"cubic\"\nstart_jitter = \"soon\"",
            "flows[0].start_jitter",
            "not a time",
        ),
    ]);
}

#[test]
fn flow_sending_errors_name_the_field_and_allowed() {
    check_errors(&[
        (
            "[link.down]\nsched = \"wfq\"\n[[flows]]\ncc = \"cubic\"",
            "flows[0].weight",
            "required",
        ),
        (
            "[[flows]]\ncc = \"cubic\"\nweight = 40",
            "flows[0].weight",
            "needs link.sched = \"wfq\"",
        ),
        (
            "[link]\nsched = \"wfq\"\n[[flows]]\ncc = \"cubic\"\nweight = 0",
            "flows[0].weight",
            "above 0",
        ),
        (
            "[link]\nsched = \"wfq\"\n[[flows]]\ncc = \"cubic\"\nweight = \"heavy\"",
            "flows[0].weight",
            "not a weight",
        ),
        (
            "[[flows]]\ncc = \"cubic\"\nmtu = 1100",
            "flows[0].mtu",
            "RFC 9000 §14",
        ),
        (
            "[[flows]]\ncc = \"cubic\"\nmtu = 9000",
            "flows[0].mtu",
            "1200 to 1500 bytes",
        ),
        (
            "[[flows]]\ncc = \"cubic\"\nmtu = \"1300\"",
            "flows[0].mtu",
            "1200 to 1500",
        ),
        (
            "[[flows]]\ncc = \"cubic\"\nrate = \"fast\"",
            "flows[0].rate",
            "such as 2mbit",
        ),
        (
            "[[flows]]\ncc = \"cubic\"\nrate = \"10bit\"",
            "flows[0].rate",
            "between 1kbit and 100gbit",
        ),
    ]);
}

#[test]
fn topologies_round_trip_and_sweeps_reach_every_link() {
    let s = parse(
        "[link]\nrate = \"10mbit\"\nrtt = \"20ms\"\nqueue = \"1bdp\"\n[[links]]\nname = \"access\"\nrate = \"100mbit\"\ndelay = \"2ms\"\n[[links]]\nname = \"core\"\n[[flows]]\ncc = \"cubic\"\nrtt = \"50ms\"\n[[flows]]\ncc = \"newreno\"\npath = [\"core\", \"access\"]\n[[cross]]\nrate = \"1mbit\"\npath = \"core\"\n",
    )
    .unwrap();
    let back = Scenario::from_table(&s.to_toml(), &Ctx { source: "x" }, Path::new(".")).unwrap();
    assert_eq!(back, s);
    let topo = s.topology();
    let routes = s.routes();
    // Flow 0 crosses both links (4 + 20 ms) and makes up the rest of its
    // 50 ms as 13 ms of access delay each way.
    assert_eq!(routes[0].links, [0, 1]);
    assert_eq!(routes[0].access_ns, 13_000_000);
    assert_eq!(topo.base_rtt_ns(&routes[0]), 50_000_000);
    assert_eq!(
        (routes[1].links.as_slice(), routes[2].links.as_slice()),
        (&[1, 0][..], &[1][..])
    );
    // `link.KEY` reaches every link; `links.N.KEY` one.
    let o = s
        .with_overrides(
            &[
                ("link.aqm".into(), "codel".into()),
                ("links.1.rate".into(), "20mbit".into()),
            ],
            "sweep",
        )
        .unwrap();
    let t = o.links.as_ref().unwrap();
    assert!(t.links.iter().all(|l| l.spec.down.aqm != s.link.down.aqm));
    assert_eq!(t.links[0].spec.down.rate_bps, 100e6);
    assert_eq!(t.links[1].spec.down.rate_bps, 20e6);
    let e = s
        .with_overrides(&[("links.5.rate".into(), "1mbit".into())], "sweep")
        .unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
}

#[test]
fn a_linux_tcp_flow_is_sized_or_timed_like_a_quic_flow() {
    // reno is in every Linux kernel.
    let s = parse(
        "duration = \"20s\"\n[[flows]]\ncc = \"cubic\"\n[[flows]]\ncc = \" tcp:reno \"\ndirection = \"upload\"\nsize = \"5mb\"\nstart = \"2s\"\ncount = 2\n[[flows]]\ncc = \"tcp:reno\"\nduration = \"5s\"\n",
    )
    .unwrap();
    assert_eq!(s.flows[0].tcp_cc(), None);
    assert_eq!(s.flows[1].cc, "tcp:reno");
    assert_eq!(s.flows[1].tcp_cc(), Some("reno"));
    assert_eq!(s.flows[1].direction, Direction::Upload);
    assert_eq!(s.flows[1].size, Some(5 * 1024 * 1024));
    assert_eq!(s.flows[2].run_ns(s.duration_ns), 5_000_000_000);
    assert!(s.has_tcp_flows());
    assert_eq!(s.expanded_flows().len(), 4);
    let back = Scenario::from_table(&s.to_toml(), &Ctx { source: "x" }, Path::new(".")).unwrap();
    assert_eq!(back, s);
    // Which backends can run it, as far as the scenario shows.
    use crate::link::Backend;
    for b in [Backend::Emu, Backend::Netem, Backend::Auto] {
        assert_eq!(s.check_tcp_backend(b), Ok(()));
    }
    let e = s.check_tcp_backend(Backend::Sim).unwrap_err();
    assert_eq!(e.field, "flows[1].cc");
    assert!(e.problem.contains("--link netem"), "{e}");
}

#[test]
fn a_linux_tcp_flow_is_refused_where_it_cannot_run_naming_the_field() {
    let avail =
        std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control").unwrap();
    let e = parse("[[flows]]\ncc = \"cubic\"\n[[flows]]\ncc = \"tcp:nosuchcc\"").unwrap_err();
    assert_eq!(e.field, "flows[1].cc");
    assert!(
        e.problem.contains("no TCP congestion control `nosuchcc`"),
        "{e}"
    );
    for n in avail.split_whitespace() {
        assert!(e.problem.contains(n), "{e} does not list {n}");
    }
    check_errors(&[
        (
            "[link]\nbackend = \"sim\"\n[[flows]]\ncc = \"cubic\"\n[[flows]]\ncc = \"tcp:reno\"",
            "flows[1].cc",
            "use --link emu (the emulator's IP mode, root) or --link netem",
        ),
        (
            "link = \"sim\"\n[[flows]]\ncc = \"tcp:reno\"",
            "flows[0].cc",
            "the simulator (--link sim)",
        ),
        (
            "[[flows]]\ncc = \"tcp:reno:beta=2\"",
            "flows[0].cc",
            "takes no parameters",
        ),
        (
            "[[flows]]\ncc = \"tcp:Reno\"",
            "flows[0].cc",
            "not a TCP congestion control name",
        ),
        (
            "[[flows]]\ncc = \"tcp:\"",
            "flows[0].cc",
            "not a TCP congestion control name",
        ),
    ]);
    // Each QUIC knob, named.
    for (knob, value) in [
        ("ack_policy", "\"rfc9000\""),
        ("small_packets", "\"allow\""),
        ("pacing", "false"),
        ("mtu", "1300"),
        ("rate", "\"2mbit\""),
        ("requests", "2"),
    ] {
        let e = parse(&format!("[[flows]]\ncc = \"tcp:reno\"\n{knob} = {value}")).unwrap_err();
        assert_eq!(e.field, format!("flows[0].{knob}"), "{e}");
        assert!(
            e.problem.contains("Linux TCP (`tcp:reno`)") && e.problem.contains("remove it"),
            "{e}"
        );
    }
    // An override to sim (`--link sim`) is refused as the file would be.
    let s = parse("[[flows]]\ncc = \"tcp:reno\"").unwrap();
    let e = s
        .with_overrides(&[("link.backend".into(), "sim".into())], "command line")
        .unwrap_err();
    assert_eq!(
        (e.source.as_str(), e.field.as_str()),
        ("command line", "flows[0].cc")
    );
}

#[test]
fn arrivals_become_sized_flows_and_bad_ones_name_the_field() {
    let text = "duration = \"20s\"\nseed = 3\n[[flows]]\ncc = \"cubic\"\n[[arrivals]]\ncc = \"newreno\"\nrate = 4\nsize = \"fixed:20kb\"\nfrom = \"2s\"\nuntil = \"12s\"\n";
    let sc = parse(text).unwrap();
    let short: Vec<&FlowSpec> = sc.flows[1..].iter().collect();
    // Poisson(40): within 99.9% of it.
    assert!((21..=61).contains(&short.len()), "{}", short.len());
    assert!(short.iter().all(|f| f.size == Some(20 * 1024)
        && f.cc == "newreno"
        && (2_000_000_000..12_000_000_000).contains(&f.start_ns)));
    assert!(short.windows(2).all(|w| w[0].start_ns <= w[1].start_ns));
    // The same seed, the same arrivals; another seed, others.
    assert_eq!(parse(text).unwrap().flows, sc.flows);
    let other = parse(&text.replace("seed = 3", "seed = 4")).unwrap();
    assert_ne!(other.flows, sc.flows);
    let base = "duration = \"20s\"\n[[flows]]\ncc = \"cubic\"\n[[arrivals]]\n";
    check_errors(&[
        (
            &format!("{base}cc = \"cubic\"\nsize = \"fixed:1kb\"\n"),
            "arrivals[0].rate",
            "required",
        ),
        (
            &format!("{base}cc = \"cubic\"\nrate = \"often\"\nsize = \"fixed:1kb\"\n"),
            "arrivals[0].rate",
            "arrivals per second",
        ),
        (
            &format!("{base}cc = \"cubic\"\nrate = 2\nsize = \"uniform:1kb\"\n"),
            "arrivals[0].size",
            "lognormal:median",
        ),
        (
            &format!("{base}cc = \"nosuch\"\nrate = 2\nsize = \"fixed:1kb\"\n"),
            "arrivals[0].cc",
            "nosuch",
        ),
        (
            &format!("{base}cc = \"cubic\"\nrate = 2\nsize = \"fixed:1kb\"\nuntil = \"30s\"\n"),
            "arrivals[0].until",
            "ends after the scenario",
        ),
        (
            &format!("{base}cc = \"cubic\"\nrate = 50\nsize = \"fixed:1kb\"\n"),
            "arrivals[0].rate",
            "more than 200 flows",
        ),
        (
            &format!("{base}cc = \"cubic\"\nrate = 2\nsize = \"fixed:1kb\"\nsizes = 3\n"),
            "arrivals[0].sizes",
            "allowed: cc, rate, size",
        ),
    ]);
}
