//! Export to a file qvis opens: qlog 0.3, one JSON document.
//!
//! qvis reads qlog up to 0.3 (which it treats as draft-02): a top-level
//! object with `qlog_version: "0.3"` and `qlog_format: "JSON"`, traces
//! with a `vantage_point` and `common_fields.time_format`, and events
//! `{time, name: "category:type", data}` with the draft-02 category names.
//! The export renames quiche's `quic:`/`http3:` events to those
//! (`transport:packet_sent`, `recovery:metrics_updated`,
//! `recovery:packet_lost`, `http:frame_parsed`, ...), rewrites metrics in
//! the units qvis draws (RTTs in ms, pacing in bit/s, no `u64::MAX`
//! ssthresh sentinel), and moves draft-01 fields to where draft-02 has them
//! (`header.packet_size` → `raw.length`, `packet_type` → `header`).
//! Generic events, among them the harness's `simulation:scenario` (the
//! run's conditions) and `simulation:marker` (changes of conditions), pass
//! through unchanged: same name, same data, so qvis's sequence and raw
//! views show them. Times are relative milliseconds. Writing streams,
//! through a `.part` file that is renamed when complete.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

use serde_json::{Map, Value};

use crate::event::{Kind, SENTINEL};
use crate::reader::{read_file, Event, ReadError, ReadStats, Sink, TraceInfo};

/// The name qvis reads for an event name of any flavour.
pub fn qvis_name(name: &str) -> String {
    let (cat, ty) = name.split_once(':').unwrap_or(("transport", name));
    let (cat, ty) = match (cat, ty) {
        ("quic", "recovery_metrics_updated") | (_, "metric_update") => {
            ("recovery", "metrics_updated")
        }
        (
            "quic",
            "packet_lost"
            | "congestion_state_updated"
            | "loss_timer_updated"
            | "recovery_parameters_set",
        ) => (
            "recovery",
            if ty == "recovery_parameters_set" {
                "parameters_set"
            } else {
                ty
            },
        ),
        ("quic", "stream_data_moved") => ("transport", "data_moved"),
        (
            "quic",
            "connection_started"
            | "connection_closed"
            | "connection_state_updated"
            | "connection_id_updated"
            | "spin_bit_updated",
        ) => ("connectivity", ty),
        ("quic", "key_updated" | "key_discarded") => ("security", ty),
        ("quic", _) => ("transport", ty),
        ("http3" | "h3", _) => ("http", ty),
        (c, t) => (c, t),
    };
    format!("{cat}:{ty}")
}

/// Writes qvis-ready qlog as events arrive.
pub struct QvisWriter<W: Write> {
    out: W,
    traces: usize,
    first_event: bool,
    error: Option<io::Error>,
    /// Events written.
    pub events: u64,
}

impl<W: Write> QvisWriter<W> {
    /// Starts the document.
    pub fn new(mut out: W, title: &str) -> io::Result<Self> {
        write!(
            out,
            "{{\"qlog_version\":\"0.3\",\"qlog_format\":\"JSON\",\"title\":{},\"description\":\"converted by qlog-analysis for qvis\",\"traces\":[",
            serde_json::to_string(title)?
        )?;
        Ok(QvisWriter {
            out,
            traces: 0,
            first_event: true,
            error: None,
            events: 0,
        })
    }

    fn w(&mut self, f: impl FnOnce(&mut W) -> io::Result<()>) {
        if self.error.is_none() {
            if let Err(e) = f(&mut self.out) {
                self.error = Some(e);
            }
        }
    }

    /// Ends the document; the first write error, if any, comes out here.
    pub fn finish(mut self) -> io::Result<W> {
        self.w(|o| o.write_all(b"]}\n"));
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Rewrites one event's data for qvis. `None` keeps it as is.
fn fix_data(
    kind: Kind,
    data: &serde_json::value::RawValue,
    rtt_scale: f64,
    pacing_scale: f64,
) -> Option<Value> {
    match kind {
        Kind::Metrics => {
            let mut m: Map<String, Value> = serde_json::from_str(data.get()).ok()?;
            for k in ["min_rtt", "smoothed_rtt", "latest_rtt", "rtt_variance"] {
                if let Some(v) = m.get(k).and_then(num) {
                    m.insert(k.into(), (v * rtt_scale).into());
                }
            }
            if let Some(v) = m.get("pacing_rate").and_then(num) {
                m.insert("pacing_rate".into(), (v * pacing_scale).round().into());
            }
            for k in ["ssthresh", "congestion_window", "cwnd", "bytes_in_flight"] {
                match m.get(k).and_then(num) {
                    Some(v) if v >= SENTINEL => {
                        m.remove(k);
                    }
                    Some(v) => {
                        m.insert(k.into(), (v as u64).into());
                    }
                    None => {}
                }
            }
            if let Some(c) = m.remove("cwnd") {
                m.entry("congestion_window").or_insert(c);
            }
            // Counters as objects are not metrics qvis knows; keep totals.
            for k in ["cf_lost_packets", "cf_lost_bytes"] {
                if let Some(t) = m.get(k).and_then(|v| v.get("total")).cloned() {
                    m.insert(k.into(), t);
                }
            }
            Some(Value::Object(m))
        }
        Kind::PacketSent | Kind::PacketReceived | Kind::PacketLost => {
            let text = data.get();
            if !(text.contains("packet_size") || text.contains("\"packet_type\"")) {
                return None;
            }
            let mut m: Map<String, Value> = serde_json::from_str(text).ok()?;
            let header = m
                .entry("header")
                .or_insert_with(|| Value::Object(Map::new()));
            if !header.is_object() {
                return None;
            }
            let mut moved_size = None;
            if let Some(h) = header.as_object_mut() {
                moved_size = h.remove("packet_size");
                if let Some(pl) = h.remove("payload_length") {
                    let _ = pl;
                }
            }
            if let Some(pt) = m.remove("packet_type") {
                if let Some(h) = m.get_mut("header").and_then(|h| h.as_object_mut()) {
                    h.entry("packet_type").or_insert(pt);
                }
            }
            if let Some(sz) = moved_size {
                let raw = m.entry("raw").or_insert_with(|| Value::Object(Map::new()));
                if let Some(r) = raw.as_object_mut() {
                    r.entry("length").or_insert(sz);
                }
            }
            Some(Value::Object(m))
        }
        // Generic events (simulation:scenario, simulation:marker, ...):
        // the data as written.
        Kind::Scenario | Kind::Marker => None,
        _ => None,
    }
}

fn num(v: &Value) -> Option<f64> {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
}

struct Exporter<W: Write> {
    w: QvisWriter<W>,
    rtt_scale: f64,
    pacing_scale: f64,
    open: bool,
}

impl<W: Write> Sink for Exporter<W> {
    fn trace_start(&mut self, info: &TraceInfo) {
        self.rtt_scale = info.rtt_to_ms;
        self.pacing_scale = info.pacing_to_bps;
        let sep = if self.w.traces > 0 { "," } else { "" };
        self.w.traces += 1;
        self.w.first_event = true;
        self.open = true;
        let title = serde_json::to_string(&info.title).unwrap_or_else(|_| "\"\"".into());
        self.w.w(|o| {
            write!(
                o,
                "{sep}{{\"title\":{title},\"common_fields\":{{\"time_format\":\"relative\",\"reference_time\":0}},\"events\":["
            )
        });
    }

    fn event(&mut self, ev: &Event) {
        if !self.open {
            self.trace_start(&TraceInfo::default());
        }
        let name = qvis_name(ev.name);
        let data: String = match ev.data {
            Some(d) => match fix_data(ev.kind, d, self.rtt_scale, self.pacing_scale) {
                Some(v) => v.to_string(),
                None => d.get().to_string(),
            },
            None => "{}".into(),
        };
        let sep = if self.w.first_event { "" } else { "," };
        self.w.first_event = false;
        let t = ev.time_s * 1000.0;
        let name_json = serde_json::to_string(&name).unwrap_or_default();
        self.w.w(|o| {
            write!(
                o,
                "{sep}{{\"time\":{t},\"name\":{name_json},\"data\":{data}}}"
            )
        });
        self.w.events += 1;
    }

    fn trace_end(&mut self, info: &TraceInfo) {
        if !self.open {
            return;
        }
        self.open = false;
        let vp = match info.vantage_point.as_str() {
            "client" | "server" | "network" => info.vantage_point.as_str(),
            _ => "unknown",
        };
        self.w
            .w(|o| write!(o, "],\"vantage_point\":{{\"type\":\"{vp}\"}}}}"));
    }
}

/// What an export did.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Exported {
    /// Reading the input.
    pub read: ReadStats,
    /// Traces written.
    pub traces: usize,
    /// Events written.
    pub events: u64,
}

/// Errors of an export.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Reading failed.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// Writing failed.
    #[error("{path}: {source}")]
    Write {
        /// The output.
        path: String,
        /// The cause.
        source: io::Error,
    },
}

/// Converts `input` (any flavour) to a qvis-ready file at `output`.
pub fn export(input: &Path, output: &Path) -> Result<Exported, ExportError> {
    let werr = |source| ExportError::Write {
        path: output.display().to_string(),
        source,
    };
    let part = output.with_extension("qlog.part");
    let f = BufWriter::with_capacity(1 << 20, File::create(&part).map_err(werr)?);
    let title = input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut ex = Exporter {
        w: QvisWriter::new(f, &title).map_err(werr)?,
        rtt_scale: 1.0,
        pacing_scale: 1.0,
        open: false,
    };
    let read = match read_file(input, &mut ex) {
        Ok(r) => r,
        Err(e) => {
            let _ = std::fs::remove_file(&part);
            return Err(e.into());
        }
    };
    let traces = ex.w.traces;
    let events = ex.w.events;
    let mut out = ex.w.finish().map_err(werr)?;
    out.flush().map_err(werr)?;
    out.get_ref().sync_all().map_err(werr)?;
    drop(out);
    std::fs::rename(&part, output).map_err(werr)?;
    Ok(Exported {
        read,
        traces,
        events,
    })
}
