//! Series output: one CSV row per point, long format
//! (`trace,series,t_s,value,label`), which every plotting tool pivots.
//!
//! Series: `cwnd`, `bytes_in_flight`, `ssthresh` (bytes), `pacing_rate_bps`,
//! `latest_rtt_ms`, `smoothed_rtt_ms`, `min_rtt_ms`, `rtt_variance_ms`,
//! `loss` (packets, with the packet number as label when known),
//! `state` (value 0, the state as label), per-bin `goodput_bps`, and
//! cumulative `bytes_sent`, `bytes_received`, `app_bytes_received`,
//! `app_bytes_acked` at each bin's end; then any extra metric by its name.

use std::io::{self, Write};

use crate::analysis::Connection;

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes the header line.
pub fn write_csv_header(out: &mut impl Write) -> io::Result<()> {
    writeln!(out, "trace,series,t_s,value,label")
}

/// Writes every point of one connection.
pub fn write_csv(out: &mut impl Write, trace: usize, c: &Connection) -> io::Result<()> {
    let s = &c.series;
    let named: [(&str, &Vec<(f64, f64)>); 8] = [
        ("cwnd", &s.cwnd),
        ("bytes_in_flight", &s.bytes_in_flight),
        ("ssthresh", &s.ssthresh),
        ("pacing_rate_bps", &s.pacing_rate_bps),
        ("latest_rtt_ms", &s.latest_rtt_ms),
        ("smoothed_rtt_ms", &s.smoothed_rtt_ms),
        ("min_rtt_ms", &s.min_rtt_ms),
        ("rtt_variance_ms", &s.rtt_variance_ms),
    ];
    for (name, pts) in named {
        for (t, v) in pts {
            writeln!(out, "{trace},{name},{t},{v},")?;
        }
    }
    for l in &s.losses {
        let label = l.packet_number.map(|p| p.to_string()).unwrap_or_default();
        writeln!(out, "{trace},loss,{},{},{label}", l.t, l.packets)?;
    }
    for (t, st) in &s.states {
        writeln!(out, "{trace},state,{t},0,{}", csv_field(st))?;
    }
    let use_recv = c.app.received >= c.app.acked;
    let mut cum = [0u64; 4];
    for (i, b) in c.bins.iter().enumerate() {
        let t0 = i as f64 * c.bin_s;
        let good = if use_recv {
            b.app_received
        } else {
            b.app_acked
        };
        writeln!(
            out,
            "{trace},goodput_bps,{t0},{},",
            good as f64 * 8.0 / c.bin_s
        )?;
        cum[0] += b.sent;
        cum[1] += b.received;
        cum[2] += b.app_received;
        cum[3] += b.app_acked;
        let t1 = t0 + c.bin_s;
        for (name, v) in [
            ("bytes_sent", cum[0]),
            ("bytes_received", cum[1]),
            ("app_bytes_received", cum[2]),
            ("app_bytes_acked", cum[3]),
        ] {
            writeln!(out, "{trace},{name},{t1},{v},")?;
        }
    }
    for (name, pts) in &s.extra {
        let n = csv_field(name);
        for (t, v) in pts {
            writeln!(out, "{trace},{n},{t},{v},")?;
        }
    }
    Ok(())
}
