//! Streaming readers for every qlog flavour, with memory independent of
//! file size.
//!
//! | flavour | layout | times | names |
//! |---|---|---|---|
//! | quiche 0.30 (qlog drafts -09..-12) | JSON-SEQ: RS-separated records, a header then `{time, name, data}` | ms, relative | `quic:…` |
//! | qlog 0.3 / 0.4 | JSON-SEQ, NDJSON, or one JSON document with `traces[].events[]` | ms, relative/absolute/delta | `transport:…`, `recovery:…` |
//! | draft-00 / -01 / -02 | one JSON document, `event_fields` naming the columns of array events | `time_units` ms or us; `relative_time`, `time` or `delta_time` | category + event type |
//!
//! Records are decoded one at a time: a JSON-SEQ record, an NDJSON line,
//! or one element of a document's `events` array (walked with a streaming
//! deserializer, never loading the document). Events are normalised to
//! seconds since the trace's first event, RTTs to ms and pacing rates to
//! bit/s, and handed to a [`Sink`]. Generic `simulation:scenario` and
//! `simulation:marker` events (a `name`, or category `simulation` with
//! event `scenario`/`marker`, in any flavour) keep their data whole
//! ([`Parsed::Generic`]). A record that does not parse, or an
//! event whose data does not fit its type, is skipped and counted; a
//! document cut short ends the trace where it was cut, and is reported.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, BufRead};
use std::path::Path;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::event::{parse_moved, parse_state, Kind, Metrics, Packet};

/// Facts about one trace (one connection's log).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TraceInfo {
    /// Index of the trace in its file.
    pub index: usize,
    /// The flavour: `quiche-json-seq`, `qlog-0.3-json`, `draft-01-json`, ...
    pub format: String,
    /// `qlog_version` as written (empty for quiche 0.30, which has none).
    pub qlog_version: String,
    /// client, server, network or unknown.
    pub vantage_point: String,
    /// Title or description, if any.
    pub title: String,
    /// Multiply the file's RTT values by this for ms (0.001 for `us` drafts).
    pub rtt_to_ms: f64,
    /// Multiply the file's pacing rates by this for bit/s (8 for quiche 0.30).
    pub pacing_to_bps: f64,
}

impl Default for TraceInfo {
    fn default() -> Self {
        TraceInfo {
            index: 0,
            format: String::new(),
            qlog_version: String::new(),
            vantage_point: "unknown".into(),
            title: String::new(),
            rtt_to_ms: 1.0,
            pacing_to_bps: 1.0,
        }
    }
}

/// The parsed content of an event, for the kinds the analysis uses.
#[derive(Clone, Debug, PartialEq)]
pub enum Parsed {
    /// Not parsed (kind `Other`).
    None,
    /// A metrics update.
    Metrics(Metrics),
    /// packet_sent, packet_received or packet_lost.
    Packet(Packet),
    /// The new congestion state.
    State(String),
    /// Stream data moved: (to the application?, bytes).
    Moved(bool, u64),
    /// A generic event's data as written (`simulation:scenario`,
    /// `simulation:marker`): kept whole, since its shape is the writer's.
    Generic(serde_json::Value),
}

/// One normalised event.
pub struct Event<'a> {
    /// Seconds since the trace's first event.
    pub time_s: f64,
    /// The time as the file wrote it, in ms (for exports).
    pub time_ms_raw: f64,
    /// The full name, `category:type`.
    pub name: &'a str,
    /// What it is.
    pub kind: Kind,
    /// The data object as written.
    pub data: Option<&'a RawValue>,
    /// Its parsed content.
    pub parsed: Parsed,
}

/// Receives a file's traces and events.
pub trait Sink {
    /// A trace begins (called before its first event).
    fn trace_start(&mut self, _info: &TraceInfo) {}
    /// One event of the current trace.
    fn event(&mut self, ev: &Event);
    /// The trace ended; `info` may now know more (a vantage point written
    /// after the events).
    fn trace_end(&mut self, _info: &TraceInfo) {}
}

/// What reading a file found.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct ReadStats {
    /// Traces (connections) read.
    pub traces: usize,
    /// Events delivered.
    pub events: u64,
    /// Records or events skipped because they were malformed.
    pub skipped: u64,
    /// The file ended inside a record or document.
    pub truncated: bool,
    /// The first problem met, with its position.
    pub first_problem: Option<String>,
}

impl ReadStats {
    fn problem(&mut self, what: String) {
        self.skipped += 1;
        if self.first_problem.is_none() {
            self.first_problem = Some(what);
        }
    }
}

/// Why a file could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The file could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: io::Error,
    },
    /// The content is not qlog in any known flavour.
    #[error("{path}: not a qlog file: {why}")]
    NotQlog {
        /// The file.
        path: String,
        /// What was found instead.
        why: String,
    },
}

/// How a trace writes times.
#[derive(Clone, Debug)]
struct Clock {
    /// Multiply file time units to get ms.
    to_ms: f64,
    /// Times are deltas from the previous event.
    delta: bool,
    /// `time` is absolute (an epoch), so subtract the first event's.
    absolute: Option<bool>,
    first_ms: Option<f64>,
    acc_ms: f64,
    /// Multiply pacing rates by this to get bit/s.
    pacing_to_bps: f64,
}

impl Clock {
    fn new(to_ms: f64) -> Clock {
        Clock {
            to_ms,
            delta: false,
            absolute: None,
            first_ms: None,
            acc_ms: 0.0,
            pacing_to_bps: 1.0,
        }
    }

    /// Returns (seconds since the first event, file time in ms).
    fn at(&mut self, t: f64) -> (f64, f64) {
        let ms = t * self.to_ms;
        let ms = if self.delta {
            self.acc_ms += ms;
            self.acc_ms
        } else {
            ms
        };
        // Times above 10^11 ms (1973) are wall-clock epochs.
        let absolute = *self.absolute.get_or_insert(ms > 1e11);
        let first = *self.first_ms.get_or_insert(if absolute { ms } else { 0.0 });
        ((ms - first) / 1000.0, ms)
    }
}

struct Ctx<'s> {
    sink: &'s mut dyn Sink,
    stats: ReadStats,
    info: TraceInfo,
    clock: Clock,
    started: bool,
}

impl Ctx<'_> {
    fn start(&mut self) {
        if !self.started {
            self.started = true;
            self.stats.traces += 1;
            self.sink.trace_start(&self.info);
        }
    }

    fn end(&mut self) {
        if self.started {
            self.sink.trace_end(&self.info);
            self.started = false;
        }
    }

    fn deliver(&mut self, t: f64, name: &str, data: Option<&RawValue>, pos: &dyn Fn() -> String) {
        let kind = Kind::of(name);
        let parsed = match (kind, data) {
            (Kind::Other, _) | (_, None) => Ok(Parsed::None),
            (Kind::Metrics, Some(d)) => {
                Metrics::parse(d, self.clock.to_ms, self.clock.pacing_to_bps).map(Parsed::Metrics)
            }
            (Kind::PacketSent | Kind::PacketReceived | Kind::PacketLost, Some(d)) => {
                Packet::parse(d).map(Parsed::Packet)
            }
            (Kind::CongestionState, Some(d)) => {
                parse_state(d).map(|s| s.map_or(Parsed::None, Parsed::State))
            }
            (Kind::DataMoved, Some(d)) => parse_moved(d).map(|(a, b)| Parsed::Moved(a, b)),
            (Kind::Scenario | Kind::Marker, Some(d)) => {
                serde_json::from_str(d.get()).map(Parsed::Generic)
            }
        };
        let parsed = match parsed {
            Ok(p) => p,
            Err(e) => {
                self.stats
                    .problem(format!("{}: {name} event with unusable data: {e}", pos()));
                return;
            }
        };
        if !t.is_finite() {
            self.stats
                .problem(format!("{}: {name} event has time {t}", pos()));
            return;
        }
        self.start();
        let (time_s, time_ms_raw) = self.clock.at(t);
        self.stats.events += 1;
        self.sink.event(&Event {
            time_s,
            time_ms_raw,
            name,
            kind,
            data,
            parsed,
        });
    }
}

/// Reads a qlog file of any flavour (plain, gzip or zstd) into `sink`. A
/// compressed file whose stream ends before its end marker (its writer
/// was killed) is read up to its last complete block and marked
/// `truncated`.
pub fn read_file(path: &Path, sink: &mut dyn Sink) -> Result<ReadStats, ReadError> {
    let p = path.display().to_string();
    let opened = crate::input::open_file(path).map_err(|source| ReadError::Io {
        path: p.clone(),
        source,
    })?;
    let cut = opened.cut.clone();
    let mut stats = read(opened.input, &p, sink)?;
    if cut.load(std::sync::atomic::Ordering::Relaxed) {
        stats.truncated = true;
        stats.first_problem.get_or_insert_with(|| {
            format!(
                "{p}: the {} stream ends early (its writer did not finish it); read up to its last complete block",
                opened.container
            )
        });
    }
    Ok(stats)
}

/// Reads qlog from `input` (`name` is used in messages).
pub fn read(
    mut input: impl BufRead,
    name: &str,
    sink: &mut dyn Sink,
) -> Result<ReadStats, ReadError> {
    let io_err = |source| ReadError::Io {
        path: name.to_string(),
        source,
    };
    // Skip leading whitespace and look at the first byte.
    let first = loop {
        let buf = input.fill_buf().map_err(io_err)?;
        if buf.is_empty() {
            return Err(ReadError::NotQlog {
                path: name.into(),
                why: "the file is empty".into(),
            });
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
    let mut ctx = Ctx {
        sink,
        stats: ReadStats::default(),
        info: TraceInfo::default(),
        clock: Clock::new(1.0),
        started: false,
    };
    match first {
        0x1e => read_records(input, name, &mut ctx, 0x1e)?,
        b'{' if first_line_is_header(&mut input) => read_records(input, name, &mut ctx, b'\n')?,
        b'{' => read_document(input, name, &mut ctx)?,
        other => {
            return Err(ReadError::NotQlog {
                path: name.into(),
                why: format!(
                    "it starts with byte 0x{other:02x}, not a JSON object or a JSON-SEQ record separator"
                ),
            })
        }
    }
    if ctx.stats.traces == 0 && ctx.stats.events == 0 && ctx.info.format.is_empty() {
        return Err(ReadError::NotQlog {
            path: name.into(),
            why: ctx
                .stats
                .first_problem
                .clone()
                .unwrap_or_else(|| "no qlog header, traces or events found".into()),
        });
    }
    Ok(ctx.stats)
}

/// True if the first line is a complete JSON object that announces a
/// line-per-record format (NDJSON or JSON-SEQ without separators).
fn first_line_is_header(input: &mut impl BufRead) -> bool {
    let Ok(buf) = input.fill_buf() else {
        return false;
    };
    let Some(end) = memchr::memchr(b'\n', buf) else {
        return false;
    };
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&buf[..end]) else {
        return false;
    };
    v.get("qlog_format")
        .and_then(|f| f.as_str())
        .is_some_and(|f| f != "JSON")
        || v.get("file_schema").is_some()
        || (v.get("trace").is_some() && v.get("traces").is_none())
}

#[derive(Deserialize)]
struct SeqRecord<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    category: Option<Cow<'a, str>>,
    #[serde(borrow, alias = "event_type")]
    event: Option<Cow<'a, str>>,
    time: Option<crate::event::Num>,
    relative_time: Option<crate::event::Num>,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
    // Header fields.
    qlog_version: Option<serde_json::Value>,
    qlog_format: Option<String>,
    file_schema: Option<String>,
    trace: Option<serde_json::Value>,
    title: Option<String>,
}

fn header_info(ctx: &mut Ctx, rec: &SeqRecord) {
    let version = rec
        .qlog_version
        .as_ref()
        .map(|v| {
            v.as_str()
                .map(str::to_string)
                .unwrap_or_else(|| v.to_string())
        })
        .unwrap_or_default();
    let trace = rec.trace.as_ref();
    let vp = trace
        .and_then(|t| t.get("vantage_point"))
        .and_then(|v| v.get("type"))
        .and_then(|v| v.as_str())
        .unwrap_or("unknown");
    let cf = trace.and_then(|t| t.get("common_fields"));
    let time_format = cf
        .and_then(|c| c.get("time_format"))
        .and_then(|v| v.as_str());
    ctx.clock = Clock::new(1.0);
    ctx.clock.delta = time_format == Some("delta");
    match time_format {
        Some("relative") => ctx.clock.absolute = Some(false),
        Some("absolute") => ctx.clock.absolute = Some(true),
        _ => {}
    }
    // quiche 0.30 (new drafts: a file_schema, no qlog_version) logs pacing
    // rates in bytes per second; the qlog drafts say bits per second.
    if rec.file_schema.is_some() && version.is_empty() {
        ctx.clock.pacing_to_bps = 8.0;
    }
    ctx.info = TraceInfo {
        index: 0,
        format: if rec.file_schema.is_some() {
            "quiche-json-seq".into()
        } else {
            format!(
                "qlog-{version}-{}",
                rec.qlog_format
                    .as_deref()
                    .unwrap_or("JSON-SEQ")
                    .to_ascii_lowercase()
            )
        },
        qlog_version: version,
        vantage_point: vp.to_string(),
        rtt_to_ms: ctx.clock.to_ms,
        pacing_to_bps: ctx.clock.pacing_to_bps,
        title: rec
            .title
            .clone()
            .or_else(|| {
                trace
                    .and_then(|t| t.get("title"))
                    .and_then(|v| v.as_str())
                    .map(str::to_string)
            })
            .unwrap_or_default(),
    };
}

/// Reads records separated by `sep` (0x1E for JSON-SEQ, newline for NDJSON).
fn read_records(
    mut input: impl BufRead,
    name: &str,
    ctx: &mut Ctx,
    sep: u8,
) -> Result<(), ReadError> {
    let mut buf = Vec::with_capacity(1 << 16);
    let mut record = 0u64;
    let mut saw_header = false;
    loop {
        buf.clear();
        let n = input
            .read_until(sep, &mut buf)
            .map_err(|source| ReadError::Io {
                path: name.into(),
                source,
            })?;
        if n == 0 {
            break;
        }
        let ended = buf.last() == Some(&sep);
        let body = trim(&buf[..buf.len() - ended as usize]);
        if body.is_empty() {
            continue;
        }
        record += 1;
        let pos = || format!("{name}: record {record}");
        let rec: SeqRecord = match serde_json::from_slice(body) {
            Ok(r) => r,
            Err(e) => {
                if !ended && e.is_eof() {
                    ctx.stats.truncated = true;
                }
                ctx.stats.problem(format!("{}: {e}", pos()));
                continue;
            }
        };
        if rec.qlog_version.is_some() || rec.file_schema.is_some() || rec.qlog_format.is_some() {
            if saw_header {
                // A second header: a new trace in the same stream.
                ctx.end();
            }
            saw_header = true;
            header_info(ctx, &rec);
            continue;
        }
        if !saw_header {
            saw_header = true;
            ctx.info.format = "qlog-json-seq-without-header".into();
            ctx.info.rtt_to_ms = 1.0;
            ctx.info.pacing_to_bps = 1.0;
        }
        let full;
        let ev_name: &str = match (&rec.name, &rec.category, &rec.event) {
            (Some(n), _, _) => n,
            (None, Some(c), Some(e)) => {
                full = format!("{c}:{e}");
                &full
            }
            _ => {
                ctx.stats
                    .problem(format!("{}: an event without a name", pos()));
                continue;
            }
        };
        let Some(t) = rec.time.or(rec.relative_time) else {
            ctx.stats
                .problem(format!("{}: {ev_name} event without a time", pos()));
            continue;
        };
        ctx.deliver(t.0, ev_name, rec.data, &pos);
    }
    ctx.end();
    Ok(())
}

fn trim(b: &[u8]) -> &[u8] {
    let s = b
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(b.len());
    let e = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace())
        .map_or(s, |i| i + 1);
    &b[s..e.max(s)]
}

/// Walks a whole-document qlog with a streaming deserializer.
fn read_document(input: impl BufRead, name: &str, ctx: &mut Ctx) -> Result<(), ReadError> {
    let mut de = serde_json::Deserializer::from_reader(input);
    let r = FileSeed {
        ctx: &mut *ctx,
        name,
    }
    .deserialize(&mut de);
    if let Err(e) = r {
        if e.is_io() {
            return Err(ReadError::Io {
                path: name.into(),
                source: io::Error::other(e.to_string()),
            });
        }
        if e.is_eof() {
            ctx.stats.truncated = true;
        }
        ctx.stats.problem(format!("{name}: {e}"));
        ctx.end();
    }
    Ok(())
}

struct FileSeed<'c, 's> {
    ctx: &'c mut Ctx<'s>,
    name: &'c str,
}

impl<'de> DeserializeSeed<'de> for FileSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for FileSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a qlog document")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut version = String::new();
        let mut format = String::from("JSON");
        let mut index = 0usize;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "qlog_version" => {
                    let v: serde_json::Value = map.next_value()?;
                    version = v
                        .as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| v.to_string());
                }
                "qlog_format" => format = map.next_value()?,
                "traces" => map.next_value_seed(TracesSeed {
                    ctx: self.ctx,
                    name: self.name,
                    version: &version,
                    format: &format,
                    index: &mut index,
                })?,
                "trace" => {
                    map.next_value_seed(TraceSeed {
                        ctx: self.ctx,
                        name: self.name,
                        version: &version,
                        format: &format,
                        index: 0,
                    })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if version.is_empty() && self.ctx.stats.traces == 0 {
            return Err(de::Error::custom(
                "no qlog_version and no traces: not a qlog document",
            ));
        }
        Ok(())
    }
}

struct TracesSeed<'c, 's> {
    ctx: &'c mut Ctx<'s>,
    name: &'c str,
    version: &'c str,
    format: &'c str,
    index: &'c mut usize,
}

impl<'de> DeserializeSeed<'de> for TracesSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for TracesSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of traces")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        loop {
            let seed = TraceSeed {
                ctx: &mut *self.ctx,
                name: self.name,
                version: self.version,
                format: self.format,
                index: *self.index,
            };
            if seq.next_element_seed(seed)?.is_none() {
                return Ok(());
            }
            *self.index += 1;
        }
    }
}

struct TraceSeed<'c, 's> {
    ctx: &'c mut Ctx<'s>,
    name: &'c str,
    version: &'c str,
    format: &'c str,
    index: usize,
}

/// How the events of a trace are laid out.
#[derive(Clone, Debug, Default)]
struct Layout {
    /// Column names (draft-00..02), lowercased; empty for object events.
    fields: Vec<String>,
    time_units_us: bool,
    time_format: Option<String>,
    vantage: Option<String>,
    title: Option<String>,
}

impl<'de> DeserializeSeed<'de> for TraceSeed<'_, '_> {
    type Value = Option<()>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<()>, D::Error> {
        d.deserialize_map(self).map(Some)
    }
}

impl<'de> Visitor<'de> for TraceSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a trace object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut layout = Layout::default();
        // Events seen before the fields that explain them are kept raw.
        let mut early: Vec<Box<RawValue>> = Vec::new();
        let mut began = false;
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            match key.as_ref() {
                "event_fields" => {
                    let f: Vec<String> = map.next_value()?;
                    layout.fields = f.into_iter().map(|s| s.to_ascii_lowercase()).collect();
                }
                "configuration" => {
                    let v: serde_json::Value = map.next_value()?;
                    layout.time_units_us =
                        v.get("time_units").and_then(|u| u.as_str()) == Some("us");
                }
                "common_fields" => {
                    let v: serde_json::Value = map.next_value()?;
                    layout.time_format = v
                        .get("time_format")
                        .and_then(|u| u.as_str())
                        .map(str::to_string);
                }
                "vantage_point" => {
                    let v: serde_json::Value = map.next_value()?;
                    layout.vantage = v
                        .get("type")
                        .and_then(|t| t.as_str())
                        .map(|s| s.to_ascii_lowercase());
                }
                "title" | "description" => {
                    let v: serde_json::Value = map.next_value()?;
                    if layout.title.is_none() {
                        layout.title = v.as_str().map(str::to_string);
                    }
                }
                "events" => {
                    if !began {
                        TraceSeed::begin(self.ctx, &layout, self.version, self.format, self.index);
                    }
                    began = true;
                    map.next_value_seed(EventsSeed {
                        ctx: &mut *self.ctx,
                        layout: &layout,
                        name: self.name,
                        early: &mut early,
                    })?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if !began {
            TraceSeed::begin(self.ctx, &layout, self.version, self.format, self.index);
        }
        // Events that came before event_fields: interpret them now.
        for (i, raw) in early.iter().enumerate() {
            interpret(self.ctx, &layout, raw, self.name, i);
        }
        if let Some(v) = &layout.vantage {
            self.ctx.info.vantage_point = v.clone();
        }
        if let Some(t) = &layout.title {
            self.ctx.info.title = t.clone();
        }
        self.ctx.start();
        self.ctx.end();
        Ok(())
    }
}

impl TraceSeed<'_, '_> {
    fn begin(ctx: &mut Ctx, layout: &Layout, version: &str, format: &str, index: usize) {
        let draft = version.starts_with("draft-") || !layout.fields.is_empty();
        ctx.info = TraceInfo {
            index,
            format: if draft {
                format!("{version}-json")
            } else {
                format!("qlog-{version}-{}", format.to_ascii_lowercase())
            },
            qlog_version: version.to_string(),
            vantage_point: layout.vantage.clone().unwrap_or_else(|| "unknown".into()),
            title: layout.title.clone().unwrap_or_default(),
            rtt_to_ms: if layout.time_units_us { 0.001 } else { 1.0 },
            pacing_to_bps: 1.0,
        };
        ctx.clock = Clock::new(if layout.time_units_us { 0.001 } else { 1.0 });
        match layout.time_format.as_deref() {
            Some("delta") => ctx.clock.delta = true,
            Some("relative") => ctx.clock.absolute = Some(false),
            Some("absolute") => ctx.clock.absolute = Some(true),
            _ => {}
        }
        if layout.fields.iter().any(|f| f == "delta_time") {
            ctx.clock.delta = true;
        } else if layout.fields.iter().any(|f| f == "relative_time") {
            ctx.clock.absolute = Some(false);
        } else if layout.fields.iter().any(|f| f == "time") {
            ctx.clock.absolute = Some(true);
        }
        ctx.started = false;
    }
}

struct EventsSeed<'c, 's> {
    ctx: &'c mut Ctx<'s>,
    layout: &'c Layout,
    name: &'c str,
    early: &'c mut Vec<Box<RawValue>>,
}

impl<'de> DeserializeSeed<'de> for EventsSeed<'_, '_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_, '_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of events")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        while let Some(raw) = seq.next_element::<Box<RawValue>>()? {
            i += 1;
            let is_array = raw.get().starts_with('[');
            if is_array && self.layout.fields.is_empty() {
                // Columns not known yet (event_fields after events).
                self.early.push(raw);
                continue;
            }
            interpret(self.ctx, self.layout, &raw, self.name, i);
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct ObjEvent<'a> {
    #[serde(borrow)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow)]
    category: Option<Cow<'a, str>>,
    #[serde(borrow, alias = "event_type", alias = "type")]
    event: Option<Cow<'a, str>>,
    time: Option<crate::event::Num>,
    relative_time: Option<crate::event::Num>,
    #[serde(borrow)]
    data: Option<&'a RawValue>,
}

fn interpret(ctx: &mut Ctx, layout: &Layout, raw: &RawValue, file: &str, i: usize) {
    let trace = ctx.info.index;
    let pos = move || format!("{file}: trace {trace} event {i}");
    let text = raw.get();
    if text.starts_with('[') {
        let cols: Vec<&RawValue> = match serde_json::from_str(text) {
            Ok(c) => c,
            Err(e) => {
                ctx.stats.problem(format!("{}: {e}", pos()));
                return;
            }
        };
        if cols.is_empty() {
            return; // qvis allows an empty trailing element
        }
        let col = |names: &[&str]| {
            names
                .iter()
                .find_map(|n| layout.fields.iter().position(|f| f == n))
                .and_then(|i| cols.get(i).copied())
        };
        let str_of =
            |v: Option<&RawValue>| v.and_then(|r| serde_json::from_str::<String>(r.get()).ok());
        let t = col(&["relative_time", "time", "delta_time"])
            .and_then(|r| serde_json::from_str::<crate::event::Num>(r.get()).ok());
        let cat = str_of(col(&["category"]));
        let ev = str_of(col(&["event_type", "event"]));
        let (Some(t), Some(ev)) = (t, ev) else {
            ctx.stats.problem(format!(
                "{}: no time or event type in {}",
                pos(),
                short(text)
            ));
            return;
        };
        let name = match cat {
            Some(c) => format!("{}:{}", c.to_ascii_lowercase(), ev.to_ascii_lowercase()),
            None => ev.to_ascii_lowercase(),
        };
        ctx.deliver(t.0, &name, col(&["data"]), &pos);
    } else {
        let e: ObjEvent = match serde_json::from_str(text) {
            Ok(e) => e,
            Err(err) => {
                ctx.stats.problem(format!("{}: {err}", pos()));
                return;
            }
        };
        let full;
        let name: &str = match (&e.name, &e.category, &e.event) {
            (Some(n), _, _) => n,
            (None, Some(c), Some(ev)) => {
                full = format!("{c}:{ev}");
                &full
            }
            _ => {
                ctx.stats
                    .problem(format!("{}: an event without a name", pos()));
                return;
            }
        };
        let Some(t) = e.time.or(e.relative_time) else {
            ctx.stats
                .problem(format!("{}: {name} event without a time", pos()));
            return;
        };
        ctx.deliver(t.0, name, e.data, &pos);
    }
}

fn short(s: &str) -> String {
    let mut t: String = s.chars().take(80).collect();
    if s.len() > 80 {
        t.push('…');
    }
    t
}
