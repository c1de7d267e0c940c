//! The `[link]` table: reading it (every field checked, errors naming
//! the field, the value and what is allowed), building it from
//! command-line pairs, and writing the fully resolved form back.

use std::path::Path;

use super::units::{format_rate, parse_rate};

use super::units::{format_duration_ns, parse_duration_ns, parse_probability};
use super::{
    err, format_prob, scalar, Aqm, Backend, DirectionSpec, JitterDistribution, LinkError, LinkSpec,
    LossModel, Sched, Trace,
};
use super::{Aggregation, Policer};

const DIRECTION_KEYS: &[&str] = &[
    "rate",
    "trace",
    "delay",
    "jitter",
    "jitter_distribution",
    "loss",
    "duplicate",
    "reorder",
    "queue",
    "aqm",
    "sched",
    "changes",
    "policer",
    "aggregate",
];
const TOP_KEYS: &[&str] = &["backend", "rtt", "seed", "up", "down"];

impl LinkSpec {
    /// Parses the `[link]` table of a scenario. `base` resolves relative
    /// trace paths; `prefix` names the table in errors (`link`).
    pub fn from_toml(
        table: &toml::Table,
        base: &Path,
        prefix: &str,
    ) -> Result<LinkSpec, LinkError> {
        for k in table.keys() {
            if !TOP_KEYS.contains(&k.as_str()) && !DIRECTION_KEYS.contains(&k.as_str()) {
                return Err(err(
                    &format!("{prefix}.{k}"),
                    format!(
                        "unknown field; allowed: {}, {}",
                        TOP_KEYS.join(", "),
                        DIRECTION_KEYS.join(", ")
                    ),
                ));
            }
        }
        let mut spec = LinkSpec::default();
        spec.apply_top(table, prefix)?;
        // Top-level direction keys apply to both; then each override.
        let mut dirs = [spec.up.clone(), spec.down.clone()];
        for d in &mut dirs {
            apply_direction(d, table, base, prefix)?;
        }
        for (i, name) in ["up", "down"].iter().enumerate() {
            if let Some(v) = table.get(*name) {
                let f = format!("{prefix}.{name}");
                let t = v
                    .as_table()
                    .ok_or_else(|| err(&f, "expected a table such as [link.up]"))?;
                for k in t.keys() {
                    if !DIRECTION_KEYS.contains(&k.as_str()) {
                        return Err(err(
                            &format!("{f}.{k}"),
                            format!("unknown field; allowed: {}", DIRECTION_KEYS.join(", ")),
                        ));
                    }
                }
                apply_direction(&mut dirs[i], t, base, &f)?;
            }
        }
        let [up, down] = dirs;
        spec.up = up;
        spec.down = down;
        Ok(spec)
    }

    /// `backend`, `seed`, and `rtt` (split evenly between the directions).
    fn apply_top(&mut self, table: &toml::Table, prefix: &str) -> Result<(), LinkError> {
        if let Some(v) = table.get("backend") {
            let f = format!("{prefix}.backend");
            let s = scalar(&f, v)?;
            self.backend = Backend::parse(&s)
                .ok_or_else(|| err(&f, format!("`{s}` is not one of auto, emu, netem, sim")))?;
        }
        if let Some(v) = table.get("seed") {
            let f = format!("{prefix}.seed");
            self.seed = match v {
                toml::Value::Integer(i) if *i >= 0 => *i as u64,
                _ => return Err(err(&f, format!("`{v}` is not a non-negative integer"))),
            };
        }
        if table.contains_key("rtt") && table.contains_key("delay") {
            return Err(err(
                &format!("{prefix}.rtt"),
                "give either rtt (split evenly) or delay (one-way), not both",
            ));
        }
        if let Some(v) = table.get("rtt") {
            let f = format!("{prefix}.rtt");
            let s = scalar(&f, v)?;
            let rtt = parse_duration_ns(&s).ok_or_else(|| {
                err(
                    &f,
                    format!("`{s}` is not a time such as 40ms, 1.5s or 250us"),
                )
            })?;
            self.up.delay_ns = rtt / 2;
            self.down.delay_ns = rtt - rtt / 2;
        }
        Ok(())
    }

    /// Builds a link from `key=value` pairs, as command-line flags give
    /// them (`rate=20mbit`, `rtt=40ms`, `up.rate=5mbit`, ...).
    pub fn from_pairs<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        base: &Path,
    ) -> Result<LinkSpec, LinkError> {
        let mut table = toml::Table::new();
        for (k, v) in pairs {
            let value = if k == "seed" {
                match v.trim().parse::<i64>() {
                    Ok(i) => toml::Value::Integer(i),
                    Err(_) => toml::Value::String(v.to_string()),
                }
            } else {
                toml::Value::String(v.to_string())
            };
            if let Some((dir, key)) = k.split_once('.') {
                let sub = table
                    .entry(dir.to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                if let Some(t) = sub.as_table_mut() {
                    t.insert(key.to_string(), value);
                }
            } else {
                table.insert(k.to_string(), value);
            }
        }
        LinkSpec::from_toml(&table, base, "link")
    }

    /// The fully resolved description, every field explicit, as a TOML
    /// table that [`LinkSpec::from_toml`] reads back to the same spec.
    pub fn to_toml(&self) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("backend".into(), self.backend.as_str().into());
        t.insert("seed".into(), toml::Value::Integer(self.seed as i64));
        for (name, d) in [("up", &self.up), ("down", &self.down)] {
            t.insert(name.into(), toml::Value::Table(direction_toml(d)));
        }
        t
    }

    /// One line for people: the down direction's rate (or trace), the
    /// round-trip delay, queue, AQM and loss, and the up direction's where
    /// it differs.
    pub fn describe(&self) -> String {
        let one = |d: &DirectionSpec| {
            let t = direction_toml(d);
            let g = |k: &str| t.get(k).and_then(|v| v.as_str()).unwrap_or("").to_string();
            let cap = if d.trace.is_some() {
                format!("trace {}", g("trace"))
            } else {
                g("rate")
            };
            let mut s = format!("{cap}, queue {}, {}", g("queue"), g("aqm"));
            if d.loss != crate::link::LossModel::None {
                s.push_str(&format!(", loss {}", g("loss")));
            }
            if let Some(p) = d.policer {
                s.push_str(&format!(", policer {}", p.to_spec()));
            }
            if let Some(a) = d.aggregate {
                s.push_str(&format!(", aggregate {}", a.to_spec()));
            }
            match d.changes.len() {
                0 => {}
                1 => s.push_str(", 1 scheduled change"),
                n => s.push_str(&format!(", {n} scheduled changes")),
            }
            s
        };
        let (down, up) = (one(&self.down), one(&self.up));
        let rtt = format_duration_ns(self.rtt_ns());
        if down == up {
            format!("{down}, RTT {rtt}")
        } else {
            format!("down {down}; up {up}; RTT {rtt}")
        }
    }
}

/// One direction, every field explicit.
fn direction_toml(d: &DirectionSpec) -> toml::Table {
    let mut dt = toml::Table::new();
    match &d.trace {
        Some(tr) => {
            dt.insert("trace".into(), tr.path.display().to_string().into());
        }
        None => {
            dt.insert("rate".into(), format_rate(d.rate_bps).into());
        }
    }
    dt.insert("delay".into(), format_duration_ns(d.delay_ns).into());
    dt.insert("jitter".into(), format_duration_ns(d.jitter_ns).into());
    dt.insert(
        "jitter_distribution".into(),
        d.jitter_distribution.as_str().into(),
    );
    dt.insert("loss".into(), d.loss.to_spec().into());
    dt.insert("duplicate".into(), format_prob(d.duplicate).into());
    dt.insert("reorder".into(), format_prob(d.reorder).into());
    dt.insert("queue".into(), d.queue.to_spec().into());
    dt.insert("aqm".into(), d.aqm.to_spec().into());
    dt.insert("sched".into(), d.sched.as_str().into());
    // Written only when set, so links without them read as they did.
    if let Some(p) = d.policer {
        dt.insert("policer".into(), p.to_spec().into());
    }
    if let Some(a) = d.aggregate {
        dt.insert("aggregate".into(), a.to_spec().into());
    }
    if !d.changes.is_empty() {
        let a: Vec<toml::Value> = d
            .changes
            .iter()
            .map(|c| toml::Value::Table(c.to_toml()))
            .collect();
        dt.insert("changes".into(), toml::Value::Array(a));
    }
    dt
}

/// The fields of one `[link]` (or `[link.up]`, `[link.down]`) table, as
/// text, each with its name in errors.
struct Fields<'a> {
    t: &'a toml::Table,
    prefix: &'a str,
}

impl Fields<'_> {
    /// Field `k`'s text and its name in errors, if it is there.
    fn get(&self, k: &str) -> Result<Option<(String, String)>, LinkError> {
        let f = format!("{}.{k}", self.prefix);
        match self.t.get(k) {
            Some(v) => Ok(Some((scalar(&f, v)?, f))),
            None => Ok(None),
        }
    }
}

/// Applies the direction fields of `t` to `d`; `prefix` names them in
/// errors, `base` resolves trace paths.
fn apply_direction(
    d: &mut DirectionSpec,
    t: &toml::Table,
    base: &Path,
    prefix: &str,
) -> Result<(), LinkError> {
    let f = Fields { t, prefix };
    apply_capacity(d, &f, base)?;
    apply_delay(d, &f)?;
    apply_impairments(d, &f)?;
    apply_queue(d, &f)?;
    if let Some((s, f)) = f.get("policer")? {
        d.policer = Policer::parse(&f, &s)?;
    }
    if let Some((s, f)) = f.get("aggregate")? {
        d.aggregate = Aggregation::parse(&f, &s)?;
    }
    if let Some(v) = t.get("changes") {
        d.changes = super::changes::parse_changes(&format!("{prefix}.changes"), v)?;
    }
    if d.trace.is_some() {
        if let Some(i) = d
            .changes
            .iter()
            .position(|c| c.rate_bps.is_some() || c.pause_ns.is_some())
        {
            return Err(err(
                &format!("{prefix}.changes[{i}]"),
                "a direction that follows a trace takes its capacity from the trace: no rate or pause changes",
            ));
        }
    }
    Ok(())
}

/// `rate`, or a mahimahi `trace` of time-varying capacity.
fn apply_capacity(d: &mut DirectionSpec, fields: &Fields, base: &Path) -> Result<(), LinkError> {
    if fields.t.contains_key("rate") && fields.t.contains_key("trace") {
        return Err(err(
            &format!("{}.trace", fields.prefix),
            "give either rate or trace, not both",
        ));
    }
    if let Some((s, f)) = fields.get("rate")? {
        d.rate_bps = parse_rate(&s)
            .filter(|&r| (1000.0..=1e11).contains(&r))
            .ok_or_else(|| {
                err(&f, format!("`{s}` is not a rate between 1kbit and 100gbit, such as 20mbit, 500kbit or 1gbit"))
            })?;
        d.trace = None;
    }
    if let Some((s, f)) = fields.get("trace")? {
        let p = base.join(&s);
        let tr = Trace::load(&p).map_err(|e| err(&f, e))?;
        d.rate_bps = tr.mean_rate_bps();
        d.trace = Some(tr);
    }
    Ok(())
}

/// `delay`, `jitter` and `jitter_distribution`.
fn apply_delay(d: &mut DirectionSpec, fields: &Fields) -> Result<(), LinkError> {
    if let Some((s, f)) = fields.get("delay")? {
        d.delay_ns = parse_duration_ns(&s)
            .filter(|&v| v <= 10_000_000_000)
            .ok_or_else(|| {
                err(
                    &f,
                    format!("`{s}` is not a one-way delay up to 10s, such as 20ms or 250us"),
                )
            })?;
    }
    if let Some((s, f)) = fields.get("jitter")? {
        d.jitter_ns = parse_duration_ns(&s)
            .filter(|&v| v <= 10_000_000_000)
            .ok_or_else(|| err(&f, format!("`{s}` is not a time up to 10s, such as 2ms")))?;
    }
    if let Some((s, f)) = fields.get("jitter_distribution")? {
        d.jitter_distribution = JitterDistribution::parse(&s).ok_or_else(|| {
            err(
                &f,
                format!("`{s}` is not one of {}", JitterDistribution::NAMES),
            )
        })?;
    }
    Ok(())
}

/// `loss`, `duplicate` and `reorder`.
fn apply_impairments(d: &mut DirectionSpec, fields: &Fields) -> Result<(), LinkError> {
    if let Some((s, f)) = fields.get("loss")? {
        d.loss = LossModel::parse(&f, &s)?;
    }
    for (key, slot) in [("duplicate", &mut d.duplicate), ("reorder", &mut d.reorder)] {
        if let Some((s, f)) = fields.get(key)? {
            *slot = parse_probability(&s)
                .ok_or_else(|| err(&f, format!("`{s}` is not a probability such as 1% or 0.01")))?;
        }
    }
    Ok(())
}

/// `queue`, `aqm` and `sched`.
fn apply_queue(d: &mut DirectionSpec, fields: &Fields) -> Result<(), LinkError> {
    if let Some((s, f)) = fields.get("queue")? {
        d.queue = super::units::parse_queue_field(&f, &s)?;
    }
    let mut fq_codel = false;
    if let Some((s, f)) = fields.get("aqm")? {
        // `fq_codel[:...]` is CoDel on each flow's queue of a fair-queueing
        // scheduler: `aqm = "codel[:...]"` with `sched = "fq"`.
        let t = s.trim();
        let codel = match t.split_once(':') {
            Some((n, rest)) if n.eq_ignore_ascii_case("fq_codel") => Some(format!("codel:{rest}")),
            None if t.eq_ignore_ascii_case("fq_codel") => Some("codel".to_string()),
            _ => None,
        };
        fq_codel = codel.is_some();
        d.aqm = Aqm::parse(&f, codel.as_deref().unwrap_or(&s))?;
        if fq_codel {
            d.sched = Sched::Fq;
        }
    }
    if let Some((s, f)) = fields.get("sched")? {
        d.sched = Sched::parse(&f, &s)?;
        if fq_codel && d.sched != Sched::Fq {
            return Err(err(
                &f,
                format!("`{s}`: aqm = \"fq_codel\" needs sched = \"fq\" (or no sched)"),
            ));
        }
    }
    if matches!(d.aqm, Aqm::DualPi2(_)) && d.sched != Sched::Fifo {
        let f = format!("{}.sched", fields.prefix);
        return Err(err(
            &f,
            format!(
                "`{}` with aqm = \"dualpi2\": DualPI2 is its own scheduler of two queues (L and classic); sched must be \"fifo\"",
                d.sched.as_str()
            ),
        ));
    }
    Ok(())
}
