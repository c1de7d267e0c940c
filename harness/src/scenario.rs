//! Scenarios: a link, flows, cross traffic, a duration, repetitions and a
//! seed, read from TOML (`scenarios/*.toml`; `scenarios/reference.toml`
//! documents every field) or built from command-line flags.
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
    /// Bytes to move; `None`: until the flow's duration ends.
    pub size: Option<u64>,
    /// How long the flow runs, ns; `None`: until the scenario ends.
    pub duration_ns: Option<u64>,
    /// How many such flows.
    pub count: u32,
}

impl FlowSpec {
    /// One download of `cc` from the start to the end of the scenario.
    pub fn download(cc: impl Into<String>) -> FlowSpec {
        FlowSpec {
            cc: cc.into(),
            direction: Direction::Download,
            start_ns: 0,
            size: None,
            duration_ns: None,
            count: 1,
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

    /// The HTTP path the client asks for: `/bytes/N` or `/upload`.
    pub fn request_path(&self) -> String {
        match self.direction {
            Direction::Download => format!("/bytes/{}", self.bytes()),
            Direction::Upload => "/upload".to_string(),
        }
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
    /// How long, ns; `None`: until the scenario ends.
    pub duration_ns: Option<u64>,
    /// On period, ns (with `off_ns`: alternate).
    pub on_ns: Option<u64>,
    /// Off period, ns.
    pub off_ns: Option<u64>,
    /// Datagram size, bytes.
    pub packet_size: u32,
}

impl CrossSpec {
    /// Whether the source sends `since_ns` after its start (on/off periods).
    pub fn is_on(&self, since_ns: u64) -> bool {
        match (self.on_ns, self.off_ns) {
            (Some(on), Some(off)) => since_ns % (on + off) < on,
            _ => true,
        }
    }
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
const FLOW: &[&str] = &["cc", "direction", "start", "size", "duration", "count"];
const CROSS: &[&str] = &[
    "rate",
    "direction",
    "start",
    "duration",
    "on",
    "off",
    "packet_size",
];

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
        Ok(s)
    }

    /// Every flow, expanded by `count`, with its group index.
    pub fn expanded_flows(&self) -> Vec<(usize, &FlowSpec)> {
        self.flows
            .iter()
            .enumerate()
            .flat_map(|(g, f)| std::iter::repeat_n((g, f), f.count as usize))
            .collect()
    }

    /// The data of the qlog `simulation:scenario` event both ends of a
    /// run write at the start of their trace: the backend, the link as
    /// resolved (with this repetition's seed) and the flows.
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
            "flows": self.expanded_flows().iter().map(|(_, f)| serde_json::json!({
                "cc": f.cc,
                "direction": f.direction.as_str(),
                "start_s": f.start_ns as f64 / 1e9,
                "size": f.size,
            })).collect::<Vec<_>>(),
            "cross": self.cross.iter().map(|c| serde_json::json!({
                "rate_bps": c.rate_bps,
                "direction": c.direction.as_str(),
                "start_s": c.start_ns as f64 / 1e9,
            })).collect::<Vec<_>>(),
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
                if let Some(sz) = f.size {
                    ft.insert("size".into(), format!("{sz}b").into());
                }
                if let Some(d) = f.duration_ns {
                    ft.insert("duration".into(), format_duration_ns(d).into());
                }
                ft.insert("count".into(), toml::Value::Integer(f.count as i64));
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
    Ok(FlowSpec {
        cc,
        direction,
        start_ns,
        size,
        duration_ns,
        count,
    })
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
    Ok(CrossSpec {
        rate_bps,
        direction,
        start_ns,
        duration_ns,
        on_ns,
        off_ns,
        packet_size,
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
            "name = \"x\"\nduration = \"30s\"\nrepetitions = 3\nseed = 9\n[link]\nrate = \"10mbit\"\nrtt = \"50ms\"\n[[flows]]\ncc = \"vegas:alpha=2,beta=4\"\ncount = 2\n[[flows]]\ncc = \"cubic\"\ndirection = \"upload\"\nstart = \"5s\"\nsize = \"10mb\"\n[[cross]]\nrate = \"2mbit\"\non = \"1s\"\noff = \"2s\"\n",
        )
        .unwrap();
        assert_eq!(
            (s.duration_ns, s.repetitions, s.seed, s.link.seed),
            (30_000_000_000, 3, 9, 9)
        );
        assert_eq!(s.expanded_flows().len(), 3);
        assert_eq!(s.flows[1].size, Some(10 * 1024 * 1024));
        assert_eq!(s.cross[0].on_ns, Some(1_000_000_000));
        // Round trip through the resolved form.
        let back =
            Scenario::from_table(&s.to_toml(), &Ctx { source: "x" }, Path::new(".")).unwrap();
        assert_eq!(back, s);
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
            ("[[flows]]\ncc = \"tahoe\"", "flows[0].cc", "tahoe"),
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
