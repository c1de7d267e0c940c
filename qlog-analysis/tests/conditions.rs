//! Run conditions in traces: `simulation:scenario` and `simulation:marker`
//! events reach the summary (`conditions`, `markers`), its text, and the
//! qvis export, in every flavour that can carry them.

use std::path::{Path, PathBuf};
use std::process::Command;

use qlog_analysis::analysis::{Analyzer, MAX_MARKERS};
use qlog_analysis::summary::{summarize_file, Summary};
use qlog_analysis::synth::write_quiche_trace;
use serde_json::{json, Value};

fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_qlog-analysis"))
}

fn scenario() -> Value {
    json!({
        "scenario": "cli", "backend": "sim", "seed": 1, "duration_s": 10.0,
        "link": {"backend": "sim", "seed": 1,
            "up": {"rate": "20mbit", "delay": "20ms", "jitter": "0ms", "loss": "0%", "queue": "1bdp", "aqm": "droptail"},
            "down": {"rate": "20mbit", "delay": "20ms", "jitter": "0ms", "loss": "0%", "queue": "1bdp", "aqm": "droptail"}},
        "flows": [{"cc": "cubic", "direction": "download", "start_s": 0.0, "size": null}],
        "cross": []
    })
}

/// A synthetic quiche JSON-SEQ trace (see `synth`), with the scenario
/// event first after the header and markers spliced in at their times (ms).
fn quiche_with(scenario: Option<&Value>, markers: &[(f64, Value)]) -> String {
    let mut raw = Vec::new();
    write_quiche_trace(&mut raw, 300, 25).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let mut records: Vec<String> = text
        .split('\u{1e}')
        .filter(|r| !r.trim().is_empty())
        .map(|r| format!("\u{1e}{r}"))
        .collect();
    if let Some(s) = scenario {
        records.insert(
            1,
            format!(
                "\u{1e}{}\n",
                json!({"time": 0.0, "name": "simulation:scenario", "data": s})
            ),
        );
    }
    for (t, data) in markers {
        let at = records
            .iter()
            .skip(1)
            .position(|r| {
                let v: Value = serde_json::from_str(r.trim_start_matches('\u{1e}')).unwrap();
                v["time"].as_f64().unwrap() > *t
            })
            .map_or(records.len(), |i| i + 1);
        records.insert(
            at,
            format!(
                "\u{1e}{}\n",
                json!({"time": t, "name": "simulation:marker", "data": data})
            ),
        );
    }
    records.concat()
}

fn two_markers() -> Vec<(f64, Value)> {
    vec![
        (0.0, json!({"type": "flow_start", "flow": 0, "cc": "cubic"})),
        (
            20.0,
            json!({"type": "flow_start", "flow": 1, "cc": "vegas"}),
        ),
    ]
}

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

fn summary_json(p: &Path) -> Value {
    let out = bin().args(["summary", "--json"]).arg(p).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["files"][0]["connections"][0].clone()
}

#[test]
fn summary_json_has_the_conditions_and_markers() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "c.sqlog",
        &quiche_with(Some(&scenario()), &two_markers()),
    );
    let c = summary_json(&p);
    assert_eq!(c["conditions"], scenario());
    assert_eq!(c["conditions"]["backend"], "sim");
    let m = c["markers"].as_array().unwrap();
    assert_eq!(m.len(), 2, "{m:?}");
    assert_eq!(m[0]["t_s"].as_f64(), Some(0.0));
    assert!(
        (m[1]["t_s"].as_f64().unwrap() - 0.02).abs() < 1e-12,
        "{m:?}"
    );
    assert_eq!(m[0]["data"], two_markers()[0].1);
    assert_eq!(m[1]["data"]["cc"], "vegas");
    assert_eq!(c["markers_dropped"], 0);
    assert_eq!(c["counts"]["markers"], 2);
    // The rest of the analysis is as without them.
    let plain = write(dir.path(), "p.sqlog", &quiche_with(None, &[]));
    let d = summary_json(&plain);
    assert_eq!(c["loss"], d["loss"]);
    assert_eq!(c["app_bytes"], d["app_bytes"]);
    assert_eq!(c["duration_s"], d["duration_s"]);
    assert_eq!(
        c["counts"]["events"].as_u64().unwrap(),
        d["counts"]["events"].as_u64().unwrap() + 3
    );

    // The text output describes them in a line each.
    let out = bin().arg("summary").arg(&p).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "  conditions: scenario cli, backend sim, seed 1, 10 s, link 20 Mbit/s, rtt 40 ms, 1 flow (cubic)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("  2 markers: flow_start at 0 s, flow_start at 0.02 s\n"),
        "{text}"
    );
}

#[test]
fn a_trace_without_them_has_null_conditions_and_no_markers() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(dir.path(), "p.sqlog", &quiche_with(None, &[]));
    let c = summary_json(&p);
    assert!(c.get("conditions").is_some_and(Value::is_null), "{c}");
    assert_eq!(c["markers"], json!([]));
    assert_eq!(c["markers_dropped"], 0);
    assert_eq!(c["counts"]["markers"], 0);
    let out = bin().arg("summary").arg(&p).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        !text.contains("conditions") && !text.contains("marker"),
        "{text}"
    );
}

#[test]
fn only_the_first_scenario_counts() {
    let second = json!({"backend": "emu"});
    let mut text = quiche_with(Some(&scenario()), &[]);
    text += &format!(
        "\u{1e}{}\n",
        json!({"time": 40.0, "name": "simulation:scenario", "data": second})
    );
    let mut a = Analyzer::new(0.1, false);
    qlog_analysis::read(text.as_bytes(), "t", &mut a).unwrap();
    assert_eq!(a.connections[0].conditions.as_ref(), Some(&scenario()));
}

#[test]
fn qvis_export_passes_them_through() {
    let dir = tempfile::tempdir().unwrap();
    let p = write(
        dir.path(),
        "c.sqlog",
        &quiche_with(Some(&scenario()), &two_markers()),
    );
    let out = dir.path().join("c.qvis.qlog");
    qlog_analysis::qvis::export(&p, &out).unwrap();
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let evs = v["traces"][0]["events"].as_array().unwrap();
    let sc: Vec<&Value> = evs
        .iter()
        .filter(|e| e["name"] == "simulation:scenario")
        .collect();
    assert_eq!(sc.len(), 1);
    assert_eq!(sc[0]["data"], scenario());
    assert_eq!(sc[0]["time"].as_f64(), Some(0.0));
    let mk: Vec<&Value> = evs
        .iter()
        .filter(|e| e["name"] == "simulation:marker")
        .collect();
    assert_eq!(mk.len(), 2);
    assert!(
        (mk[1]["time"].as_f64().unwrap() - 20.0).abs() < 1e-9,
        "{}",
        mk[1]
    );
    assert_eq!(mk[1]["data"], two_markers()[1].1);
    // And the export reads back with the same conditions and markers.
    let back = summarize_file(&out, 0.1).unwrap();
    let orig = summarize_file(&p, 0.1).unwrap();
    let (b, o) = (&back.connections[0], &orig.connections[0]);
    assert_eq!(b.conditions, o.conditions);
    assert_eq!(b.markers.len(), 2);
    for (x, y) in b.markers.iter().zip(&o.markers) {
        assert!((x.t_s - y.t_s).abs() < 1e-9);
        assert_eq!(x.data, y.data);
    }
}

fn only(text: &str) -> Summary {
    let mut a = Analyzer::new(0.1, false);
    let st = qlog_analysis::read(text.as_bytes(), "t", &mut a).unwrap();
    assert_eq!(st.skipped, 0, "{st:?}");
    Summary::of("t", &a.connections[0])
}

#[test]
fn other_flavours_carry_them_as_category_and_event() {
    let sc = scenario();
    // qlog 0.3, one JSON document, category + event.
    let doc = format!(
        r#"{{"qlog_version":"0.3","qlog_format":"JSON","traces":[{{"vantage_point":{{"type":"client"}},"common_fields":{{"time_format":"relative"}},"events":[{{"time":0,"category":"simulation","event":"scenario","data":{sc}}},{{"time":5.5,"category":"simulation","event":"marker","data":{{"type":"flow_start","flow":1}}}},{{"time":6,"name":"recovery:metrics_updated","data":{{"congestion_window":12000}}}}]}}]}}"#
    );
    let s = only(&doc);
    assert_eq!(s.conditions.as_ref(), Some(&sc));
    assert_eq!(s.markers.len(), 1);
    assert!((s.markers[0].t_s - 0.0055).abs() < 1e-12);
    // qlog 0.4 JSON-SEQ with names.
    let seq = format!(
        "\u{1e}{{\"qlog_version\":\"0.4\",\"qlog_format\":\"JSON-SEQ\",\"trace\":{{\"vantage_point\":{{\"type\":\"server\"}}}}}}\n\u{1e}{{\"time\":0,\"name\":\"simulation:scenario\",\"data\":{sc}}}\n\u{1e}{{\"time\":3,\"name\":\"simulation:marker\",\"data\":{{\"type\":\"x\"}}}}\n"
    );
    let s = only(&seq);
    assert_eq!(s.conditions.as_ref(), Some(&sc));
    assert_eq!(s.markers[0].t_s, 0.003);
    // draft-01 with event_fields, times in microseconds, upper case.
    let draft = format!(
        r#"{{"qlog_version":"draft-01","traces":[{{"vantage_point":{{"type":"SERVER"}},"configuration":{{"time_units":"us"}},"common_fields":{{"reference_time":"1000"}},"event_fields":["relative_time","CATEGORY","EVENT_TYPE","DATA"],"events":[["0","SIMULATION","SCENARIO",{sc}],["1500","simulation","marker",{{"type":"flow_start"}}],["2000","recovery","metrics_updated",{{"cwnd":"15360"}}]]}}]}}"#
    );
    let s = only(&draft);
    assert_eq!(s.conditions.as_ref(), Some(&sc));
    assert_eq!(s.markers.len(), 1);
    assert!((s.markers[0].t_s - 0.0015).abs() < 1e-12);
    assert_eq!(s.markers[0].data["type"], "flow_start");
}

#[test]
fn markers_past_the_cap_are_counted_not_kept() {
    let mut text = String::from(
        "\u{1e}{\"file_schema\":\"urn:ietf:params:qlog:file:sequential\",\"serialization_format\":\"JSON-SEQ\",\"trace\":{}}\n",
    );
    let n = MAX_MARKERS + 5;
    for i in 0..n {
        text += &format!(
            "\u{1e}{{\"time\":{i}.0,\"name\":\"simulation:marker\",\"data\":{{\"type\":\"tick\",\"i\":{i}}}}}\n"
        );
    }
    // A marker without data is kept too, with null data.
    text += "\u{1e}{\"time\":1e6,\"name\":\"simulation:marker\"}\n";
    let s = only(&text);
    assert_eq!(s.markers.len(), MAX_MARKERS);
    assert_eq!(s.markers_dropped, 6);
    assert_eq!(s.counts.markers, n as u64 + 1);
    assert_eq!(s.markers[MAX_MARKERS - 1].data["i"], MAX_MARKERS - 1);
    assert!(s.conditions.is_none());
    let mut a = Analyzer::new(0.1, false);
    qlog_analysis::read(
        "\u{1e}{\"file_schema\":\"x\",\"trace\":{}}\n\u{1e}{\"time\":2,\"name\":\"simulation:marker\"}\n"
            .as_bytes(),
        "t",
        &mut a,
    )
    .unwrap();
    assert_eq!(a.connections[0].markers[0].data, Value::Null);
}
