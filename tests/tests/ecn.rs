//! ECN end to end between quic-server and quic-client: the server's
//! controller asks for ECT(0) (DCTCP), the userspace emulator between
//! them marks at a step threshold, the client counts the codepoints and
//! reports them in its ACK frames, the server validates them; and against
//! a client that ignores ECN (as a peer without ECN support) the server's
//! validation fails and the transfer still completes.

mod common;

use std::path::Path;

use common::*;
use serde_json::Value;

/// Every record of the one qlog of `role` (client or server) in `dir`.
fn qlog_of(dir: &Path, role: &str) -> Vec<Value> {
    let path = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("{role}-"))
        })
        .unwrap_or_else(|| panic!("no {role} qlog in {}", dir.display()));
    read_qlog(&path)
}

/// The ACK frames of the packets an end sent.
fn acks_sent(records: &[Value]) -> Vec<Value> {
    records
        .iter()
        .filter(|r| r["name"] == "quic:packet_sent")
        .flat_map(|r| r["data"]["frames"].as_array().cloned().unwrap_or_default())
        .filter(|f| f["frame_type"] == "ack")
        .collect()
}

/// The ECN validation states the server's qlog went through.
fn ecn_states(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r["name"] == "quic:ecn_state_updated")
        .map(|r| r["data"]["new"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// A 3 MB download from a DCTCP server through an emulated 20 Mbit/s,
/// 20 ms link that marks ECN-capable packets above 10 queued; the
/// client's and server's qlogs and the link's marks.
async fn through_a_marking_link(name: &str, ignore_ecn: bool) -> (Vec<Value>, Vec<Value>, u64) {
    let qlog = scratch_dir(name);
    let server = start_server("dctcp", Some(&qlog)).await;
    let emu = emulator_in_front_of(
        server.addr,
        &[
            ("rate", "20mbit"),
            ("rtt", "20ms"),
            ("queue", "200pkt"),
            ("aqm", "step:threshold=10pkt"),
        ],
    );
    let mut cfg = client_config(&format!("https://{}/bytes/3000000", emu.listen_addrs()[0]));
    cfg.qlog_dir = Some(qlog.clone());
    cfg.ignore_ecn = ignore_ecn;
    let report = quic_client::run(cfg).await.expect("client runs");
    server.stop().await;
    let link = emu.stop().unwrap();
    assert!(report.complete, "{report:?}");
    assert_eq!(report.bytes, 3_000_000);
    let marks = link.down.marked.iter().sum::<u64>();
    (qlog_of(&qlog, "client"), qlog_of(&qlog, "server"), marks)
}

/// The last value of the controller metric `name` in an end's qlog.
fn last_metric(records: &[Value], name: &str) -> Option<f64> {
    records
        .iter()
        .filter(|r| r["name"] == "quic:recovery_metrics_updated")
        .rev()
        .find_map(|r| r["data"][name].as_f64())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn marks_reach_the_sender_through_the_emulator() {
    // Every mark the link makes is on a packet that arrives (the step
    // marks and never drops, and the 200-packet queue never fills), so the
    // client counts each one, and its last ACK reports them all. The
    // server's DCTCP hears of them through those ACKs: every mark the
    // client reported, except those in ACKs still in flight when the
    // server stopped reading them: at most the ACKs of one round trip,
    // which cannot report more marks than the packets of one window, and
    // DCTCP keeps its window near the BDP plus K (20 Mbit/s and 20 ms:
    // 37 packets, K = 10); 100 is well above that and far below the
    // run's marks.
    let (client, server, marks) = through_a_marking_link("ecn-marks", false).await;
    assert!(marks > 0, "the link marked nothing");
    let acks = acks_sent(&client);
    let last = acks
        .iter()
        .rev()
        .find(|a| a.get("ect0").is_some())
        .expect("the client's ACK frames carry ECN counts");
    assert!(last["ect0"].as_u64().unwrap() > 1000, "{last}");
    assert_eq!(last["ect1"], 0, "{last}");
    let ce = acks.iter().filter_map(|a| a["ce"].as_u64()).max().unwrap();
    // The client counts a mark when the packet arrives, and reports it in
    // its next ACK; a marked packet that arrives after the client's last
    // ACK (the server's last probe or ACK-only packet before it hears the
    // client close) is counted by the link but never reported. The server
    // has nothing left to send by then but a few such packets.
    assert!(
        ce <= marks && marks - ce <= 5,
        "the client reported {ce} CE marks, the link made {marks}"
    );
    let heard = last_metric(&server, "dctcp_ce").expect("the server's DCTCP reports dctcp_ce");
    eprintln!("link marks {marks}, client CE {ce}, server's DCTCP {heard}");
    assert!(
        heard <= ce as f64 && heard + 100.0 >= ce as f64,
        "the server's DCTCP heard of {heard} marks, the client reported {ce}"
    );
    let cuts = last_metric(&server, "dctcp_ce_reductions").unwrap();
    assert!(cuts > 0.0, "DCTCP never answered a mark");
    let states = ecn_states(&server);
    assert!(states.iter().any(|s| s == "capable"), "{states:?}");
    assert!(!states.iter().any(|s| s == "failed"), "{states:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_without_ecn_turns_it_off_and_the_transfer_completes() {
    let (client, server, _) = through_a_marking_link("ecn-ignored", true).await;
    assert!(
        acks_sent(&client).iter().all(|a| a.get("ect0").is_none()),
        "a client that ignores ECN reports no counts"
    );
    let states = ecn_states(&server);
    assert_eq!(
        states.last().map(String::as_str),
        Some("failed"),
        "{states:?}"
    );
}
