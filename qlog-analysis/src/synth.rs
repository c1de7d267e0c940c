//! Synthetic quiche-0.30-style traces (JSON-SEQ, `quic:` names, partial
//! metrics updates, `packet_lost`), with the ground truth they encode: for
//! tests, and to build the large file the benchmark reads.
//!
//! The sender sends 1-RTT packets of 1200 bytes carrying 1150 stream
//! bytes every 100 µs; every 10th packet the peer's ACK arrives; every
//! `loss_every`-th packet is declared lost (and retransmitted, as new
//! packet numbers re-sending the same stream range); every ACK updates the
//! metrics with only the fields that changed (cwnd, bytes in flight, RTTs).

use std::io::{self, Write};

/// What a synthetic trace contains.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Truth {
    /// packet_sent events.
    pub sent: u64,
    /// packet_received events (the ACKs).
    pub received: u64,
    /// packet_lost events.
    pub lost: u64,
    /// metrics updates.
    pub metrics: u64,
    /// metrics updates carrying cwnd.
    pub cwnd_points: u64,
    /// latest_rtt samples, ms.
    pub rtt_samples: Vec<f64>,
    /// New stream bytes acknowledged.
    pub app_acked: u64,
    /// Stream bytes sent again.
    pub retransmitted: u64,
    /// Last event time, ms.
    pub end_ms: f64,
    /// Bytes written.
    pub bytes: u64,
}

/// Writes a trace of `packets` sent packets. Every `loss_every`-th packet
/// is lost (0: none).
pub fn write_quiche_trace(
    out: &mut impl Write,
    packets: u64,
    loss_every: u64,
) -> io::Result<Truth> {
    let mut t = Truth::default();
    let mut w = Counter { inner: out, n: 0 };
    let rs = 0x1e as char;
    writeln!(
        w,
        "{rs}{{\"file_schema\":\"urn:ietf:params:qlog:file:sequential\",\"serialization_format\":\"JSON-SEQ\",\"title\":\"synthetic\",\"trace\":{{\"vantage_point\":{{\"type\":\"server\"}},\"common_fields\":{{\"reference_time\":{{\"clock_type\":\"monotonic\",\"epoch\":\"unknown\"}}}}}}}}"
    )?;
    writeln!(
        w,
        "{rs}{{\"time\":0.0,\"name\":\"quic:recovery_metrics_updated\",\"data\":{{\"min_rtt\":333.0,\"smoothed_rtt\":333.0,\"rtt_variance\":166.5,\"congestion_window\":13500,\"ssthresh\":18446744073709551615}}}}"
    )?;
    t.metrics += 1;
    t.cwnd_points += 1;
    let mut offset = 0u64;
    let mut lost_ranges: Vec<(u64, u64)> = Vec::new();
    let mut unacked: Vec<(u64, u64, bool)> = Vec::new(); // (pn, new bytes, lost)
    let mut cwnd = 13500u64;
    for pn in 0..packets {
        let time = pn as f64 * 0.1;
        // Retransmit a lost range first, if any.
        let (off, len, new) = match lost_ranges.pop() {
            Some((o, l)) => (o, l, false),
            None => {
                let o = offset;
                offset += 1150;
                (o, 1150, true)
            }
        };
        if !new {
            t.retransmitted += len;
        }
        writeln!(
            w,
            "{rs}{{\"time\":{time:.3},\"name\":\"quic:packet_sent\",\"data\":{{\"header\":{{\"packet_type\":\"1RTT\",\"packet_number\":{pn},\"dcid\":\"00112233\"}},\"raw\":{{\"length\":1200,\"payload_length\":1170}},\"send_at_time\":{time:.3},\"frames\":[{{\"frame_type\":\"stream\",\"stream_id\":0,\"offset\":{off},\"length\":{len},\"fin\":false}}]}}}}"
        )?;
        t.sent += 1;
        let lost = loss_every > 0 && pn % loss_every == loss_every - 1;
        unacked.push((pn, if new { len } else { 0 }, lost));
        if lost {
            lost_ranges.push((off, len));
        }
        if pn % 10 == 9 {
            // The peer acknowledges everything not lost so far.
            let ack_time = time + 0.05;
            let mut ranges: Vec<(u64, u64)> = Vec::new();
            for &(p, _, l) in &unacked {
                if l {
                    continue;
                }
                match ranges.last_mut() {
                    Some(r) if r.1 + 1 == p => r.1 = p,
                    _ => ranges.push((p, p)),
                }
            }
            let ranges_json: Vec<String> = ranges
                .iter()
                .rev()
                .map(|(a, b)| format!("[{a},{b}]"))
                .collect();
            writeln!(
                w,
                "{rs}{{\"time\":{ack_time:.3},\"name\":\"quic:packet_received\",\"data\":{{\"header\":{{\"packet_type\":\"1RTT\",\"packet_number\":{}}},\"raw\":{{\"length\":50}},\"frames\":[{{\"frame_type\":\"ack\",\"ack_delay\":0.01,\"acked_ranges\":[{}]}}]}}}}",
                pn / 10,
                ranges_json.join(",")
            )?;
            t.received += 1;
            for &(p, app, l) in &unacked {
                if l {
                    writeln!(
                        w,
                        "{rs}{{\"time\":{ack_time:.3},\"name\":\"quic:packet_lost\",\"data\":{{\"header\":{{\"packet_type\":\"1RTT\",\"packet_number\":{p}}},\"trigger\":\"reordering_threshold\"}}}}"
                    )?;
                    t.lost += 1;
                } else {
                    t.app_acked += app;
                }
            }
            unacked.clear();
            let rtt = 20.0 + (pn % 70) as f64 / 10.0;
            t.rtt_samples.push(rtt);
            if pn % 30 == 29 {
                cwnd = if pn % 300 == 299 {
                    (cwnd / 2).max(2400)
                } else {
                    cwnd + 1200
                };
                writeln!(
                    w,
                    "{rs}{{\"time\":{ack_time:.3},\"name\":\"quic:recovery_metrics_updated\",\"data\":{{\"latest_rtt\":{rtt},\"smoothed_rtt\":{rtt},\"congestion_window\":{cwnd},\"bytes_in_flight\":0}}}}"
                )?;
                t.cwnd_points += 1;
            } else {
                writeln!(
                    w,
                    "{rs}{{\"time\":{ack_time:.3},\"name\":\"quic:recovery_metrics_updated\",\"data\":{{\"latest_rtt\":{rtt},\"bytes_in_flight\":0}}}}"
                )?;
            }
            t.metrics += 1;
            t.end_ms = ack_time;
        } else {
            t.end_ms = time;
        }
    }
    t.end_ms = (t.end_ms * 1000.0).round() / 1000.0;
    t.bytes = w.n;
    Ok(t)
}

struct Counter<'a, W: Write> {
    inner: &'a mut W,
    n: u64,
}

impl<W: Write> Write for Counter<'_, W> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(b)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
