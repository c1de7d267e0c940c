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
//!
//! Three more things qvis reads:
//! - `common_fields.reference_time`: the trace's wall-clock start in ms
//!   since the Unix epoch, from the input's own reference time (a number,
//!   a string, an RFC 3339 time, or the `{clock_type, epoch,
//!   wall_clock_time}` object of recent drafts, which quiche writes), or
//!   from the first event of a trace with absolute times. qvis aligns a
//!   client's and a server's trace by it. Left out when the input has none.
//! - `owner` (`local`/`remote`) in `transport:parameters_set`, where recent
//!   drafts (and quiche) say `initiator`: qvis draws the peer's starting
//!   flow-control limits from the `remote` one.
//! - RTTs before the first RTT sample: until a `latest_rtt` appears,
//!   implementations log their initial estimate (quiche: 333 ms), which is
//!   no measurement. As the summaries do ([`crate::analysis`]), RTT fields
//!   before a trace's first sample are left out, when it has one.

use std::fs::File;
use std::io::{self, BufRead, BufWriter, Write};
use std::path::Path;

use serde_json::{Map, Value};

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::event::{Kind, SENTINEL};
use crate::reader::{read_file, Event, Parsed, ReadError, ReadStats, Sink, TraceInfo};

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

/// RTT fields of a metrics update: left out before a trace's first sample.
const RTT_FIELDS: [&str; 4] = ["min_rtt", "smoothed_rtt", "latest_rtt", "rtt_variance"];

/// Most events (and bytes) held back waiting for a trace's first RTT
/// sample; past either, they are written as they are. quiche's first
/// sample comes within a few dozen events.
const MAX_HELD: (usize, usize) = (10_000, 16 << 20);

/// An event written later: (time in ms, name as JSON, data).
type Held = (f64, String, HeldData);

/// A held event's data: metrics stay an object, so that RTT fields can
/// still be taken out; anything else is final JSON text.
enum HeldData {
    Metrics(Map<String, Value>),
    Text(String),
}

struct Exporter<W: Write> {
    w: QvisWriter<W>,
    rtt_scale: f64,
    pacing_scale: f64,
    open: bool,
    /// Each trace's reference time as the input wrote it, in trace order.
    refs: Vec<Option<RefTime>>,
    /// The current trace's reference time, ms since the Unix epoch.
    reference_ms: Option<f64>,
    /// The current trace has had an event.
    first_seen: bool,
    /// Events of the current trace not written yet, while it has had no
    /// RTT sample; `None` once it has (or too many were held).
    held: Option<Vec<Held>>,
    held_bytes: usize,
}

impl<W: Write> Exporter<W> {
    fn new(w: QvisWriter<W>, refs: Vec<Option<RefTime>>) -> Self {
        Exporter {
            w,
            rtt_scale: 1.0,
            pacing_scale: 1.0,
            open: false,
            refs,
            reference_ms: None,
            first_seen: false,
            held: None,
            held_bytes: 0,
        }
    }

    fn write_event(&mut self, t: f64, name_json: &str, data: &str) {
        let sep = if self.w.first_event { "" } else { "," };
        self.w.first_event = false;
        self.w.w(|o| {
            write!(
                o,
                "{sep}{{\"time\":{t},\"name\":{name_json},\"data\":{data}}}"
            )
        });
        self.w.events += 1;
    }

    /// Writes the held events; without the RTT fields of their metrics
    /// updates if `strip` (a sample came after them).
    fn release(&mut self, strip: bool) {
        for (t, name, data) in self.held.take().unwrap_or_default() {
            let data = match data {
                HeldData::Metrics(mut m) => {
                    if strip {
                        for k in RTT_FIELDS {
                            m.remove(k);
                        }
                    }
                    Value::Object(m).to_string()
                }
                HeldData::Text(text) => text,
            };
            self.write_event(t, &name, &data);
        }
        self.held_bytes = 0;
    }
}

impl<W: Write> Sink for Exporter<W> {
    fn trace_start(&mut self, info: &TraceInfo) {
        self.rtt_scale = info.rtt_to_ms;
        self.pacing_scale = info.pacing_to_bps;
        // A number in the file's unit (ms, or µs in some drafts); the
        // export's unit is ms.
        self.reference_ms = match self.refs.get(self.w.traces).copied().flatten() {
            Some(RefTime::Units(v)) => Some(v * info.rtt_to_ms),
            Some(RefTime::EpochMs(v)) => Some(v),
            None => None,
        };
        self.first_seen = false;
        self.held = Some(Vec::new());
        self.held_bytes = 0;
        let sep = if self.w.traces > 0 { "," } else { "" };
        self.w.traces += 1;
        self.w.first_event = true;
        self.open = true;
        let title = serde_json::to_string(&info.title).unwrap_or_else(|_| "\"\"".into());
        // common_fields come after the events, once the first event has
        // shown whether times are absolute.
        self.w
            .w(|o| write!(o, "{sep}{{\"title\":{title},\"events\":["));
    }

    fn event(&mut self, ev: &Event) {
        if !self.open {
            self.trace_start(&TraceInfo::default());
        }
        if !self.first_seen {
            self.first_seen = true;
            // Absolute times (an epoch in ms) become relative to the first
            // event, which is then the trace's reference time.
            let first_ms = ev.time_ms_raw - ev.time_s * 1000.0;
            if first_ms > 1e11 {
                self.reference_ms = Some(first_ms);
            }
        }
        let name = qvis_name(ev.name);
        let name_json = serde_json::to_string(&name).unwrap_or_default();
        let fixed = match ev.data {
            Some(d) if name == "transport:parameters_set" => fix_parameters(d),
            Some(d) => fix_data(ev.kind, d, self.rtt_scale, self.pacing_scale),
            None => None,
        };
        let t = ev.time_s * 1000.0;
        let sample = matches!(&ev.parsed, Parsed::Metrics(m) if m.latest_rtt_ms.is_some());
        if sample {
            self.release(true);
        }
        if let Some(held) = self.held.as_mut() {
            let data = match fixed {
                Some(Value::Object(m)) if ev.kind == Kind::Metrics => HeldData::Metrics(m),
                Some(v) => HeldData::Text(v.to_string()),
                None => {
                    HeldData::Text(ev.data.map_or_else(|| "{}".into(), |d| d.get().to_string()))
                }
            };
            self.held_bytes += match &data {
                HeldData::Metrics(m) => 64 * m.len(),
                HeldData::Text(text) => text.len(),
            };
            held.push((t, name_json, data));
            if held.len() > MAX_HELD.0 || self.held_bytes > MAX_HELD.1 {
                self.release(false);
            }
            return;
        }
        let data: String = match (fixed, ev.data) {
            (Some(v), _) => v.to_string(),
            (None, Some(d)) => d.get().to_string(),
            (None, None) => "{}".into(),
        };
        self.write_event(t, &name_json, &data);
    }

    fn trace_end(&mut self, info: &TraceInfo) {
        if !self.open {
            return;
        }
        // No RTT sample in the whole trace: its estimates are all it has
        // (the summaries fall back to them too).
        self.release(false);
        self.open = false;
        let vp = match info.vantage_point.as_str() {
            "client" | "server" | "network" => info.vantage_point.as_str(),
            _ => "unknown",
        };
        let reference = match self.reference_ms {
            Some(ms) => format!(",\"reference_time\":{}", json_ms(ms)),
            None => String::new(),
        };
        self.w.w(|o| {
            write!(
                o,
                "],\"common_fields\":{{\"time_format\":\"relative\"{reference}}},\"vantage_point\":{{\"type\":\"{vp}\"}}}}"
            )
        });
    }
}

/// `initiator` (recent drafts, quiche) becomes `owner`, the draft-02 name
/// qvis reads. `None` keeps the data as is.
fn fix_parameters(data: &serde_json::value::RawValue) -> Option<Value> {
    if !data.get().contains("\"initiator\"") {
        return None;
    }
    let mut m: Map<String, Value> = serde_json::from_str(data.get()).ok()?;
    let who = m.remove("initiator")?;
    m.entry("owner").or_insert(who);
    Some(Value::Object(m))
}

/// A time in ms as JSON: an integer when it is one.
fn json_ms(ms: f64) -> String {
    if ms.fract() == 0.0 && ms.abs() < 9e15 {
        (ms as i64).to_string()
    } else {
        Value::from(ms).to_string()
    }
}

/// A trace's reference time as its input wrote it.
#[derive(Clone, Copy, Debug, PartialEq)]
enum RefTime {
    /// A number in the file's time unit since the Unix epoch.
    Units(f64),
    /// Milliseconds since the Unix epoch (from an RFC 3339 time).
    EpochMs(f64),
}

/// Reads `common_fields.reference_time` in any of its forms.
fn ref_time(v: &Value) -> Option<RefTime> {
    let finite = |x: f64| x.is_finite().then_some(x);
    match v {
        Value::Number(n) => n.as_f64().and_then(finite).map(RefTime::Units),
        Value::String(s) => match s.trim().parse::<f64>() {
            Ok(x) => finite(x).map(RefTime::Units),
            Err(_) => rfc3339_ms(s).map(RefTime::EpochMs),
        },
        // Drafts -10 and later: {clock_type, epoch, wall_clock_time}. A
        // monotonic clock's epoch is "unknown"; the wall-clock time says
        // when its zero was.
        Value::Object(o) => o
            .get("wall_clock_time")
            .or_else(|| o.get("epoch"))
            .and_then(Value::as_str)
            .and_then(rfc3339_ms)
            .map(RefTime::EpochMs),
        _ => None,
    }
}

/// Milliseconds since the Unix epoch of an RFC 3339 date-time
/// (`2024-05-06T07:08:09.123Z`, `...+02:00`).
fn rfc3339_ms(s: &str) -> Option<f64> {
    let b = s.trim().as_bytes();
    let digits = |from: usize, to: usize| -> Option<i64> {
        let d = b.get(from..to)?;
        if !d.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(d).ok()?.parse().ok()
    };
    let punct = [(4, b'-'), (7, b'-'), (13, b':'), (16, b':')];
    if punct.iter().any(|&(i, c)| b.get(i) != Some(&c))
        || !matches!(b.get(10), Some(b'T' | b't' | b' '))
    {
        return None;
    }
    let (year, month, day) = (digits(0, 4)?, digits(5, 7)?, digits(8, 10)?);
    let (hour, minute, second) = (digits(11, 13)?, digits(14, 16)?, digits(17, 19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut i = 19;
    let mut fraction = 0.0;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        fraction = std::str::from_utf8(&b[start - 1..i])
            .ok()?
            .parse::<f64>()
            .ok()?;
    }
    let offset_min = match &b[i..] {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), _, _, b':', _, _] => {
            let m = digits(i + 1, i + 3)? * 60 + digits(i + 4, i + 6)?;
            if *sign == b'-' {
                -m
            } else {
                m
            }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    let secs = days * 86_400 + hour * 3600 + minute * 60 + second - offset_min * 60;
    Some((secs as f64 + fraction) * 1000.0)
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar: the
/// year is counted from March, so the leap day ends it, in 400-year eras
/// of 146 097 days.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let year_of_era = y - era * 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The reference time of each trace of the file at `path`, in the order the
/// reader delivers traces: a first, light pass that reads the headers (or,
/// in one JSON document, each trace's `common_fields`) and skips events
/// unparsed. Whatever cannot be read is `None`, or missing.
fn reference_times(path: &Path) -> Vec<Option<RefTime>> {
    let Ok(mut input) = crate::input::open(path) else {
        return Vec::new();
    };
    let first = loop {
        let Ok(buf) = input.fill_buf() else {
            return Vec::new();
        };
        if buf.is_empty() {
            return Vec::new();
        }
        match buf.iter().position(|b| !b.is_ascii_whitespace()) {
            Some(i) => {
                let b = buf[i];
                input.consume(i);
                break b;
            }
            None => {
                let n = buf.len();
                input.consume(n);
            }
        }
    };
    match first {
        0x1e => record_refs(input, 0x1e),
        b'{' if first_line_is_header(&mut input) => record_refs(input, b'\n'),
        b'{' => {
            let mut out = Vec::new();
            let mut de = serde_json::Deserializer::from_reader(input);
            // An error ends the pass; what came before it stands.
            let _ = DocRefs(&mut out).deserialize(&mut de);
            out
        }
        _ => Vec::new(),
    }
}

/// The first line is a whole JSON object announcing one record per line
/// (the reader's own test for NDJSON and separator-less JSON-SEQ).
fn first_line_is_header(input: &mut impl BufRead) -> bool {
    let Ok(buf) = input.fill_buf() else {
        return false;
    };
    let Some(end) = memchr::memchr(b'\n', buf) else {
        return false;
    };
    let Ok(v) = serde_json::from_slice::<Value>(&buf[..end]) else {
        return false;
    };
    v.get("qlog_format")
        .and_then(Value::as_str)
        .is_some_and(|f| f != "JSON")
        || v.get("file_schema").is_some()
        || (v.get("trace").is_some() && v.get("traces").is_none())
}

/// The header fields of a JSON-SEQ or NDJSON record; anything else is
/// skipped unparsed.
#[derive(serde::Deserialize)]
struct SeqHead {
    qlog_version: Option<IgnoredAny>,
    file_schema: Option<IgnoredAny>,
    qlog_format: Option<IgnoredAny>,
    trace: Option<TraceHead>,
}

#[derive(serde::Deserialize)]
struct TraceHead {
    common_fields: Option<CommonHead>,
}

#[derive(serde::Deserialize)]
struct CommonHead {
    reference_time: Option<Value>,
}

/// Records separated by `sep`: a header announces a trace, which the
/// reader starts at its first event; a stream without a header is one
/// trace without a reference time.
fn record_refs(mut input: impl BufRead, sep: u8) -> Vec<Option<RefTime>> {
    let mut out = Vec::new();
    let mut buf = Vec::with_capacity(1 << 16);
    // The reference time of a header whose trace has no event yet.
    let mut pending: Option<Option<RefTime>> = None;
    let mut saw_header = false;
    let keys: [&[u8]; 3] = [b"\"qlog_version\"", b"\"file_schema\"", b"\"qlog_format\""];
    loop {
        buf.clear();
        match input.read_until(sep, &mut buf) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let body = buf.trim_ascii();
        let body = body.strip_suffix(&[sep]).unwrap_or(body).trim_ascii();
        if body.is_empty() {
            continue;
        }
        // Only records that name a header field are parsed.
        if keys.iter().any(|k| memchr::memmem::find(body, k).is_some()) {
            if let Ok(h) = serde_json::from_slice::<SeqHead>(body) {
                if h.qlog_version.is_some() || h.file_schema.is_some() || h.qlog_format.is_some() {
                    let r = h
                        .trace
                        .and_then(|t| t.common_fields)
                        .and_then(|c| c.reference_time)
                        .as_ref()
                        .and_then(ref_time);
                    pending = Some(r);
                    saw_header = true;
                    continue;
                }
            }
        }
        if let Some(r) = pending.take() {
            out.push(r);
        } else if !saw_header {
            saw_header = true;
            out.push(None);
        }
    }
    out
}

/// A whole qlog document: `traces[]` or a single `trace`.
struct DocRefs<'a>(&'a mut Vec<Option<RefTime>>);

impl<'de> DeserializeSeed<'de> for DocRefs<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for DocRefs<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a qlog document")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match key.as_ref() {
                "traces" => map.next_value_seed(TracesRefs(&mut *self.0))?,
                "trace" => map.next_value_seed(TraceRef(&mut *self.0))?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

struct TracesRefs<'a>(&'a mut Vec<Option<RefTime>>);

impl<'de> DeserializeSeed<'de> for TracesRefs<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for TracesRefs<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("an array of traces")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(TraceRef(&mut *self.0))?.is_some() {}
        Ok(())
    }
}

/// One trace: its `common_fields.reference_time`; events are skipped.
struct TraceRef<'a>(&'a mut Vec<Option<RefTime>>);

impl<'de> DeserializeSeed<'de> for TraceRef<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for TraceRef<'_> {
    type Value = ();
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a trace object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut r = None;
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            if key == "common_fields" {
                let c: Value = map.next_value()?;
                r = c.get("reference_time").and_then(ref_time);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        self.0.push(r);
        Ok(())
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
    let refs = reference_times(input);
    let mut ex = Exporter::new(QvisWriter::new(f, &title).map_err(werr)?, refs);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_become_epoch_milliseconds() {
        let cases = [
            ("1970-01-01T00:00:00Z", Some(0.0)),
            ("2000-03-01T00:00:00Z", Some(951_868_800_000.0)),
            ("2025-03-04T05:06:07.089Z", Some(1_741_064_767_089.0)),
            ("2024-02-29T12:34:56.789+01:00", Some(1_709_206_496_789.0)),
            ("1969-12-31T23:00:00-02:00", Some(3_600_000.0)),
            ("2025-03-04 05:06:07z", Some(1_741_064_767_000.0)),
            ("2025-13-04T05:06:07Z", None),
            ("2025-03-04T05:06:07", None),
            ("2025-03-04T05:06:07.Z", None),
            ("2025-03-04T05:06:07+0100", None),
            ("unknown", None),
            ("", None),
        ];
        for (text, want) in cases {
            let got = rfc3339_ms(text);
            match (got, want) {
                (Some(g), Some(w)) => assert!((g - w).abs() < 1e-3, "{text}: {g} != {w}"),
                _ => assert_eq!(got, want, "{text}"),
            }
        }
    }

    #[test]
    fn every_form_of_reference_time_is_read() {
        let v = |s: &str| serde_json::from_str::<Value>(s).unwrap();
        assert_eq!(
            ref_time(&v("1575028855415")),
            Some(RefTime::Units(1575028855415.0))
        );
        assert_eq!(ref_time(&v("\"11001\"")), Some(RefTime::Units(11001.0)));
        assert_eq!(
            ref_time(&v("\"2025-03-04T05:06:07.089Z\"")),
            Some(RefTime::EpochMs(1_741_064_767_089.0))
        );
        assert_eq!(
            ref_time(&v(
                r#"{"clock_type":"monotonic","epoch":"unknown","wall_clock_time":"2025-03-04T05:06:07.089Z"}"#
            )),
            Some(RefTime::EpochMs(1_741_064_767_089.0))
        );
        assert_eq!(
            ref_time(&v(
                r#"{"clock_type":"system","epoch":"1970-01-01T00:00:00.000Z"}"#
            )),
            Some(RefTime::EpochMs(0.0))
        );
        assert_eq!(
            ref_time(&v(r#"{"clock_type":"monotonic","epoch":"unknown"}"#)),
            None
        );
        assert_eq!(ref_time(&v("null")), None);
    }

    #[test]
    fn parameters_get_the_owner_qvis_reads() {
        let raw = |s: &str| serde_json::value::RawValue::from_string(s.into()).unwrap();
        let v = fix_parameters(&raw(r#"{"initiator":"remote","initial_max_data":100}"#)).unwrap();
        assert_eq!(v["owner"], "remote");
        assert!(v.get("initiator").is_none());
        assert_eq!(v["initial_max_data"], 100);
        // Already in draft-02 form: kept as written.
        assert!(fix_parameters(&raw(r#"{"owner":"local"}"#)).is_none());
    }
}
