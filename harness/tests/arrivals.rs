//! Short flows arriving beside long ones, on the simulator: every arrival
//! runs as its own flow and its completion time lands in summary.json, by
//! size class.

mod common;

use std::path::Path;

use harness::scenario::Scenario;

#[test]
fn arrivals_complete_and_their_times_are_classed_by_size() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../scenarios/arrivals/web-beside-bulk.toml"),
    )
    .unwrap()
    .replace("duration = \"30s\"", "duration = \"10s\"")
    .replace("until = \"28s\"", "until = \"8s\"");
    let sc = Scenario::parse(&text, "web", Path::new(".")).unwrap();
    let short = sc.flows.iter().filter(|f| f.size.is_some()).count();
    assert!(short >= 5, "{short} arrivals");
    let dir = tempfile::tempdir().unwrap();
    let cfg = common::sim_config(dir.path(), quic_app::QlogLevel::Metrics);
    let s = harness::run::run(&sc, &cfg).unwrap();
    let classed: usize = s.fct.iter().map(|c| c.flows).sum();
    assert_eq!(classed, short);
    for c in &s.fct {
        eprintln!(
            "{}..{} bytes: {} of {} done, p50 {:?} p95 {:?}",
            c.above_bytes, c.up_to_bytes, c.completed, c.flows, c.p50_s, c.p95_s
        );
        assert_eq!(c.completed, c.fct_s.len());
        assert!(c.fct_s.windows(2).all(|w| w[0] <= w[1]));
        // No flow completes in less than two round trips (handshake and
        // request), 80 ms here.
        assert!(c.fct_s.iter().all(|&t| t >= 0.08), "{:?}", c.fct_s);
        if let (Some(a), Some(b)) = (c.p50_s, c.p95_s) {
            assert!(a <= b);
        }
    }
    // Each sized flow's own line carries its size and completion time.
    for f in s.flows.iter().filter(|f| f.size_bytes.is_some()) {
        assert!(f.fct_s.is_some(), "flow {} did not complete", f.index);
    }
    assert!(s.flows[0].fct_s.is_none() && s.flows[0].size_bytes.is_none());
}
