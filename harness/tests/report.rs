//! The HTML report from real runs on the virtual-time link: one figure per
//! quantity with a panel per run, stable colours, a labelled scatter with
//! the delay axis reversed, SVG and PNG files beside the page, and nothing
//! fetched from elsewhere. (The page in a browser: tests/tests/report_chromium.rs.)

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use harness::link::Backend;
use harness::run::RunConfig;
use harness::scenario::Scenario;

fn sim_run(cc: &str, out: &Path) {
    let text = format!(
        "name = \"{cc}\"\nduration = \"2s\"\nrepetitions = 2\n[link]\nbackend = \"sim\"\nrate = \"5mbit\"\nrtt = \"30ms\"\nloss = \"0.5%\"\n[[flows]]\ncc = \"{cc}\"\n"
    );
    let sc = Scenario::parse(&text, "test", Path::new(".")).unwrap();
    harness::run::run(&sc, &sim_cfg(out)).unwrap();
}

/// A sim run into `out` with qlog (the report's series), no per-packet log.
fn sim_cfg(out: &Path) -> RunConfig {
    RunConfig {
        out: out.to_path_buf(),
        bin_dir: PathBuf::from("/nonexistent"),
        backend: Backend::Sim,
        quiet: true,
        stop: Arc::new(AtomicBool::new(false)),
        per_packet_log: false,
        threads: 0,
        qlog_level: quic_app::QlogLevel::Core,
        emu_mode: harness::emu::EmuMode::Relay,
        netem_router: None,
        count_syscalls: false,
    }
}

/// `(cx, cy)` of the scatter's mean marker filled with `fill` (the
/// largest circle of that colour: the repetitions' dots are smaller).
fn marker(svg: &str, fill: &str) -> (f64, f64) {
    let attr = |el: &str, name: &str| -> f64 {
        let at = el.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        el[at..].split('"').next().unwrap().parse().unwrap()
    };
    svg.split("<circle")
        .skip(1)
        .map(|el| el.split('>').next().unwrap())
        .filter(|el| el.contains(&format!("fill=\"{fill}\"")))
        .max_by(|a, b| attr(a, "r").total_cmp(&attr(b, "r")))
        .map(|el| (attr(el, "cx"), attr(el, "cy")))
        .unwrap_or_else(|| panic!("no mean marker filled {fill}"))
}

/// The page holds nothing fetched from elsewhere, five figures, and one
/// panel per run in each small multiple.
fn check_page(html: &str) {
    for bad in [
        "<script src",
        "<link",
        "src=\"http",
        "href=\"http",
        "@import",
        "url(",
    ] {
        assert!(!html.contains(bad), "the page refers elsewhere: {bad}");
    }
    assert_eq!(html.matches("<figure class=\"fig\"").count(), 5);
    for name in ["cwnd", "rtt", "goodput", "queue"] {
        let want = format!("id=\"fig-{name}\" data-panels=\"2\"");
        assert!(html.contains(&want), "{name} has not two panels");
    }
}

/// Each figure is in `figs` as SVG (the page's own drawing) and PNG, and
/// draws both algorithms in their fixed colours (lines, or the scatter's
/// points).
fn check_files(html: &str, figs: &Path) {
    let hex = |cc| harness::report::palette::hex(harness::report::palette::colour(cc));
    assert_eq!(
        (hex("cubic"), hex("vegas")),
        ("#0072b2".into(), "#009e73".into())
    );
    for name in ["scatter", "cwnd", "rtt", "goodput", "queue"] {
        let svg = std::fs::read_to_string(figs.join(format!("{name}.svg"))).unwrap();
        assert!(html.contains(&svg), "{name}.svg is not the page's figure");
        let png = std::fs::read(figs.join(format!("{name}.png"))).unwrap();
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "{name}.png"
        );
        let (element, attr) = if name == "scatter" {
            ("<circle", "fill")
        } else {
            ("<polyline", "stroke")
        };
        for cc in ["cubic", "vegas"] {
            let want = format!("{attr}=\"{}\"", hex(cc).to_uppercase());
            let drawn = svg
                .split(element)
                .skip(1)
                .any(|el| el.split('>').next().unwrap().contains(&want));
            assert!(drawn, "{name}: nothing of {cc} drawn in its colour");
        }
    }
}

/// The scatter labels its points and reverses the delay axis: the run
/// with the lower 95th-percentile RTT is further right.
fn check_scatter(svg: &str, runs: &Path) {
    for label in ["cubic", "vegas"] {
        assert!(
            svg.contains(&format!("\n{label}\n</text>")),
            "no label {label}"
        );
    }
    let p95 = |cc: &str| -> f64 {
        let text = std::fs::read_to_string(runs.join(cc).join("summary.json")).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        v["flows"][0]["rtt_ms"]["p95"].as_f64().unwrap()
    };
    assert!(
        p95("vegas") < p95("cubic"),
        "the scenario should give vegas less delay"
    );
    let (c, v) = (marker(svg, "#0072B2"), marker(svg, "#009E73"));
    assert!(
        v.0 > c.0,
        "lower delay is not further right: vegas {v:?}, cubic {c:?}"
    );
}

#[test]
fn report_draws_small_multiples_and_a_labelled_reversed_scatter() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    for cc in ["cubic", "vegas"] {
        sim_run(cc, &runs.join(cc));
    }
    let page = dir.path().join("out/report.html");
    assert_eq!(
        harness::report::write(std::slice::from_ref(&runs), &page),
        Ok(2)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    check_page(&html);
    let figs = dir.path().join("out/report-figures");
    check_files(&html, &figs);
    check_scatter(
        &std::fs::read_to_string(figs.join("scatter.svg")).unwrap(),
        &runs,
    );
    // Markdown embeds the same files.
    let md = dir.path().join("out/report.md");
    harness::report::write(&[runs], &md).unwrap();
    let md = std::fs::read_to_string(md).unwrap();
    assert!(
        md.contains("![scatter](report-figures/scatter.svg)"),
        "{md}"
    );
}

#[test]
fn a_run_of_several_links_gets_a_queue_panel_per_link() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    let text = "name = \"lot\"\nduration = \"2s\"\n[link]\nbackend = \"sim\"\nrate = \"5mbit\"\ndelay = \"10ms\"\n[topology]\nparking_lot = 2\n[[flows]]\ncc = \"cubic\"\npath = [\"l1\", \"l2\"]\n[[flows]]\ncc = \"cubic\"\npath = \"l2\"\n";
    let sc = Scenario::parse(text, "test", Path::new(".")).unwrap();
    harness::run::run(&sc, &sim_cfg(&runs.join("lot"))).unwrap();
    let page = dir.path().join("out/report.html");
    assert_eq!(harness::report::write(&[runs], &page), Ok(1));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("id=\"fig-queue\" data-panels=\"2\""),
        "the queue figure has not one panel per link"
    );
    // The flows' figures keep one panel per flow.
    assert!(html.contains("id=\"fig-cwnd\" data-panels=\"2\""));
    let svg = std::fs::read_to_string(dir.path().join("out/report-figures/queue.svg")).unwrap();
    for name in ["link l1", "link l2"] {
        assert!(svg.contains(name), "no panel titled {name}");
    }
}

#[test]
fn runs_of_two_flows_at_several_rtts_and_buffers_get_an_rtt_fairness_map() {
    let dir = tempfile::tempdir().unwrap();
    let runs = dir.path().join("runs");
    // NewReno at 20 and 20 or 80 ms, through 1 or 4 BDP, and one run of a
    // single flow, which the map leaves out.
    for (rtt, queue) in [
        ("20ms", "1bdp"),
        ("80ms", "1bdp"),
        ("20ms", "4bdp"),
        ("80ms", "4bdp"),
    ] {
        let text = format!(
            "name = \"m\"\nduration = \"8s\"\n[link]\nbackend = \"sim\"\nrate = \"10mbit\"\nrtt = \"20ms\"\nqueue = \"{queue}\"\n[[flows]]\ncc = \"newreno\"\nrtt = \"20ms\"\n[[flows]]\ncc = \"newreno\"\nrtt = \"{rtt}\"\n"
        );
        let sc = Scenario::parse(&text, "test", Path::new(".")).unwrap();
        let mut cfg = sim_cfg(&runs.join(format!("{rtt}-{queue}")));
        cfg.qlog_level = quic_app::QlogLevel::Off;
        harness::run::run(&sc, &cfg).unwrap();
    }
    sim_run("cubic", &runs.join("single"));
    let md = dir.path().join("out/report.md");
    assert_eq!(
        harness::report::write(std::slice::from_ref(&runs), &md),
        Ok(5)
    );
    let text = std::fs::read_to_string(&md).unwrap();
    let table = &text[text
        .find("## RTT fairness")
        .expect("no RTT fairness section")..];
    assert!(table.contains("**newreno**"), "{table}");
    assert!(
        !table.contains("**cubic**"),
        "a one-flow run made a map: {table}"
    );
    assert!(table.contains("| RTT ratio | 1 BDP | 4 BDP |"), "{table}");
    // The share of the 20 ms flow: about even at equal RTTs, more than even
    // against a flow of four times its RTT.
    let row = |ratio: &str| -> Vec<f64> {
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("| {ratio} |")))
            .unwrap_or_else(|| panic!("no row {ratio}: {table}"));
        line.split('|')
            .skip(2)
            .filter_map(|c| c.split_whitespace().next()?.parse().ok())
            .collect()
    };
    for s in row("1") {
        assert!((30.0..=70.0).contains(&s), "equal RTTs: {s}% in {table}");
    }
    for s in row("4") {
        assert!(
            s > 55.0,
            "the 20 ms flow against an 80 ms one: {s}% in {table}"
        );
    }
    let page = dir.path().join("out/report.html");
    harness::report::write(&[runs], &page).unwrap();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"fig-rtt-fairness\""), "no map figure");
    assert!(dir
        .path()
        .join("out/report-figures/rtt-fairness.png")
        .exists());
}
