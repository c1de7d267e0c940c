//! Scenarios: a link, flows, cross traffic, a duration, repetitions and a
//! seed, read from TOML (`scenarios/*.toml`; `scenarios/reference.toml`
//! documents every field) or built from command-line flags.
//!
//! Besides what it moves and when, a `[[flows]]` entry may say
//!
//! - `rate = "2mbit"`: the sending application writes the response body
//!   (download: the server; upload: the client) no faster than this, so the
//!   congestion controller is application-limited whenever the rate is
//!   below its share. It travels in the request (`/bytes/N?rate=BPS`,
//!   `/upload?rate=BPS`), so the processes of `emu` and `netem` and the
//!   simulator's endpoints apply the same token bucket (quic-app's
//!   `rate` module). For a packet rate: below 8 Mbit/s the body goes out
//!   in 1000-byte writes, one packet each, so `pps = rate / 8000`.
//! - `mtu = 1300`: the largest UDP payload, bytes, either end of this flow
//!   sends (both ends' `max_udp_payload_size` transport parameter and
//!   their own send limit), 1200 to 1500: QUIC (RFC 9000 §14) does not
//!   allow UDP payloads below 1200 bytes. Without it, 1350.
//! - `weight = 40`: the flow's weight when the link's `sched` is `wfq`
//!   (required there, refused otherwise); `[[cross]]` entries take one too.
//!   Each flow of a group with `count > 1` is its own class with this
//!   weight.
//! - `start_jitter = "1s"`: each flow of the group (each of `count`
//!   separately) starts at `start + U[0, start_jitter)`, the offset drawn
//!   from a generator seeded by the repetition's seed and the flow's index
//!   ([`FlowSpec::start_in_rep`]): a repetition is reproducible, and
//!   repetitions differ, which de-synchronises flows on a deterministic
//!   link (drop-tail, no loss) as ns-2 studies do, so confidence intervals
//!   over repetitions mean something. `start + start_jitter` must not pass
//!   the scenario's end; the flow's `duration` counts from its own start.
//!   Default 0: every repetition starts at `start` exactly. `[[cross]]`
//!   entries take one too. sim, emu and netem apply the same offsets
//!   ([`Scenario::rep_flows`], [`Scenario::rep_cross`]).
//!
//! Everything is validated before a run starts; an error names the file,
//! the field and what is allowed.

use std::fmt;
use std::path::{Path, PathBuf};

use crate::link::units::{format_duration_ns, parse_duration_ns, parse_size_bytes};
use crate::link::{LinkError, LinkSpec};
use cc_algorithms::units::{format_rate, parse_rate};

/// A scenario field that is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioError {
    /// The file, or `command line`.
    pub source: String,
    /// The field's path (`flows[1].cc`).
    pub field: String,
    /// What is wrong and what is allowed.
    pub problem: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.source, self.field, self.problem)
    }
}

impl std::error::Error for ScenarioError {}

/// Which way a flow's data goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Server to client (the server's controller matters).
    Download,
    /// Client to server (the client's controller matters).
    Upload,
}

impl Direction {
    fn parse(s: &str) -> Option<Direction> {
        match s {
            "download" | "down" => Some(Direction::Download),
            "upload" | "up" => Some(Direction::Upload),
            _ => None,
        }
    }
    /// `download` or `upload`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Download => "download",
            Direction::Upload => "upload",
        }
    }
}

/// One group of identical QUIC flows.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    /// Algorithm spec (`cubic`, `vegas:alpha=2,beta=4`).
    pub cc: String,
    /// Which way the data goes.
    pub direction: Direction,
    /// Start offset, ns.
    pub start_ns: u64,
    /// Spread of the start, ns: in each repetition each flow starts at
    /// `start_ns + U[0, start_jitter_ns)` (0: at `start_ns` exactly).
    pub start_jitter_ns: u64,
    /// Bytes to move; `None`: until the flow's duration ends.
    pub size: Option<u64>,
    /// How long the flow runs, ns; `None`: until the scenario ends.
    pub duration_ns: Option<u64>,
    /// How many such flows.
    pub count: u32,
    /// The sending application's rate limit, bit/s (`None`: as fast as
    /// flow and congestion control allow).
    pub rate_bps: Option<f64>,
    /// The largest UDP payload both ends send, bytes (`None`: quic-app's
    /// default, 1350).
    pub mtu: Option<u16>,
    /// Weight of each flow's class under `sched = "wfq"`.
    pub weight: Option<f64>,
}

impl FlowSpec {
    /// One download of `cc` from the start to the end of the scenario.
    pub fn download(cc: impl Into<String>) -> FlowSpec {
        FlowSpec {
            cc: cc.into(),
            direction: Direction::Download,
            start_ns: 0,
            start_jitter_ns: 0,
            size: None,
            duration_ns: None,
            count: 1,
            rate_bps: None,
            mtu: None,
            weight: None,
        }
    }

    /// The algorithm of the flow's server: the flow's own for a download;
    /// quiche's CUBIC for the server's (tiny) sending in an upload.
    pub fn server_cc(&self) -> &str {
        match self.direction {
            Direction::Download => &self.cc,
            Direction::Upload => "cubic",
        }
    }

    /// Bytes to move: the size, or "unbounded" (1 TB) for a flow that
    /// runs for a duration.
    pub fn bytes(&self) -> u64 {
        self.size.unwrap_or(1_000_000_000_000)
    }

    /// The HTTP path the client asks for: `/bytes/N` or `/upload`, with
    /// `?rate=BPS` when the sending application is rate-limited.
    pub fn request_path(&self) -> String {
        let path = match self.direction {
            Direction::Download => format!("/bytes/{}", self.bytes()),
            Direction::Upload => "/upload".to_string(),
        };
        match self.rate_bps {
            Some(r) => format!("{path}?rate={}", r.round() as u64),
            None => path,
        }
    }

    /// When flow `index` (its index after expanding counts) of this group
    /// starts in the repetition whose seed is `seed`, ns: `start_ns` plus
    /// an offset in `[0, start_jitter_ns)` that depends on the seed and the
    /// index only.
    pub fn start_in_rep(&self, seed: u64, index: usize) -> u64 {
        self.start_ns + jitter_offset_ns(self.start_jitter_ns, seed, FLOW_JITTER_STREAM, index)
    }

    /// How long the client runs, ns, in a scenario of `scenario_ns`: its
    /// duration, cut at the scenario's end.
    pub fn run_ns(&self, scenario_ns: u64) -> u64 {
        let left = scenario_ns.saturating_sub(self.start_ns);
        self.duration_ns.map_or(left, |d| d.min(left))
    }
}

/// Constant-bit-rate UDP cross traffic, optionally on/off.
#[derive(Clone, Debug, PartialEq)]
pub struct CrossSpec {
    /// Rate while on, bit/s.
    pub rate_bps: f64,
    /// Which way it goes.
    pub direction: Direction,
    /// Start offset, ns.
    pub start_ns: u64,
    /// Spread of the start, ns: in each repetition the source starts at
    /// `start_ns + U[0, start_jitter_ns)` (0: at `start_ns` exactly).
    pub start_jitter_ns: u64,
    /// How long, ns; `None`: until the scenario ends.
    pub duration_ns: Option<u64>,
    /// On period, ns (with `off_ns`: alternate).
    pub on_ns: Option<u64>,
    /// Off period, ns.
    pub off_ns: Option<u64>,
    /// Datagram size, bytes.
    pub packet_size: u32,
    /// Weight of its class under `sched = "wfq"`.
    pub weight: Option<f64>,
}

impl CrossSpec {
    /// When source `index` starts in the repetition whose seed is `seed`,
    /// ns: `start_ns` plus an offset in `[0, start_jitter_ns)`.
    pub fn start_in_rep(&self, seed: u64, index: usize) -> u64 {
        self.start_ns + jitter_offset_ns(self.start_jitter_ns, seed, CROSS_JITTER_STREAM, index)
    }

    /// Whether the source sends `since_ns` after its start (on/off periods).
    pub fn is_on(&self, since_ns: u64) -> bool {
        match (self.on_ns, self.off_ns) {
            (Some(on), Some(off)) => since_ns % (on + off) < on,
            _ => true,
        }
    }
}

/// Separates the start-jitter streams of flows and of cross sources from
/// each other and from the link's.
const FLOW_JITTER_STREAM: u64 = 0x57a7_f10e << 32;
const CROSS_JITTER_STREAM: u64 = 0x57a7_c205 << 32;

/// An offset in `[0, jitter_ns)`, ns, for entry `index` of a repetition
/// seeded `seed`: a function of those alone (0 when `jitter_ns` is 0).
pub fn jitter_offset_ns(jitter_ns: u64, seed: u64, stream: u64, index: usize) -> u64 {
    if jitter_ns == 0 {
        return 0;
    }
    let mut rng = crate::emu::rng::Rng::new(seed, stream | index as u64);
    // Multiply-shift: uniform over [0, jitter_ns) without rounding up to it.
    ((rng.next_u64() as u128 * jitter_ns as u128) >> 64) as u64
}

/// A whole scenario.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Name (for reports).
    pub name: String,
    /// How long each repetition runs, ns.
    pub duration_ns: u64,
    /// Repetitions (each with seed + i).
    pub repetitions: u32,
    /// Base seed.
    pub seed: u64,
    /// The bottleneck.
    pub link: LinkSpec,
    /// QUIC flows.
    pub flows: Vec<FlowSpec>,
    /// Cross traffic.
    pub cross: Vec<CrossSpec>,
}

const TOP: &[&str] = &[
    "name",
    "duration",
    "repetitions",
    "seed",
    "link",
    "flows",
    "cross",
];
const FLOW: &[&str] = &[
    "cc",
    "direction",
    "start",
    "start_jitter",
    "size",
    "duration",
    "count",
    "rate",
    "mtu",
    "weight",
];
const CROSS: &[&str] = &[
    "rate",
    "direction",
    "start",
    "start_jitter",
    "duration",
    "on",
    "off",
    "packet_size",
    "weight",
];

/// The smallest `mtu` a flow may have: QUIC's minimum UDP payload.
pub const MIN_MTU: u16 = 1200;
/// The largest `mtu` a flow may have.
pub const MAX_MTU: u16 = 1500;

struct Ctx<'a> {
    source: &'a str,
}

impl Ctx<'_> {
    fn err(&self, field: &str, problem: impl Into<String>) -> ScenarioError {
        ScenarioError {
            source: self.source.to_string(),
            field: field.to_string(),
            problem: problem.into(),
        }
    }

    fn text(&self, field: &str, v: &toml::Value) -> Result<String, ScenarioError> {
        match v {
            toml::Value::String(s) => Ok(s.clone()),
            toml::Value::Integer(i) => Ok(i.to_string()),
            toml::Value::Float(f) => Ok(f.to_string()),
            other => Err(self.err(
                field,
                format!("expected a string or number, got {}", other.type_str()),
            )),
        }
    }

    fn duration(&self, field: &str, v: &toml::Value) -> Result<u64, ScenarioError> {
        let s = self.text(field, v)?;
        parse_duration_ns(&s).ok_or_else(|| {
            self.err(
                field,
                format!("`{s}` is not a time such as 30s, 500ms or 1.5s"),
            )
        })
    }

    fn count(&self, field: &str, v: &toml::Value, max: i64) -> Result<u32, ScenarioError> {
        match v {
            toml::Value::Integer(i) if *i >= 1 && *i <= max => Ok(*i as u32),
            _ => Err(self.err(
                field,
                format!("`{v}` is not a whole number from 1 to {max}"),
            )),
        }
    }

    fn weight(&self, field: &str, v: &toml::Value) -> Result<f64, ScenarioError> {
        let w = match v {
            toml::Value::Integer(i) => *i as f64,
            toml::Value::Float(f) => *f,
            _ => f64::NAN,
        };
        if w.is_finite() && w > 0.0 && w <= 1e6 {
            Ok(w)
        } else {
            Err(self.err(
                field,
                format!("`{v}` is not a weight: a number above 0 and at most 1000000 (shares are weight / sum of the weights, e.g. 40 and 60)"),
            ))
        }
    }

    fn check_keys(
        &self,
        prefix: &str,
        t: &toml::Table,
        allowed: &[&str],
    ) -> Result<(), ScenarioError> {
        for k in t.keys() {
            if !allowed.contains(&k.as_str()) {
                return Err(self.err(
                    &format!("{prefix}{k}"),
                    format!("unknown field; allowed: {}", allowed.join(", ")),
                ));
            }
        }
        Ok(())
    }
}

fn link_err(source: &str, e: LinkError) -> ScenarioError {
    ScenarioError {
        source: source.to_string(),
        field: e.field,
        problem: e.problem,
    }
}

impl Default for Scenario {
    /// 20 s of one CUBIC download on the default link.
    fn default() -> Self {
        Scenario {
            name: "scenario".into(),
            duration_ns: 20_000_000_000,
            repetitions: 1,
            seed: 1,
            link: LinkSpec::default(),
            flows: vec![FlowSpec::download("cubic")],
            cross: Vec::new(),
        }
    }
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            source: source.clone(),
            field: "(file)".into(),
            problem: format!("cannot read: {e}"),
        })?;
        let base = path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| PathBuf::from("."));
        Scenario::parse(&text, &source, &base)
    }

    /// Parses scenario TOML; `source` names it in errors, `base` resolves
    /// relative trace paths.
    pub fn parse(text: &str, source: &str, base: &Path) -> Result<Scenario, ScenarioError> {
        let cx = Ctx { source };
        let t: toml::Table = toml::from_str(text)
            .map_err(|e| cx.err("(file)", format!("not valid TOML: {}", e.message())))?;
        Scenario::from_table(&t, &cx, base)
    }

    fn from_table(t: &toml::Table, cx: &Ctx, base: &Path) -> Result<Scenario, ScenarioError> {
        cx.check_keys("", t, TOP)?;
        let mut s = Scenario {
            flows: Vec::new(),
            ..Scenario::default()
        };
        if let Some(v) = t.get("name") {
            s.name = cx.text("name", v)?;
        }
        if let Some(v) = t.get("duration") {
            s.duration_ns = cx.duration("duration", v)?;
            if s.duration_ns == 0 || s.duration_ns > 86_400_000_000_000 {
                return Err(cx.err("duration", "must be above 0 and at most a day"));
            }
        }
        if let Some(v) = t.get("repetitions") {
            s.repetitions = cx.count("repetitions", v, 1000)?;
        }
        if let Some(v) = t.get("seed") {
            s.seed = match v {
                toml::Value::Integer(i) if *i >= 0 => *i as u64,
                _ => return Err(cx.err("seed", format!("`{v}` is not a non-negative integer"))),
            };
        }
        let mut link_table = match t.get("link") {
            Some(toml::Value::Table(l)) => l.clone(),
            // `link = "sim"`: the default link on that backend.
            Some(toml::Value::String(b)) => {
                let mut l = toml::Table::new();
                l.insert("backend".into(), toml::Value::String(b.clone()));
                l
            }
            Some(_) => {
                return Err(cx.err(
                    "link",
                    "expected a table ([link]) or a backend name (link = \"sim\")",
                ))
            }
            None => toml::Table::new(),
        };
        if !link_table.contains_key("seed") {
            link_table.insert("seed".into(), toml::Value::Integer(s.seed as i64));
        }
        s.link =
            LinkSpec::from_toml(&link_table, base, "link").map_err(|e| link_err(cx.source, e))?;
        match t.get("flows") {
            Some(toml::Value::Array(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let p = format!("flows[{i}].");
                    let ft = item.as_table().ok_or_else(|| {
                        cx.err(&format!("flows[{i}]"), "expected a table ([[flows]])")
                    })?;
                    s.flows.push(parse_flow(ft, cx, &p, s.duration_ns)?);
                }
            }
            Some(_) => return Err(cx.err("flows", "expected an array of tables ([[flows]])")),
            None => s.flows = Scenario::default().flows,
        }
        if s.flows.is_empty() {
            return Err(cx.err("flows", "a scenario needs at least one flow"));
        }
        if let Some(v) = t.get("cross") {
            let items = v
                .as_array()
                .ok_or_else(|| cx.err("cross", "expected an array of tables ([[cross]])"))?;
            for (i, item) in items.iter().enumerate() {
                let p = format!("cross[{i}].");
                let ct = item.as_table().ok_or_else(|| {
                    cx.err(&format!("cross[{i}]"), "expected a table ([[cross]])")
                })?;
                s.cross.push(parse_cross(ct, cx, &p, s.duration_ns)?);
            }
        }
        let total: u32 = s.flows.iter().map(|f| f.count).sum();
        if total > 200 {
            return Err(cx.err("flows", format!("{total} flows in all; at most 200")));
        }
        s.check_weights(cx)?;
        Ok(s)
    }

    /// `weight` is required on every flow and cross source when a link
    /// direction schedules by `wfq`, and meaningless otherwise.
    fn check_weights(&self, cx: &Ctx) -> Result<(), ScenarioError> {
        let wfq = self.link.is_weighted();
        let entries = self
            .flows
            .iter()
            .enumerate()
            .map(|(i, f)| (format!("flows[{i}].weight"), f.weight))
            .chain(
                self.cross
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (format!("cross[{i}].weight"), c.weight)),
            );
        for (field, w) in entries {
            match (wfq, w) {
                (true, None) => {
                    return Err(cx.err(
                        &field,
                        "required because the link's sched is wfq: every [[flows]] and [[cross]] entry needs a weight (a number above 0; shares are weight / sum of the backlogged classes' weights)",
                    ))
                }
                (false, Some(_)) => {
                    return Err(cx.err(
                        &field,
                        "a weight needs link.sched = \"wfq\" (the link's scheduler is fifo or fq, which do not use weights)",
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// The weight of each traffic class, as the link's `wfq` scheduler
    /// numbers them: every flow (expanded by `count`), then every cross
    /// source. Unweighted entries count 1.
    pub fn class_weights(&self) -> Vec<f64> {
        self.expanded_flows()
            .iter()
            .map(|(_, f)| f.weight.unwrap_or(1.0))
            .chain(self.cross.iter().map(|c| c.weight.unwrap_or(1.0)))
            .collect()
    }

    /// Every flow, expanded by `count`, with its group index.
    pub fn expanded_flows(&self) -> Vec<(usize, &FlowSpec)> {
        self.flows
            .iter()
            .enumerate()
            .flat_map(|(g, f)| std::iter::repeat_n((g, f), f.count as usize))
            .collect()
    }

    /// Every flow, expanded by `count`, with its group index, as it runs in
    /// the repetition whose seed is `seed`: `start_ns` is the flow's own
    /// start ([`FlowSpec::start_in_rep`]) and `start_jitter_ns` is 0. What
    /// sim, emu and netem start, and what the results report.
    pub fn rep_flows(&self, seed: u64) -> Vec<(usize, FlowSpec)> {
        self.expanded_flows()
            .into_iter()
            .enumerate()
            .map(|(i, (g, f))| {
                let mut f = f.clone();
                f.start_ns = f.start_in_rep(seed, i);
                f.start_jitter_ns = 0;
                (g, f)
            })
            .collect()
    }

    /// The cross sources as they run in the repetition whose seed is
    /// `seed` (each started at [`CrossSpec::start_in_rep`]).
    pub fn rep_cross(&self, seed: u64) -> Vec<CrossSpec> {
        self.cross
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut c = c.clone();
                c.start_ns = c.start_in_rep(seed, i);
                c.start_jitter_ns = 0;
                c
            })
            .collect()
    }

    /// The data of the qlog `simulation:scenario` event both ends of a
    /// run write at the start of their trace: the backend, the link as
    /// resolved (with this repetition's seed) and the flows and cross
    /// sources with their starts in this repetition.
    pub fn qlog_event(&self, backend: &str, seed: u64) -> serde_json::Value {
        let mut link = self.link.clone();
        link.seed = seed;
        serde_json::json!({
            "scenario": self.name,
            "backend": backend,
            "seed": seed,
            "duration_s": self.duration_ns as f64 / 1e9,
            "link": serde_json::to_value(toml::Value::Table(link.to_toml()))
                .unwrap_or(serde_json::Value::Null),
            "flows": self.rep_flows(seed).iter().map(|(_, f)| {
                let mut j = serde_json::json!({
                    "cc": f.cc,
                    "direction": f.direction.as_str(),
                    "start_s": f.start_ns as f64 / 1e9,
                    "size": f.size,
                });
                for (k, v) in [
                    ("rate_bps", f.rate_bps.map(serde_json::Value::from)),
                    ("mtu", f.mtu.map(serde_json::Value::from)),
                    ("weight", f.weight.map(serde_json::Value::from)),
                ] {
                    if let Some(v) = v {
                        j[k] = v;
                    }
                }
                j
            }).collect::<Vec<_>>(),
            "cross": self.rep_cross(seed).iter().map(|c| {
                let mut j = serde_json::json!({
                    "rate_bps": c.rate_bps,
                    "direction": c.direction.as_str(),
                    "start_s": c.start_ns as f64 / 1e9,
                });
                if let Some(w) = c.weight {
                    j["weight"] = w.into();
                }
                j
            }).collect::<Vec<_>>(),
        })
    }

    /// The fully resolved scenario as TOML (written into every run).
    pub fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("name".into(), self.name.clone().into());
        t.insert(
            "duration".into(),
            format_duration_ns(self.duration_ns).into(),
        );
        t.insert(
            "repetitions".into(),
            toml::Value::Integer(self.repetitions as i64),
        );
        t.insert("seed".into(), toml::Value::Integer(self.seed as i64));
        t.insert("link".into(), toml::Value::Table(self.link.to_toml()));
        let flows: Vec<toml::Value> = self
            .flows
            .iter()
            .map(|f| {
                let mut ft = toml::Table::new();
                ft.insert("cc".into(), f.cc.clone().into());
                ft.insert("direction".into(), f.direction.as_str().into());
                ft.insert("start".into(), format_duration_ns(f.start_ns).into());
                if f.start_jitter_ns > 0 {
                    ft.insert(
                        "start_jitter".into(),
                        format_duration_ns(f.start_jitter_ns).into(),
                    );
                }
                if let Some(sz) = f.size {
                    ft.insert("size".into(), format!("{sz}b").into());
                }
                if let Some(d) = f.duration_ns {
                    ft.insert("duration".into(), format_duration_ns(d).into());
                }
                ft.insert("count".into(), toml::Value::Integer(f.count as i64));
                if let Some(r) = f.rate_bps {
                    ft.insert("rate".into(), format_rate(r).into());
                }
                if let Some(m) = f.mtu {
                    ft.insert("mtu".into(), toml::Value::Integer(m as i64));
                }
                if let Some(w) = f.weight {
                    ft.insert("weight".into(), weight_value(w));
                }
                toml::Value::Table(ft)
            })
            .collect();
        t.insert("flows".into(), toml::Value::Array(flows));
        if !self.cross.is_empty() {
            let cross: Vec<toml::Value> = self
                .cross
                .iter()
                .map(|c| {
                    let mut ct = toml::Table::new();
                    ct.insert("rate".into(), format_rate(c.rate_bps).into());
                    ct.insert("direction".into(), c.direction.as_str().into());
                    ct.insert("start".into(), format_duration_ns(c.start_ns).into());
                    if c.start_jitter_ns > 0 {
                        ct.insert(
                            "start_jitter".into(),
                            format_duration_ns(c.start_jitter_ns).into(),
                        );
                    }
                    if let Some(d) = c.duration_ns {
                        ct.insert("duration".into(), format_duration_ns(d).into());
                    }
                    if let (Some(on), Some(off)) = (c.on_ns, c.off_ns) {
                        ct.insert("on".into(), format_duration_ns(on).into());
                        ct.insert("off".into(), format_duration_ns(off).into());
                    }
                    ct.insert(
                        "packet_size".into(),
                        toml::Value::Integer(c.packet_size as i64),
                    );
                    if let Some(w) = c.weight {
                        ct.insert("weight".into(), weight_value(w));
                    }
                    toml::Value::Table(ct)
                })
                .collect();
            t.insert("cross".into(), toml::Value::Array(cross));
        }
        t
    }

    /// Applies `key = value` overrides (dotted paths such as `link.rate`,
    /// `flows.0.cc`, `duration`) and re-validates: the sweep's grid axes.
    pub fn with_overrides(
        &self,
        overrides: &[(String, toml::Value)],
        source: &str,
    ) -> Result<Scenario, ScenarioError> {
        let mut t = self.to_toml();
        for (path, v) in overrides {
            set_path(&mut t, path, v.clone()).map_err(|p| ScenarioError {
                source: source.to_string(),
                field: path.clone(),
                problem: p,
            })?;
        }
        // Overriding `link.rtt` must drop the resolved per-direction delays.
        let cx = Ctx { source };
        Scenario::from_table(&t, &cx, Path::new("."))
    }
}

/// A weight as TOML: an integer when it is one (`40`), else a float.
fn weight_value(w: f64) -> toml::Value {
    if w.fract() == 0.0 && w.abs() < 1e15 {
        toml::Value::Integer(w as i64)
    } else {
        toml::Value::Float(w)
    }
}

/// Sets a dotted path in a TOML table (`link.rate`, `flows.0.cc`). A link
/// field set at the top of `[link]` replaces the resolved per-direction ones.
pub fn set_path(t: &mut toml::Table, path: &str, v: toml::Value) -> Result<(), String> {
    let parts: Vec<&str> = path.split('.').collect();
    if parts.first() == Some(&"link") && parts.len() == 2 {
        // The resolved link lists each direction; set the field in both,
        // translating rtt into per-direction delays.
        let link = t
            .get_mut("link")
            .and_then(|l| l.as_table_mut())
            .ok_or("no [link] table")?;
        let key = parts[1];
        if matches!(key, "backend" | "seed") {
            link.insert(key.into(), v);
            return Ok(());
        }
        for dir in ["up", "down"] {
            let d = link
                .get_mut(dir)
                .and_then(|x| x.as_table_mut())
                .ok_or("no link direction")?;
            if key == "rtt" {
                let s = v.as_str().ok_or("rtt must be a string such as 40ms")?;
                let ns = parse_duration_ns(s).ok_or(format!("`{s}` is not a time such as 40ms"))?;
                let half = if dir == "up" { ns / 2 } else { ns - ns / 2 };
                d.insert("delay".into(), format_duration_ns(half).into());
            } else {
                if key == "rate" {
                    d.remove("trace");
                }
                if key == "trace" {
                    d.remove("rate");
                }
                d.insert(key.into(), v.clone());
            }
        }
        return Ok(());
    }
    let mut cur: &mut toml::Value = t
        .get_mut(parts[0])
        .ok_or_else(|| format!("no field `{}` to set", parts[0]))?;
    if parts.len() == 1 {
        *cur = v;
        return Ok(());
    }
    for (i, p) in parts[1..].iter().enumerate() {
        let last = i == parts.len() - 2;
        cur = match cur {
            toml::Value::Array(a) => {
                let idx: usize = p.parse().map_err(|_| format!("`{p}` is not an index"))?;
                a.get_mut(idx)
                    .ok_or_else(|| format!("index {idx} is out of range"))?
            }
            toml::Value::Table(tb) => {
                if last {
                    tb.insert(p.to_string(), v);
                    return Ok(());
                }
                tb.get_mut(*p).ok_or_else(|| format!("no field `{p}`"))?
            }
            _ => return Err(format!("`{p}` is inside a value that has no fields")),
        };
        if last {
            *cur = v;
            return Ok(());
        }
    }
    Ok(())
}

fn parse_flow(
    t: &toml::Table,
    cx: &Ctx,
    p: &str,
    scen_dur: u64,
) -> Result<FlowSpec, ScenarioError> {
    cx.check_keys(p, t, FLOW)?;
    let f = |k: &str| format!("{p}{k}");
    let cc = match t.get("cc") {
        Some(v) => cx.text(&f("cc"), v)?,
        None => return Err(cx.err(
            &f("cc"),
            "required: an algorithm spec such as cubic or vegas:alpha=2,beta=4 (see `cclab list`)",
        )),
    };
    cc_algorithms::parse(&cc).map_err(|e| cx.err(&f("cc"), e.to_string()))?;
    let direction = match t.get("direction") {
        Some(v) => {
            let s = cx.text(&f("direction"), v)?;
            Direction::parse(&s).ok_or_else(|| {
                cx.err(&f("direction"), format!("`{s}` is not download or upload"))
            })?
        }
        None => Direction::Download,
    };
    let start_ns = match t.get("start") {
        Some(v) => cx.duration(&f("start"), v)?,
        None => 0,
    };
    if start_ns >= scen_dur {
        return Err(cx.err(
            &f("start"),
            format!(
                "{} is not before the scenario's end ({})",
                format_duration_ns(start_ns),
                format_duration_ns(scen_dur)
            ),
        ));
    }
    let start_jitter_ns = start_jitter(t, cx, p, start_ns, scen_dur)?;
    let size = match t.get("size") {
        Some(v) => {
            let s = cx.text(&f("size"), v)?;
            Some(parse_size_bytes(&s).filter(|&b| b > 0).ok_or_else(|| {
                cx.err(
                    &f("size"),
                    format!("`{s}` is not a size such as 10mb, 500kb or 1000000"),
                )
            })?)
        }
        None => None,
    };
    let duration_ns = match t.get("duration") {
        Some(v) => Some(cx.duration(&f("duration"), v)?).filter(|&d| d > 0),
        None => None,
    };
    if size.is_some() && duration_ns.is_some() {
        return Err(cx.err(&f("size"), "give size or duration, not both"));
    }
    let count = match t.get("count") {
        Some(v) => cx.count(&f("count"), v, 200)?,
        None => 1,
    };
    let rate_bps = match t.get("rate") {
        Some(v) => {
            let s = cx.text(&f("rate"), v)?;
            Some(
                parse_rate(&s)
                    .filter(|r| *r >= 1000.0 && *r <= 1e11)
                    .ok_or_else(|| {
                        cx.err(
                            &f("rate"),
                            format!("`{s}` is not a rate between 1kbit and 100gbit, such as 2mbit or 500kbit (the rate at which the sending application writes)"),
                        )
                    })?,
            )
        }
        None => None,
    };
    let mtu = match t.get("mtu") {
        Some(toml::Value::Integer(i)) if (MIN_MTU as i64..=MAX_MTU as i64).contains(i) => {
            Some(*i as u16)
        }
        Some(v) => {
            return Err(cx.err(
                &f("mtu"),
                format!("`{v}` is not a UDP payload size from {MIN_MTU} to {MAX_MTU} bytes; QUIC (RFC 9000 §14) does not allow UDP payloads below 1200 bytes"),
            ))
        }
        None => None,
    };
    let weight = t
        .get("weight")
        .map(|v| cx.weight(&f("weight"), v))
        .transpose()?;
    Ok(FlowSpec {
        cc,
        direction,
        start_ns,
        start_jitter_ns,
        size,
        duration_ns,
        count,
        rate_bps,
        mtu,
        weight,
    })
}

/// `start_jitter` of a `[[flows]]` or `[[cross]]` entry: a time from 0 to
/// what is left of the scenario after `start`, so every start falls
/// before the end.
fn start_jitter(
    t: &toml::Table,
    cx: &Ctx,
    p: &str,
    start_ns: u64,
    scen_dur: u64,
) -> Result<u64, ScenarioError> {
    let field = format!("{p}start_jitter");
    let Some(v) = t.get("start_jitter") else {
        return Ok(0);
    };
    let j = cx.duration(&field, v)?;
    let left = scen_dur - start_ns;
    if j > left {
        return Err(cx.err(
            &field,
            format!(
                "{} is too long: start ({}) + start_jitter must be at most the scenario's duration ({}); allowed: a time from 0 to {} (starts are drawn from [start, start + start_jitter))",
                format_duration_ns(j),
                format_duration_ns(start_ns),
                format_duration_ns(scen_dur),
                format_duration_ns(left)
            ),
        ));
    }
    Ok(j)
}

fn parse_cross(
    t: &toml::Table,
    cx: &Ctx,
    p: &str,
    scen_dur: u64,
) -> Result<CrossSpec, ScenarioError> {
    cx.check_keys(p, t, CROSS)?;
    let f = |k: &str| format!("{p}{k}");
    let rate_bps = match t.get("rate") {
        Some(v) => {
            let s = cx.text(&f("rate"), v)?;
            parse_rate(&s)
                .filter(|r| *r >= 1000.0 && *r <= 1e11)
                .ok_or_else(|| cx.err(&f("rate"), format!("`{s}` is not a rate such as 5mbit")))?
        }
        None => {
            return Err(cx.err(
                &f("rate"),
                "required: the cross traffic's rate, such as 5mbit",
            ))
        }
    };
    let direction = match t.get("direction") {
        Some(v) => {
            let s = cx.text(&f("direction"), v)?;
            Direction::parse(&s).ok_or_else(|| {
                cx.err(&f("direction"), format!("`{s}` is not download or upload"))
            })?
        }
        None => Direction::Download,
    };
    let start_ns = match t.get("start") {
        Some(v) => cx.duration(&f("start"), v)?,
        None => 0,
    };
    if start_ns >= scen_dur {
        return Err(cx.err(&f("start"), "is not before the scenario's end"));
    }
    let start_jitter_ns = start_jitter(t, cx, p, start_ns, scen_dur)?;
    let duration_ns = match t.get("duration") {
        Some(v) => Some(cx.duration(&f("duration"), v)?),
        None => None,
    };
    let on_ns = t.get("on").map(|v| cx.duration(&f("on"), v)).transpose()?;
    let off_ns = t
        .get("off")
        .map(|v| cx.duration(&f("off"), v))
        .transpose()?;
    if on_ns.is_some() != off_ns.is_some() {
        return Err(cx.err(&f("on"), "give both on and off periods, or neither"));
    }
    if on_ns == Some(0) {
        return Err(cx.err(&f("on"), "the on period must be above 0"));
    }
    let packet_size = match t.get("packet_size") {
        Some(toml::Value::Integer(i)) if (64..=1472).contains(i) => *i as u32,
        Some(v) => {
            return Err(cx.err(
                &f("packet_size"),
                format!("`{v}` is not a datagram size from 64 to 1472 bytes"),
            ))
        }
        None => 1200,
    };
    let weight = t
        .get("weight")
        .map(|v| cx.weight(&f("weight"), v))
        .transpose()?;
    Ok(CrossSpec {
        rate_bps,
        direction,
        start_ns,
        start_jitter_ns,
        duration_ns,
        on_ns,
        off_ns,
        packet_size,
        weight,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(s, "t.toml", Path::new("."))
    }

    #[test]
    fn a_full_scenario() {
        let s = parse(
            "name = \"x\"\nduration = \"30s\"\nrepetitions = 3\nseed = 9\n[link]\nrate = \"10mbit\"\nrtt = \"50ms\"\n[[flows]]\ncc = \"vegas:alpha=2,beta=4\"\ncount = 2\n[[flows]]\ncc = \"cubic\"\ndirection = \"upload\"\nstart = \"5s\"\nsize = \"10mb\"\nrate = \"1.5mbit\"\nmtu = 1250\n[[cross]]\nrate = \"2mbit\"\non = \"1s\"\noff = \"2s\"\n",
        )
        .unwrap();
        assert_eq!(
            (s.duration_ns, s.repetitions, s.seed, s.link.seed),
            (30_000_000_000, 3, 9, 9)
        );
        assert_eq!(s.expanded_flows().len(), 3);
        assert_eq!(s.flows[1].size, Some(10 * 1024 * 1024));
        assert_eq!(s.cross[0].on_ns, Some(1_000_000_000));
        assert_eq!(
            (s.flows[1].rate_bps, s.flows[1].mtu),
            (Some(1.5e6), Some(1250))
        );
        assert_eq!(s.flows[1].request_path(), "/upload?rate=1500000");
        assert_eq!(s.flows[0].request_path(), "/bytes/1000000000000");
        // Round trip through the resolved form.
        let back =
            Scenario::from_table(&s.to_toml(), &Ctx { source: "x" }, Path::new(".")).unwrap();
        assert_eq!(back, s);
    }

    #[test]
    fn start_jitter_offsets_are_per_seed_and_flow() {
        let s = parse(
            "duration = \"30s\"\n[[flows]]\ncc = \"cubic\"\nstart = \"2s\"\nstart_jitter = \"1s\"\ncount = 3\n[[flows]]\ncc = \"vegas\"\n[[cross]]\nrate = \"1mbit\"\nstart_jitter = \"500ms\"\n",
        )
        .unwrap();
        let j = s.flows[0].start_jitter_ns;
        assert_eq!(j, 1_000_000_000);
        let starts =
            |seed| -> Vec<u64> { s.rep_flows(seed).iter().map(|(_, f)| f.start_ns).collect() };
        // Deterministic per (seed, flow); in [start, start + jitter); each
        // flow of the group on its own; the unjittered group at its start.
        assert_eq!(starts(7), starts(7));
        for seed in 0..200 {
            let st = starts(seed);
            for &t in &st[..3] {
                assert!((2_000_000_000..3_000_000_000).contains(&t), "{t}");
            }
            assert_ne!(st[0], st[1]);
            assert_eq!(st[3], 0);
            let c = s.rep_cross(seed)[0].start_ns;
            assert!(c < 500_000_000, "{c}");
            assert_eq!(s.cross[0].start_in_rep(seed, 0), c);
            assert_eq!(s.flows[0].start_in_rep(seed, 1), st[1]);
        }
        // Another seed, other offsets; spread over the whole interval.
        assert_ne!(starts(7), starts(8));
        let offs: Vec<u64> = (0..1000)
            .map(|seed| jitter_offset_ns(j, seed, FLOW_JITTER_STREAM, 0))
            .collect();
        let mean = offs.iter().sum::<u64>() as f64 / offs.len() as f64 / j as f64;
        assert!(
            (mean - 0.5).abs() < 0.05,
            "mean offset {mean} of the jitter"
        );
        assert!(offs.iter().all(|&o| o < j));
        assert!(offs.iter().any(|&o| o < j / 10) && offs.iter().any(|&o| o > j * 9 / 10));
        // Tiny and huge spreads stay inside [0, jitter).
        for seed in 0..100 {
            assert_eq!(jitter_offset_ns(1, seed, FLOW_JITTER_STREAM, 3), 0);
            assert!(jitter_offset_ns(u64::MAX, seed, CROSS_JITTER_STREAM, 0) < u64::MAX);
        }
        // The run's scenario.toml keeps the field; duration counts from the
        // flow's own start.
        let back =
            Scenario::from_table(&s.to_toml(), &Ctx { source: "x" }, Path::new(".")).unwrap();
        assert_eq!(back, s);
        let (_, f) = &s.rep_flows(3)[0];
        assert_eq!(f.run_ns(s.duration_ns), 30_000_000_000 - f.start_ns);
        assert_eq!(f.start_jitter_ns, 0);
        // No jitter: exactly today's starts, and no field in the TOML.
        let plain =
            parse("[[flows]]\ncc = \"cubic\"\nstart = \"1s\"\nstart_jitter = \"0s\"\n").unwrap();
        assert_eq!(
            plain,
            parse("[[flows]]\ncc = \"cubic\"\nstart = \"1s\"\n").unwrap()
        );
        assert_eq!(plain.rep_flows(5)[0].1, plain.flows[0]);
        assert!(!toml::to_string(&plain.to_toml())
            .unwrap()
            .contains("start_jitter"));
    }

    #[test]
    fn weights_for_wfq() {
        let s = parse(
            "[link]\nrate = \"100mbit\"\nsched = \"wfq\"\n[[flows]]\ncc = \"cubic\"\nweight = 40\ncount = 2\n[[cross]]\nrate = \"80mbit\"\nweight = 60.5\n",
        )
        .unwrap();
        assert_eq!(s.class_weights(), vec![40.0, 40.0, 60.5]);
        let back =
            Scenario::from_table(&s.to_toml(), &Ctx { source: "x" }, Path::new(".")).unwrap();
        assert_eq!(back, s);
        // fq needs no weights; the flows' rates go into the request.
        let s =
            parse("[link]\nsched = \"fq\"\n[[flows]]\ncc = \"cubic\"\nrate = \"2mbit\"\n").unwrap();
        assert_eq!(
            s.flows[0].request_path(),
            "/bytes/1000000000000?rate=2000000"
        );
        let o = s
            .with_overrides(&[("link.sched".into(), "wfq".into())], "sweep")
            .unwrap_err();
        assert_eq!(o.field, "flows[0].weight");
    }

    #[test]
    fn overrides_for_sweeps() {
        let s = parse("[[flows]]\ncc = \"cubic\"\n").unwrap();
        let o = s
            .with_overrides(
                &[
                    ("link.rate".into(), "5mbit".into()),
                    ("link.rtt".into(), "100ms".into()),
                    ("flows.0.cc".into(), "vegas".into()),
                    ("duration".into(), "5s".into()),
                ],
                "sweep",
            )
            .unwrap();
        assert_eq!(
            (
                o.link.down.rate_bps,
                o.link.rtt_ns(),
                o.flows[0].cc.as_str()
            ),
            (5e6, 100_000_000, "vegas")
        );
        assert_eq!(o.duration_ns, 5_000_000_000);
        let e = s
            .with_overrides(&[("flows.3.cc".into(), "vegas".into())], "sweep")
            .unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
    }

    #[test]
    fn errors_name_file_field_and_allowed() {
        let cases = [
            ("durtion = \"5s\"", "durtion", "allowed: name, duration"),
            ("duration = \"5\"", "duration", "30s"),
            ("[[flows]]\ncc = \"nosuchcc\"", "flows[0].cc", "nosuchcc"),
            ("[[flows]]\ndirection = \"down\"", "flows[0].cc", "required"),
            (
                "[[flows]]\ncc = \"cubic\"\ndirection = \"sideways\"",
                "flows[0].direction",
                "download or upload",
            ),
            (
                "[[flows]]\ncc = \"cubic\"\ncount = 0",
                "flows[0].count",
                "1 to 200",
            ),
            (
                "[[flows]]\ncc = \"cubic\"\nsize = \"1mb\"\nduration = \"2s\"",
                "flows[0].size",
                "not both",
            ),
            (
                "duration = \"5s\"\n[[flows]]\ncc = \"cubic\"\nstart = \"6s\"",
                "flows[0].start",
                "before the scenario's end",
            ),
            ("[link]\nrate = \"fast\"", "link.rate", "fast"),
            (
                "[[cross]]\non = \"1s\"\nrate = \"1mbit\"",
                "cross[0].on",
                "both on and off",
            ),
            (
                "[[cross]]\nrate = \"1mbit\"\npacket_size = 9000",
                "cross[0].packet_size",
                "64 to 1472",
            ),
            ("repetitions = 0", "repetitions", "1 to 1000"),
            (
                "[link]\nsched = \"wfq\"\n[[flows]]\ncc = \"cubic\"\nweight = 1\n[[cross]]\nrate = \"1mbit\"",
                "cross[0].weight",
                "required because the link's sched is wfq",
            ),
            (
                "[link.down]\nsched = \"wfq\"\n[[flows]]\ncc = \"cubic\"",
                "flows[0].weight",
                "required",
            ),
            (
                "[[flows]]\ncc = \"cubic\"\nweight = 40",
                "flows[0].weight",
                "needs link.sched = \"wfq\"",
            ),
            (
                "[link]\nsched = \"wfq\"\n[[flows]]\ncc = \"cubic\"\nweight = 0",
                "flows[0].weight",
                "above 0",
            ),
            (
                "[link]\nsched = \"wfq\"\n[[flows]]\ncc = \"cubic\"\nweight = \"heavy\"",
                "flows[0].weight",
                "not a weight",
            ),
            (
                "[[flows]]\ncc = \"cubic\"\nmtu = 1100",
                "flows[0].mtu",
                "RFC 9000 §14",
            ),
            (
                "[[flows]]\ncc = \"cubic\"\nmtu = 9000",
                "flows[0].mtu",
                "1200 to 1500 bytes",
            ),
            (
                "[[flows]]\ncc = \"cubic\"\nmtu = \"1300\"",
                "flows[0].mtu",
                "1200 to 1500",
            ),
            (
                "[[flows]]\ncc = \"cubic\"\nrate = \"fast\"",
                "flows[0].rate",
                "such as 2mbit",
            ),
            (
                "[[flows]]\ncc = \"cubic\"\nrate = \"10bit\"",
                "flows[0].rate",
                "between 1kbit and 100gbit",
            ),
            (
                "duration = \"10s\"\n[[flows]]\ncc = \"cubic\"\nstart = \"4s\"\nstart_jitter = \"7s\"",
                "flows[0].start_jitter",
                "allowed: a time from 0 to 6s",
            ),
            (
                "[[flows]]\ncc = \"cubic\"\nstart_jitter = \"soon\"",
                "flows[0].start_jitter",
                "not a time",
            ),
            (
                "duration = \"10s\"\n[[cross]]\nrate = \"1mbit\"\nstart_jitter = \"11s\"",
                "cross[0].start_jitter",
                "at most the scenario's duration",
            ),
            ("flows = []", "flows", "at least one"),
            ("this is not toml", "(file)", "not valid TOML"),
        ];
        for (text, field, needle) in cases {
            let e = parse(text).unwrap_err();
            assert_eq!(e.field, field, "{text}: {e}");
            assert!(e.to_string().starts_with("t.toml: "), "{e}");
            assert!(e.to_string().contains(needle), "{text}: {e}");
        }
    }
}
