//! Reading a scenario from TOML: every field checked, every error naming
//! the file, the field and what is allowed.

use quic_app::transport::{AckPolicy, Pacing, SmallPackets, Transport};
use std::path::Path;

use cc_algorithms::units::parse_rate;

use super::{CrossSpec, Direction, FlowSpec, Scenario, ScenarioError, MAX_MTU, MIN_MTU};
use crate::link::units::{format_duration_ns, parse_duration_ns, parse_size_bytes};
use crate::link::{LinkError, LinkSpec};
use link_model::topology::Topology;

const TOP: &[&str] = &[
    "name",
    "duration",
    "repetitions",
    "seed",
    "link",
    "flows",
    "cross",
    "host",
    "links",
    "topology",
    "arrivals",
];
const ARRIVALS: &[&str] = &["cc", "rate", "size", "from", "until", "direction"];
const FLOW: &[&str] = &[
    "cc",
    "direction",
    "start",
    "start_jitter",
    "size",
    "duration",
    "requests",
    "think",
    "count",
    "rate",
    "mtu",
    "weight",
    "ack_policy",
    "small_packets",
    "pacing",
    "path",
    "rtt",
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
    "path",
];

pub(super) struct Ctx<'a> {
    pub(super) source: &'a str,
}

impl Ctx<'_> {
    pub(super) fn err(&self, field: &str, problem: impl Into<String>) -> ScenarioError {
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

impl Scenario {
    /// A scenario from its TOML table; `base` resolves relative trace
    /// paths.
    pub(super) fn from_table(
        t: &toml::Table,
        cx: &Ctx,
        base: &Path,
    ) -> Result<Scenario, ScenarioError> {
        cx.check_keys("", t, TOP)?;
        let mut s = Scenario {
            flows: Vec::new(),
            ..Scenario::default()
        };
        s.top_fields(t, cx)?;
        let (link, template) = link(t, cx, base, s.seed)?;
        s.link = link;
        s.links = Topology::from_toml(&template, t.get("links"), t.get("topology"), base)
            .map_err(|e| link_err(cx.source, e))?;
        let dur = s.duration_ns;
        s.link
            .check_schedule("link", dur)
            .map_err(|e| link_err(cx.source, e))?;
        for (i, l) in s.links.iter().flat_map(|t| t.links.iter()).enumerate() {
            l.spec
                .check_schedule(&format!("links[{i}]"), dur)
                .map_err(|e| link_err(cx.source, e))?;
        }
        s.flows = match t.get("flows") {
            Some(v) => {
                let link = s.link.clone();
                each(cx, "flows", v, |e| flow(&e, dur, &link))?
            }
            None => Scenario::default().flows,
        };
        if let Some(v) = t.get("arrivals") {
            let link = s.link.clone();
            let seed = s.seed;
            for group in each(cx, "arrivals", v, |e| arrivals(&e, dur, &link, seed, base))? {
                s.flows.extend(group);
            }
        }
        if s.flows.is_empty() {
            return Err(cx.err("flows", "a scenario needs at least one flow"));
        }
        if let Some(v) = t.get("cross") {
            s.cross = each(cx, "cross", v, |e| cross(&e, dur))?;
        }
        if let Some(v) = t.get("host") {
            s.host = host(cx, v)?;
        }
        let total: u32 = s.flows.iter().map(|f| f.count).sum();
        if total > 200 {
            return Err(cx.err("flows", format!("{total} flows in all; at most 200")));
        }
        s.check_weights(cx)?;
        s.try_routes(cx.source)?;
        Ok(s)
    }

    /// `name`, `duration`, `repetitions` and `seed`.
    fn top_fields(&mut self, t: &toml::Table, cx: &Ctx) -> Result<(), ScenarioError> {
        if let Some(v) = t.get("name") {
            self.name = cx.text("name", v)?;
        }
        if let Some(v) = t.get("duration") {
            self.duration_ns = cx.duration("duration", v)?;
            if self.duration_ns == 0 || self.duration_ns > 86_400_000_000_000 {
                return Err(cx.err("duration", "must be above 0 and at most a day"));
            }
        }
        if let Some(v) = t.get("repetitions") {
            self.repetitions = cx.count("repetitions", v, 1000)?;
        }
        if let Some(v) = t.get("seed") {
            self.seed = match v {
                toml::Value::Integer(i) if *i >= 0 => *i as u64,
                _ => return Err(cx.err("seed", format!("`{v}` is not a non-negative integer"))),
            };
        }
        Ok(())
    }

    /// `weight` is required on every flow and cross source when a link
    /// direction schedules by `wfq`, and meaningless otherwise.
    fn check_weights(&self, cx: &Ctx) -> Result<(), ScenarioError> {
        let wfq = match &self.links {
            Some(t) => t.links.iter().any(|l| l.spec.is_weighted()),
            None => self.link.is_weighted(),
        };
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
}

/// `[link]` (or `link = "BACKEND"`: the default link on that backend),
/// seeded with the scenario's `seed` unless it has its own.
/// `[host]`: the simulated hosts' timer slack and packet protection.
fn host(cx: &Ctx, v: &toml::Value) -> Result<super::HostModel, ScenarioError> {
    let toml::Value::Table(t) = v else {
        return Err(cx.err(
            "host",
            "expected a table ([host]) with timer_slack, wake_latency and/or protection",
        ));
    };
    cx.check_keys("host.", t, &["timer_slack", "wake_latency", "protection"])?;
    let mut h = super::HostModel::default();
    if let Some(v) = t.get("wake_latency") {
        let ns = cx.duration("host.wake_latency", v)?;
        if ns > super::MAX_WAKE_LATENCY_NS {
            return Err(cx.err(
                "host.wake_latency",
                format!(
                    "{} is more than {}: a host that slow to wake is not modelled",
                    format_duration_ns(ns),
                    format_duration_ns(super::MAX_WAKE_LATENCY_NS)
                ),
            ));
        }
        h.wake_latency_ns = ns;
    }
    if let Some(v) = t.get("protection") {
        let name = v.as_str().unwrap_or_default();
        h.protection = super::Protection::parse(name).ok_or_else(|| {
            cx.err(
                "host.protection",
                format!(
                    "{v} is not a packet protection; expected one of: {}",
                    super::Protection::NAMES.join(", ")
                ),
            )
        })?;
    }
    if let Some(v) = t.get("timer_slack") {
        let ns = cx.duration("host.timer_slack", v)?;
        if ns > super::MAX_TIMER_SLACK_NS {
            return Err(cx.err(
                "host.timer_slack",
                format!(
                    "{} is more than {}: a timer that late is not a host's slack",
                    format_duration_ns(ns),
                    format_duration_ns(super::MAX_TIMER_SLACK_NS)
                ),
            ));
        }
        h.timer_slack_ns = ns;
    }
    Ok(h)
}

/// Returns the link and its table as given (the defaults of `[[links]]`).
fn link(
    t: &toml::Table,
    cx: &Ctx,
    base: &Path,
    seed: u64,
) -> Result<(LinkSpec, toml::Table), ScenarioError> {
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
        link_table.insert("seed".into(), toml::Value::Integer(seed as i64));
    }
    let spec =
        LinkSpec::from_toml(&link_table, base, "link").map_err(|e| link_err(cx.source, e))?;
    Ok((spec, link_table))
}

/// Each table of the array `key` (`[[key]]`), read by `one`.
fn each<T>(
    cx: &Ctx,
    key: &str,
    v: &toml::Value,
    one: impl Fn(Entry) -> Result<T, ScenarioError>,
) -> Result<Vec<T>, ScenarioError> {
    let items = v
        .as_array()
        .ok_or_else(|| cx.err(key, format!("expected an array of tables ([[{key}]])")))?;
    let mut out = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let p = format!("{key}[{i}].");
        let t = item.as_table().ok_or_else(|| {
            cx.err(
                &format!("{key}[{i}]"),
                format!("expected a table ([[{key}]])"),
            )
        })?;
        out.push(one(Entry {
            t,
            cx,
            p: &p,
            index: i,
        })?);
    }
    Ok(out)
}

/// One `[[flows]]` or `[[cross]]` table, and the prefix of its fields'
/// names in errors (`flows[0].`).
struct Entry<'a> {
    t: &'a toml::Table,
    cx: &'a Ctx<'a>,
    p: &'a str,
    /// Its place in the array.
    index: usize,
}

impl Entry<'_> {
    /// Field `k`'s name in errors.
    fn field(&self, k: &str) -> String {
        format!("{}{k}", self.p)
    }

    fn err(&self, k: &str, problem: impl Into<String>) -> ScenarioError {
        self.cx.err(&self.field(k), problem)
    }

    /// An optional time.
    fn duration(&self, k: &str) -> Result<Option<u64>, ScenarioError> {
        self.t
            .get(k)
            .map(|v| self.cx.duration(&self.field(k), v))
            .transpose()
    }

    /// `direction`: download (default) or upload.
    fn direction(&self) -> Result<Direction, ScenarioError> {
        let Some(v) = self.t.get("direction") else {
            return Ok(Direction::Download);
        };
        let s = self.cx.text(&self.field("direction"), v)?;
        Direction::parse(&s)
            .ok_or_else(|| self.err("direction", format!("`{s}` is not download or upload")))
    }

    /// `rate`, from 1 kbit/s to 100 Gbit/s; `problem` says what else it
    /// could be.
    fn rate(&self, problem: impl Fn(&str) -> String) -> Result<Option<f64>, ScenarioError> {
        let Some(v) = self.t.get("rate") else {
            return Ok(None);
        };
        let s = self.cx.text(&self.field("rate"), v)?;
        parse_rate(&s)
            .filter(|r| *r >= 1000.0 && *r <= 1e11)
            .map(Some)
            .ok_or_else(|| self.err("rate", problem(&s)))
    }

    /// `weight`, under `sched = "wfq"`.
    /// `ack_policy` (default `immediate`, quiche's own).
    fn ack_policy(&self) -> Result<AckPolicy, ScenarioError> {
        let Some(v) = self.t.get("ack_policy") else {
            return Ok(AckPolicy::Immediate);
        };
        let s = self.cx.text(&self.field("ack_policy"), v)?;
        AckPolicy::parse(&s).map_err(|e| self.err("ack_policy", e))
    }

    /// `small_packets` (default `avoid`; `allow` is quiche's own).
    fn small_packets(&self) -> Result<SmallPackets, ScenarioError> {
        let Some(v) = self.t.get("small_packets") else {
            return Ok(Transport::default().small_packets);
        };
        let s = self.cx.text(&self.field("small_packets"), v)?;
        SmallPackets::parse(&s).map_err(|e| self.err("small_packets", e))
    }

    /// `pacing` (default `on`; `off` sends as soon as the window has
    /// room; `true`/`false` too; `on:credit=1ms,min=2` bounds the burst a
    /// late sender may make up differently from the default).
    fn pacing(&self) -> Result<Pacing, ScenarioError> {
        let Some(v) = self.t.get("pacing") else {
            return Ok(Transport::default().pacing);
        };
        let s = match v {
            toml::Value::Boolean(b) => b.to_string(),
            v => self.cx.text(&self.field("pacing"), v)?,
        };
        Pacing::parse(&s).map_err(|e| self.err("pacing", e))
    }

    /// `path`: the names of the links crossed, client to server (an array
    /// of names, or one name).
    fn path(&self) -> Result<Option<Vec<String>>, ScenarioError> {
        let Some(v) = self.t.get("path") else {
            return Ok(None);
        };
        let bad = || {
            self.err(
                "path",
                format!("`{v}` is not a list of link names such as [\"l1\", \"l2\"]"),
            )
        };
        match v {
            toml::Value::String(s) => Ok(Some(vec![s.clone()])),
            toml::Value::Array(a) => a
                .iter()
                .map(|x| x.as_str().map(str::to_string).ok_or_else(bad))
                .collect::<Result<Vec<_>, _>>()
                .map(Some),
            _ => Err(bad()),
        }
    }

    fn weight(&self) -> Result<Option<f64>, ScenarioError> {
        self.t
            .get("weight")
            .map(|v| self.cx.weight(&self.field("weight"), v))
            .transpose()
    }

    /// `start_jitter`: a time from 0 to what is left of the scenario after
    /// `start`, so every start falls before the end.
    fn start_jitter(&self, start_ns: u64, scen_dur: u64) -> Result<u64, ScenarioError> {
        let Some(j) = self.duration("start_jitter")? else {
            return Ok(0);
        };
        let left = scen_dur - start_ns;
        if j > left {
            return Err(self.err(
                "start_jitter",
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
}

/// `cc` with a table of tuned parameters (`ALG:table=FILE`, for an
/// algorithm that does not read its table itself) replaced by the entry
/// nearest to the link's condition in the flow's data direction, then
/// checked by the registry.
fn resolve_cc(cc: &str, link: &LinkSpec, direction: Direction) -> Result<String, String> {
    let dir = match direction {
        Direction::Download => &link.down,
        Direction::Upload => &link.up,
    };
    let rtt_ms = (link.up.delay_ns + link.down.delay_ns) as f64 / 1e6;
    let loss = Some(dir.loss.mean_rate()).filter(|l| *l > 0.0);
    let cc = cc_algorithms::registry::resolve_spec(cc, rtt_ms, dir.rate_bps, loss)?;
    cc_algorithms::parse(&cc).map_err(|x| x.to_string())?;
    Ok(cc)
}

/// One `[[arrivals]]` entry, in a scenario of `scen_dur` ns on `link`
/// with seed `seed`: its flows, one per arrival ([`super::arrivals`]; the
/// entry's place in the array is its random stream).
fn arrivals(
    e: &Entry,
    scen_dur: u64,
    link: &LinkSpec,
    seed: u64,
    base: &Path,
) -> Result<Vec<FlowSpec>, ScenarioError> {
    use super::arrivals::{ArrivalSpec, SizeDist, SIZE_FORMS};
    e.cx.check_keys(e.p, e.t, ARRIVALS)?;
    // The algorithm and direction are checked as a flow's are.
    let mut t = toml::Table::new();
    for k in ["cc", "direction"] {
        if let Some(v) = e.t.get(k) {
            t.insert(k.into(), v.clone());
        }
    }
    let template = flow(
        &Entry {
            t: &t,
            cx: e.cx,
            p: e.p,
            index: e.index,
        },
        scen_dur,
        link,
    )?;
    let rate_per_s = match e.t.get("rate") {
        Some(toml::Value::Integer(i)) if *i > 0 => *i as f64,
        Some(toml::Value::Float(f)) if f.is_finite() && *f > 0.0 => *f,
        Some(v) => {
            return Err(e.err(
                "rate",
                format!("`{v}` is not a positive number of arrivals per second, such as 2 or 0.5"),
            ))
        }
        None => return Err(e.err("rate", "required: arrivals per second, such as 2")),
    };
    let size = match e.t.get("size") {
        Some(v) => {
            let text = e.cx.text(&e.field("size"), v)?;
            SizeDist::parse(&text, base).map_err(|x| e.err("size", x))?
        }
        None => return Err(e.err("size", format!("required: one of {SIZE_FORMS}"))),
    };
    let from_ns = e.duration("from")?.unwrap_or(0);
    let until_ns = e.duration("until")?.unwrap_or(scen_dur);
    if from_ns >= until_ns || until_ns > scen_dur {
        return Err(e.err(
            "until",
            format!(
                "the window {}..{} is empty or ends after the scenario ({}); allowed: from < until <= duration",
                format_duration_ns(from_ns),
                format_duration_ns(until_ns),
                format_duration_ns(scen_dur)
            ),
        ));
    }
    let spec = ArrivalSpec {
        rate_per_s,
        size,
        from_ns,
        until_ns,
    };
    let drawn = spec.draw(seed, e.index as u64, 200);
    if drawn.len() > 200 {
        return Err(e.err(
            "rate",
            format!(
                "{rate_per_s}/s over {} draws more than 200 flows; a scenario has at most 200",
                format_duration_ns(until_ns - from_ns)
            ),
        ));
    }
    Ok(drawn
        .into_iter()
        .map(|(start_ns, bytes)| FlowSpec {
            start_ns,
            size: Some(bytes),
            ..template.clone()
        })
        .collect())
}

/// One `[[flows]]` entry, in a scenario of `scen_dur` ns on `link`.
fn flow(e: &Entry, scen_dur: u64, link: &LinkSpec) -> Result<FlowSpec, ScenarioError> {
    e.cx.check_keys(e.p, e.t, FLOW)?;
    let cc = match e.t.get("cc") {
        Some(v) => e.cx.text(&e.field("cc"), v)?,
        None => {
            return Err(e.err(
                "cc",
                "required: an algorithm spec, NAME or NAME:KEY=VALUE,... (`cclab list` shows the algorithms)",
            ))
        }
    };
    let direction = e.direction()?;
    let cc = match super::tcp::tcp_name(&cc) {
        Some(name) => tcp_cc(e, &cc, name, link)?,
        None => resolve_cc(&cc, link, direction).map_err(|x| e.err("cc", x))?,
    };
    let start_ns = e.duration("start")?.unwrap_or(0);
    if start_ns >= scen_dur {
        return Err(e.err(
            "start",
            format!(
                "{} is not before the scenario's end ({})",
                format_duration_ns(start_ns),
                format_duration_ns(scen_dur)
            ),
        ));
    }
    let start_jitter_ns = e.start_jitter(start_ns, scen_dur)?;
    let size = size(e)?;
    let duration_ns = e.duration("duration")?.filter(|&d| d > 0);
    if size.is_some() && duration_ns.is_some() {
        return Err(e.err("size", "give size or duration, not both"));
    }
    let count = match e.t.get("count") {
        Some(v) => e.cx.count(&e.field("count"), v, 200)?,
        None => 1,
    };
    let requests = match e.t.get("requests") {
        Some(v) => e.cx.count(&e.field("requests"), v, 1000)?,
        None => 1,
    };
    if requests > 1 && size.is_none() {
        return Err(e.err(
            "requests",
            "several requests need a size for each (a timed flow makes one request)",
        ));
    }
    let think_ns = e.duration("think")?.unwrap_or(0);
    if think_ns > 0 && requests < 2 {
        return Err(e.err(
            "think",
            "the pause between requests needs requests = 2 or more",
        ));
    }
    if think_ns > quic_app::MAX_THINK.as_nanos() as u64 {
        return Err(e.err(
            "think",
            format!(
                "at most {}s (the connection is idle meanwhile, and closes after {} s idle)",
                quic_app::MAX_THINK.as_secs(),
                quic_app::IDLE_TIMEOUT.as_secs()
            ),
        ));
    }
    let rate_bps = e.rate(|s| format!("`{s}` is not a rate between 1kbit and 100gbit, such as 2mbit or 500kbit (the rate at which the sending application writes)"))?;
    Ok(FlowSpec {
        cc,
        direction,
        start_ns,
        start_jitter_ns,
        size,
        duration_ns,
        requests,
        think_ns,
        count,
        rate_bps,
        mtu: mtu(e)?,
        weight: e.weight()?,
        transport: Transport {
            ack: e.ack_policy()?,
            small_packets: e.small_packets()?,
            pacing: e.pacing()?,
        },
        path: e.path()?,
        rtt_ns: match e.duration("rtt")? {
            Some(0) => return Err(e.err("rtt", "must be above 0")),
            r => r,
        },
    })
}

/// A Linux TCP flow's `cc` (`tcp:NAME`, trimmed), refused where it cannot
/// run: a name the kernel lacks, the simulator, QUIC's own knobs
/// ([`super::tcp::QUIC_ONLY_FIELDS`]).
fn tcp_cc(e: &Entry, spec: &str, name: &str, link: &LinkSpec) -> Result<String, ScenarioError> {
    let spec = spec.trim();
    super::tcp::check_name(spec, name).map_err(|x| e.err("cc", x))?;
    if let Some(p) = link.backend.tcp_flow_problem(spec) {
        return Err(e.err("cc", p));
    }
    for (field, why) in super::tcp::QUIC_ONLY_FIELDS {
        if e.t.contains_key(*field) {
            return Err(e.err(
                field,
                format!("the flow is Linux TCP (`{spec}`), and `{field}` is a QUIC flow's: {why}; remove it from this flow"),
            ));
        }
    }
    Ok(spec.to_string())
}

/// A flow's `size`, bytes.
fn size(e: &Entry) -> Result<Option<u64>, ScenarioError> {
    let Some(v) = e.t.get("size") else {
        return Ok(None);
    };
    let s = e.cx.text(&e.field("size"), v)?;
    parse_size_bytes(&s)
        .filter(|&b| b > 0)
        .map(Some)
        .ok_or_else(|| {
            e.err(
                "size",
                format!("`{s}` is not a size such as 10mb, 500kb or 1000000"),
            )
        })
}

/// A flow's `mtu`, from [`MIN_MTU`] to [`MAX_MTU`].
fn mtu(e: &Entry) -> Result<Option<u16>, ScenarioError> {
    match e.t.get("mtu") {
        Some(toml::Value::Integer(i)) if (MIN_MTU as i64..=MAX_MTU as i64).contains(i) => {
            Ok(Some(*i as u16))
        }
        Some(v) => Err(e.err(
            "mtu",
            format!("`{v}` is not a UDP payload size from {MIN_MTU} to {MAX_MTU} bytes; QUIC (RFC 9000 §14) does not allow UDP payloads below 1200 bytes"),
        )),
        None => Ok(None),
    }
}

/// One `[[cross]]` entry, in a scenario of `scen_dur` ns.
fn cross(e: &Entry, scen_dur: u64) -> Result<CrossSpec, ScenarioError> {
    e.cx.check_keys(e.p, e.t, CROSS)?;
    let rate_bps = e
        .rate(|s| format!("`{s}` is not a rate such as 5mbit"))?
        .ok_or_else(|| e.err("rate", "required: the cross traffic's rate, such as 5mbit"))?;
    let direction = e.direction()?;
    let start_ns = e.duration("start")?.unwrap_or(0);
    if start_ns >= scen_dur {
        return Err(e.err("start", "is not before the scenario's end"));
    }
    let start_jitter_ns = e.start_jitter(start_ns, scen_dur)?;
    let duration_ns = e.duration("duration")?;
    let on_ns = e.duration("on")?;
    let off_ns = e.duration("off")?;
    if on_ns.is_some() != off_ns.is_some() {
        return Err(e.err("on", "give both on and off periods, or neither"));
    }
    if on_ns == Some(0) {
        return Err(e.err("on", "the on period must be above 0"));
    }
    let packet_size = match e.t.get("packet_size") {
        Some(toml::Value::Integer(i)) if (64..=1472).contains(i) => *i as u32,
        Some(v) => {
            return Err(e.err(
                "packet_size",
                format!("`{v}` is not a datagram size from 64 to 1472 bytes"),
            ))
        }
        None => 1200,
    };
    Ok(CrossSpec {
        rate_bps,
        direction,
        start_ns,
        start_jitter_ns,
        duration_ns,
        on_ns,
        off_ns,
        packet_size,
        weight: e.weight()?,
        path: e.path()?,
    })
}
