//! Link descriptions: parsing, defaults, round trips and errors.

use std::path::Path;

use super::*;

fn parse(s: &str) -> Result<LinkSpec, LinkError> {
    let t: toml::Table = toml::from_str(s).unwrap();
    LinkSpec::from_toml(&t, Path::new("."), "link")
}

#[test]
fn defaults_and_overrides() {
    let l = parse("rate = \"10mbit\"\nrtt = \"41ms\"\nqueue = \"1bdp\"\n[up]\nrate = \"1mbit\"\ndelay = \"5ms\"").unwrap();
    assert_eq!(l.down.rate_bps, 10e6);
    assert_eq!(l.up.rate_bps, 1e6);
    assert_eq!(l.down.delay_ns, 20_500_000);
    assert_eq!(l.up.delay_ns, 5_000_000);
    // BDP over the whole path's RTT at the direction's rate.
    assert_eq!(l.queue_bytes(Dir::Down, 1500), 31_875);
    assert_eq!(l.seed, 1);
    assert_eq!(l.backend, Backend::Auto);
    let d = LinkSpec::default();
    assert_eq!(d.queue_bytes(Dir::Down, 1500), 100_000);
}

#[test]
fn round_trips_through_toml() {
    let l = parse(
        "rate = \"20mbit\"\nrtt = \"40ms\"\nloss = \"ge:p=1%,r=30%\"\njitter = \"1ms\"\njitter_distribution = \"normal\"\naqm = \"red:min_th=10,max_th=30\"\nseed = 7\nbackend = \"emu\"\n[down]\naqm = \"codel:target=3ms\"\nqueue = \"200pkt\"\nreorder = \"1%\"\nsched = \"wfq\"",
    )
    .unwrap();
    assert!(matches!(l.up.aqm, Aqm::Red(p) if p.min_th == 10.0 && p.max_th == 30.0));
    assert!(matches!(l.down.aqm, Aqm::CoDel(p) if p.target_ns == 3_000_000));
    assert_eq!((l.up.sched, l.down.sched), (Sched::Fifo, Sched::Wfq));
    assert!(l.has_classes() && l.is_weighted());
    let back = LinkSpec::from_toml(&l.to_toml(), Path::new("."), "link").unwrap();
    assert_eq!(back, l);
    assert!((l.up.loss.mean_rate() - 0.01 / 0.31).abs() < 1e-12);
}

#[test]
fn pie_takes_linux_defaults_and_round_trips() {
    let l = parse("aqm = \"pie\"").unwrap();
    assert_eq!(l.up.aqm, Aqm::Pie(PieParams::default()));
    assert_eq!(l.down.aqm.name(), "pie");
    let PieParams {
        target_ns,
        tupdate_ns,
        alpha,
        beta,
        max_burst_ns,
        bytemode,
        ecn,
    } = PieParams::default();
    // RFC 8033 / Linux: 15 ms, 15 ms, alpha 0.125 (tc 2), beta 1.25 (tc 20), 150 ms.
    assert_eq!(
        (target_ns, tupdate_ns, max_burst_ns),
        (15_000_000, 15_000_000, 150_000_000)
    );
    assert_eq!(
        (alpha * 16.0, beta * 16.0, bytemode, ecn),
        (2.0, 20.0, false, false)
    );
    let l = parse(
        "[up]\naqm = \"PIE:target=20ms,tupdate=30ms,alpha=0.25,beta=2,max_burst=100ms,bytemode=true,ecn=false,dq_rate_estimator=0\"",
    )
    .unwrap();
    let want = PieParams {
        target_ns: 20_000_000,
        tupdate_ns: 30_000_000,
        alpha: 0.25,
        beta: 2.0,
        max_burst_ns: 100_000_000,
        bytemode: true,
        ecn: false,
    };
    assert_eq!(l.up.aqm, Aqm::Pie(want));
    assert_eq!(l.down.aqm, Aqm::DropTail);
    let back = LinkSpec::from_toml(&l.to_toml(), Path::new("."), "link").unwrap();
    assert_eq!(back, l);
    assert_eq!(
        l.up.aqm.to_spec(),
        "pie:target=20ms,tupdate=30ms,alpha=0.25,beta=2,max_burst=100ms,bytemode=true"
    );
    // Every multiple of 1/16 from 1/16 to 2 is accepted, exactly.
    for i in 1..=32 {
        let a = i as f64 / 16.0;
        let l = parse(&format!("aqm = \"pie:alpha={a},beta={a}\"")).unwrap();
        assert!(matches!(l.up.aqm, Aqm::Pie(p) if p.alpha == a && p.beta == a));
    }
}

#[test]
fn from_pairs_builds_the_same() {
    let a = LinkSpec::from_pairs(
        [
            ("rate", "5mbit"),
            ("rtt", "10ms"),
            ("up.rate", "1mbit"),
            ("seed", "3"),
        ],
        Path::new("."),
    )
    .unwrap();
    assert_eq!((a.up.rate_bps, a.down.rate_bps, a.seed), (1e6, 5e6, 3));
}

/// Each of `cases` (`[link]` text, the field its error names, a piece of
/// the error) fails as it says.
fn check_errors(cases: &[(&str, &str, &str)]) {
    for (toml_text, field, needle) in cases {
        let e = parse(toml_text).unwrap_err();
        assert_eq!(&e.field, field, "{toml_text}: {e}");
        assert!(e.to_string().contains(needle), "{toml_text}: {e}");
    }
}

#[test]
fn errors_name_field_value_and_allowed() {
    check_errors(&[
        ("rate = \"fast\"", "link.rate", "fast"),
        ("rat = \"1mbit\"", "link.rat", "allowed: backend"),
        ("rtt = \"40\"", "link.rtt", "`40`"),
        ("rtt = \"4ms\"\ndelay = \"2ms\"", "link.rtt", "not both"),
        ("queue = \"100\"", "link.queue", "100pkt"),
        ("loss = \"150%\"", "link.loss", "Gilbert-Elliott"),
        ("loss = \"ge:p=1%\"", "link.loss", "needs both p and r"),
        (
            "loss = \"ge:p=1%,r=2%,q=3\"",
            "link.loss",
            "unknown key `q`",
        ),
        ("[up]\nspeed = \"1mbit\"", "link.up.speed", "allowed: rate"),
        ("up = 3", "link.up", "table"),
        ("backend = \"docker\"", "link.backend", "auto, emu, netem"),
        ("seed = -1", "link.seed", "non-negative"),
        ("rate = true", "link.rate", "boolean"),
        (
            "jitter_distribution = \"cauchy\"",
            "link.jitter_distribution",
            "paretonormal",
        ),
        (
            "trace = \"/nonexistent.trace\"",
            "link.trace",
            "cannot read",
        ),
        ("rate = \"1mbit\"\ntrace = \"x\"", "link.trace", "not both"),
    ]);
}

#[test]
fn queue_management_errors_name_field_value_and_allowed() {
    check_errors(&[
        ("aqm = \"blue\"", "link.aqm", "droptail, red"),
        ("aqm = \"blue\"", "link.aqm", "pie[:target=15ms"),
        (
            "aqm = \"pie:alpha=0.1\"",
            "link.aqm",
            "alpha must be a multiple of 1/16",
        ),
        ("aqm = \"pie:beta=3\"", "link.aqm", "from 0.0625 to 2"),
        ("aqm = \"pie:alpha=0\"", "link.aqm", "`alpha=0`"),
        (
            "aqm = \"pie:target=0ms\"",
            "link.aqm",
            "target must be a time from 1us",
        ),
        (
            "aqm = \"pie:target=1500ns\"",
            "link.aqm",
            "whole microseconds",
        ),
        (
            "aqm = \"pie:tupdate=100us\"",
            "link.aqm",
            "tupdate must be a time from 1ms",
        ),
        (
            "aqm = \"red:ecn=yes\"",
            "link.aqm",
            "ecn must be true or false",
        ),
        (
            "aqm = \"codel:ecn=2\"",
            "link.aqm",
            "ecn must be true or false",
        ),
        (
            "aqm = \"codel:ce_threshold=0ms\"",
            "link.aqm",
            "ce_threshold must be a time from 1us to 10s",
        ),
        (
            "aqm = \"step:threshold=0pkt\"",
            "link.aqm",
            "threshold must be packets from 1 to 1000000",
        ),
        ("aqm = \"step:threshold=20\"", "link.aqm", "`threshold=20`"),
        (
            "aqm = \"step:k=20pkt\"",
            "link.aqm",
            "unknown key `k`; allowed: threshold",
        ),
        (
            "aqm = \"dualpi2:k=0.5\"",
            "link.aqm",
            "coupling factor k must be at least 1",
        ),
        (
            "aqm = \"dualpi2:alpha=-1\"",
            "link.aqm",
            "alpha must be a number above 0",
        ),
        (
            "aqm = \"dualpi2:tupdate=10us\"",
            "link.aqm",
            "tupdate must be a time from 1ms to 10s",
        ),
        (
            "aqm = \"dualpi2:l_min_qlen=x\"",
            "link.aqm",
            "l_min_qlen must be a whole number of packets from 0 to 1000000",
        ),
        (
            "aqm = \"dualpi2:limit=5\"",
            "link.aqm",
            "unknown key `limit`",
        ),
        (
            "aqm = \"dualpi2\"\nsched = \"fq\"",
            "link.sched",
            "sched must be \"fifo\"",
        ),
        (
            "aqm = \"dualpi2\"\n[down]\nsched = \"wfq\"",
            "link.down.sched",
            "DualPI2 is its own scheduler",
        ),
        (
            "aqm = \"pie:ecn=maybe\"",
            "link.aqm",
            "ecn must be true or false",
        ),
        (
            "aqm = \"pie:dq_rate_estimator=true\"",
            "link.aqm",
            "dq_rate_estimator must be false",
        ),
        ("aqm = \"pie:limit=100\"", "link.aqm", "unknown key `limit`"),
        (
            "[down]\naqm = \"pie:bytemode=yes\"",
            "link.down.aqm",
            "bytemode must be true or false",
        ),
        ("sched = \"cbq\"", "link.sched", "fifo (one queue), fq"),
        ("[down]\nsched = \"sfq\"", "link.down.sched", "wfq"),
        (
            "aqm = \"red:min_th=20,max_th=10\"",
            "link.aqm",
            "min_th < max_th",
        ),
        (
            "aqm = \"codel:target=200ms\"",
            "link.aqm",
            "target < interval",
        ),
        (
            "aqm = \"red:auto=true,min_th=10\"",
            "link.aqm",
            "min_th is derived from the link's rate and delay with auto=true",
        ),
        (
            "[up]\naqm = \"red:wq=0.01,auto=true\"",
            "link.up.aqm",
            "wq is derived",
        ),
        (
            "aqm = \"red:auto=true,max_th=30\"",
            "link.aqm",
            "give either auto=true or explicit min_th, max_th and wq",
        ),
        (
            "aqm = \"red:target_delay=5ms\"",
            "link.aqm",
            "target_delay sets the delay automatic RED aims its thresholds at and needs auto=true",
        ),
        (
            "aqm = \"red:auto=true,target_delay=0ms\"",
            "link.aqm",
            "target_delay must be a time from 1us to 10s",
        ),
        (
            "aqm = \"red:auto=yes\"",
            "link.aqm",
            "auto must be true or false",
        ),
        (
            "aqm = \"red:wait=2\"",
            "link.aqm",
            "wait must be true or false",
        ),
        (
            "aqm = \"red:auto=true,mean_pktsize=10\"",
            "link.aqm",
            "mean_pktsize must be 64..65535",
        ),
    ]);
}

/// ns-2's automatic RED (`queue/red.cc`, `REDQueue::initialize_params`),
/// against values computed apart from this code (Python's math.expm1): ptc = rate / (8 · 500) packets/s,
/// min_th = max(5, 0.005 · ptc / 2), max_th = 3 · min_th, and
/// wq = 1 − exp(−1 / (10 · max(0.1, 3 · (delay + 1/ptc)) · ptc)).
#[test]
fn automatic_red_derives_ns2_thresholds_and_weight() {
    let auto = |rate: &str, delay: &str| {
        let l = parse(&format!(
            "rate = \"{rate}\"\ndelay = \"{delay}\"\naqm = \"red:auto=true\""
        ))
        .unwrap();
        let Aqm::Red(p) = l.down.aqm.resolved(l.down.rate_bps, l.down.delay_ns) else {
            panic!("not RED")
        };
        p
    };
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1e-12);
    // 20 Mbit/s: ptc = 5000/s; target queue 25 packets, half of it 12.5;
    // rtt = max(0.1, 3 · (0.020 + 0.0002)) = 0.1 s; wq = 1 − e^(−1/5000).
    let p = auto("20mbit", "20ms");
    assert!(close(p.min_th, 12.5) && close(p.max_th, 37.5), "{p:?}");
    assert!(close(p.wq, 1.999_800_013_332_9e-4), "{}", p.wq);
    assert_eq!((p.mean_pktsize, p.max_p, p.gentle), (500, 0.1, true));
    assert!(p.wait && p.bytes);
    // 100 Mbit/s: ptc = 25000/s; min_th 62.5, max_th 187.5; wq = 1 − e^(−1/25000).
    let p = auto("100mbit", "20ms");
    assert!(close(p.min_th, 62.5) && close(p.max_th, 187.5), "{p:?}");
    assert!(close(p.wq, 3.999_920_001_066_6e-5), "{}", p.wq);
    // A long link: rtt = 3 · (0.050 + 0.0002) = 0.1506 s leaves the 0.1 s
    // floor; wq = 1 − e^(−1/7530).
    let p = auto("20mbit", "50ms");
    assert!(close(p.wq, 1.327_933_070_2e-4), "{}", p.wq);
    // 1 Mbit/s: ptc = 250/s, the target queue (1.25 packets) is below
    // the floor of 5; wq = 1 − e^(−1/250).
    let p = auto("1mbit", "20ms");
    assert!(close(p.min_th, 5.0) && close(p.max_th, 15.0), "{p:?}");
    assert!(close(p.wq, 3.992_010_656_0e-3), "{}", p.wq);
    // A target delay and a packet size of one's own: 20 Mbit/s at 1000
    // bytes is 2500 packets/s; 20 ms of it is 50 packets, min_th 25.
    let l = parse("rate = \"20mbit\"\naqm = \"red:auto=true,target_delay=20ms,mean_pktsize=1000\"")
        .unwrap();
    let Aqm::Red(p) = l.down.aqm.resolved(l.down.rate_bps, l.down.delay_ns) else {
        panic!()
    };
    assert!(close(p.min_th, 25.0) && close(p.max_th, 75.0), "{p:?}");
    // Explicit RED is left as written, and keeps the old defaults.
    let l = parse("aqm = \"red\"").unwrap();
    assert_eq!(l.down.aqm.resolved(1e9, 1), Aqm::Red(RedParams::default()));
    assert!(matches!(l.down.aqm, Aqm::Red(p) if !p.wait && !p.bytes && p.auto_target_ns.is_none()));
}

#[test]
fn red_specs_round_trip() {
    for spec in [
        "red:auto=true",
        "red:auto=true,target_delay=20ms,mean_pktsize=1000,wait=false,bytes=false,gentle=false,max_p=0.2",
        "red:min_th=5,max_th=15,max_p=0.1,wq=0.002",
        "red:min_th=5,max_th=15,wait=true,bytes=true,mean_pktsize=500",
        "red:auto=false,min_th=3,max_th=9",
    ] {
        let l = parse(&format!("aqm = \"{spec}\"")).unwrap();
        let back = LinkSpec::from_toml(&l.to_toml(), Path::new("."), "link").unwrap();
        assert_eq!(back, l, "{spec}");
    }
    // The written form of explicit RED is what it was before wait and bytes.
    let l = parse("aqm = \"red\"").unwrap();
    assert_eq!(
        l.to_toml()["down"]["aqm"].as_str(),
        Some("red:min_th=5,max_th=15,max_p=0.1,wq=0.002,gentle=true,mean_pktsize=1000")
    );
}

#[test]
fn ecn_options_parse_and_round_trip() {
    use crate::link::{CoDelParams, DualPi2Params, RedParams, StepParams, StepThreshold};
    let cases: [(&str, Aqm); 9] = [
        (
            "red:ecn=true",
            Aqm::Red(RedParams {
                ecn: true,
                ..RedParams::default()
            }),
        ),
        (
            "red:auto=true,ecn=1",
            Aqm::Red(RedParams {
                ecn: true,
                ..RedParams::ns2_auto()
            }),
        ),
        (
            "codel:ecn=true,ce_threshold=2500us",
            Aqm::CoDel(CoDelParams {
                ecn: true,
                ce_threshold_ns: Some(2_500_000),
                ..CoDelParams::default()
            }),
        ),
        (
            "pie:ecn=true",
            Aqm::Pie(PieParams {
                ecn: true,
                ..PieParams::default()
            }),
        ),
        ("step", Aqm::Step(StepParams::default())),
        (
            "step:threshold=20pkt",
            Aqm::Step(StepParams {
                threshold: StepThreshold::Packets(20),
            }),
        ),
        (
            "step:threshold=30kb",
            Aqm::Step(StepParams {
                threshold: StepThreshold::Bytes(30 * 1024),
            }),
        ),
        ("dualpi2", Aqm::DualPi2(DualPi2Params::default())),
        (
            "dualpi2:target=20ms,k=3,l_thresh=800us,l_range=400us,tshift=50ms,l_min_qlen=0",
            Aqm::DualPi2(DualPi2Params {
                target_ns: 20_000_000,
                k: 3.0,
                l_thresh_ns: 800_000,
                l_range_ns: 400_000,
                tshift_ns: 50_000_000,
                l_min_qlen: 0,
                ..DualPi2Params::default()
            }),
        ),
    ];
    for (spec, want) in cases {
        let l = parse(&format!("aqm = \"{spec}\"")).unwrap();
        assert_eq!(l.down.aqm, want, "{spec}");
        assert!(l.down.aqm.marks(), "{spec}");
        let back = LinkSpec::from_toml(&l.to_toml(), Path::new("."), "link").unwrap();
        assert_eq!(back, l, "{spec}");
    }
    // fq_codel's options reach each flow's CoDel.
    let l = parse("aqm = \"fq_codel:ecn=true,ce_threshold=1ms\"").unwrap();
    assert_eq!(l.down.sched, Sched::Fq);
    assert!(matches!(l.down.aqm, Aqm::CoDel(p) if p.ecn && p.ce_threshold_ns == Some(1_000_000)));
    // Without ecn the specs are what they were before ECN existed, so
    // the bottleneck log's header (which holds them) is unchanged.
    for spec in ["red", "red:auto=true", "codel", "pie"] {
        let l = parse(&format!("aqm = \"{spec}\"")).unwrap();
        assert!(!l.down.aqm.marks());
        assert!(!l.down.aqm.to_spec().contains("ecn"), "{spec}");
        assert!(!l.down.aqm.to_spec().contains("ce_threshold"), "{spec}");
    }
}
