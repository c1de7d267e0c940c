//! The resolved scenario as TOML (what every run's `scenario.toml`
//! holds), and dotted-path overrides of it (a sweep's grid axes).

use cc_algorithms::units::format_rate;

use super::{CrossSpec, FlowSpec, Scenario};
use crate::link::units::{format_duration_ns, parse_duration_ns};

impl Scenario {
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
        if let Some(topo) = &self.links {
            let links = topo
                .links
                .iter()
                .map(|l| {
                    let mut lt = l.spec.to_toml();
                    // The backend and seed are the scenario's ([link]).
                    lt.remove("backend");
                    lt.remove("seed");
                    lt.insert("name".into(), l.name.clone().into());
                    toml::Value::Table(lt)
                })
                .collect();
            t.insert("links".into(), toml::Value::Array(links));
        }
        let flows = self.flows.iter().map(flow_toml).collect();
        t.insert("flows".into(), toml::Value::Array(flows));
        if !self.cross.is_empty() {
            let cross = self.cross.iter().map(cross_toml).collect();
            t.insert("cross".into(), toml::Value::Array(cross));
        }
        let mut host = toml::Table::new();
        host.insert(
            "timer_slack".into(),
            format_duration_ns(self.host.timer_slack_ns).into(),
        );
        host.insert(
            "wake_latency".into(),
            format_duration_ns(self.host.wake_latency_ns).into(),
        );
        host.insert("protection".into(), self.host.protection.name().into());
        t.insert("host".into(), toml::Value::Table(host));
        t
    }
}

/// `start`, and `start_jitter` when there is one.
fn insert_start(t: &mut toml::Table, start_ns: u64, start_jitter_ns: u64) {
    t.insert("start".into(), format_duration_ns(start_ns).into());
    if start_jitter_ns > 0 {
        t.insert(
            "start_jitter".into(),
            format_duration_ns(start_jitter_ns).into(),
        );
    }
}

/// A `[[flows]]` entry.
fn flow_toml(f: &FlowSpec) -> toml::Value {
    let mut ft = toml::Table::new();
    ft.insert("cc".into(), f.cc.clone().into());
    ft.insert("direction".into(), f.direction.as_str().into());
    insert_start(&mut ft, f.start_ns, f.start_jitter_ns);
    if let Some(sz) = f.size {
        ft.insert("size".into(), format!("{sz}b").into());
    }
    if let Some(d) = f.duration_ns {
        ft.insert("duration".into(), format_duration_ns(d).into());
    }
    if f.requests > 1 {
        ft.insert("requests".into(), toml::Value::Integer(f.requests as i64));
    }
    if f.think_ns > 0 {
        ft.insert("think".into(), format_duration_ns(f.think_ns).into());
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
    if f.transport.ack != quic_app::transport::AckPolicy::Immediate {
        ft.insert("ack_policy".into(), f.transport.ack.to_string().into());
    }
    if f.transport.small_packets != quic_app::transport::Transport::default().small_packets {
        ft.insert(
            "small_packets".into(),
            f.transport.small_packets.to_string().into(),
        );
    }
    if f.transport.pacing != quic_app::transport::Transport::default().pacing {
        ft.insert("pacing".into(), f.transport.pacing.to_string().into());
    }
    insert_path(&mut ft, &f.path);
    if let Some(r) = f.rtt_ns {
        ft.insert("rtt".into(), format_duration_ns(r).into());
    }
    toml::Value::Table(ft)
}

/// `path`, when there is one.
fn insert_path(t: &mut toml::Table, path: &Option<Vec<String>>) {
    if let Some(p) = path {
        let names = p.iter().map(|n| toml::Value::String(n.clone())).collect();
        t.insert("path".into(), toml::Value::Array(names));
    }
}

/// A `[[cross]]` entry.
fn cross_toml(c: &CrossSpec) -> toml::Value {
    let mut ct = toml::Table::new();
    ct.insert("rate".into(), format_rate(c.rate_bps).into());
    ct.insert("direction".into(), c.direction.as_str().into());
    insert_start(&mut ct, c.start_ns, c.start_jitter_ns);
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
    insert_path(&mut ct, &c.path);
    toml::Value::Table(ct)
}

/// A weight as TOML: an integer when it is one (`40`), else a float.
fn weight_value(w: f64) -> toml::Value {
    if w.fract() == 0.0 && w.abs() < 1e15 {
        toml::Value::Integer(w as i64)
    } else {
        toml::Value::Float(w)
    }
}

/// Sets a dotted path in a TOML table (`link.rate`, `flows.0.cc`,
/// `links.1.rate`, `flows.*.cc` for every flow). A link field set at the top of `[link]` replaces the
/// resolved per-direction ones, in `[link]` and in every `[[links]]`
/// entry (which start from `[link]`); `links.N.KEY` sets it on link N only.
pub fn set_path(t: &mut toml::Table, path: &str, v: toml::Value) -> Result<(), String> {
    let parts: Vec<&str> = path.split('.').collect();
    if parts.first() == Some(&"link") && parts.len() == 2 {
        let link = t
            .get_mut("link")
            .and_then(|l| l.as_table_mut())
            .ok_or("no [link] table")?;
        set_link_field(link, parts[1], &v)?;
        if matches!(parts[1], "backend" | "seed") {
            return Ok(());
        }
        if let Some(toml::Value::Array(links)) = t.get_mut("links") {
            for l in links.iter_mut().filter_map(|l| l.as_table_mut()) {
                set_link_field(l, parts[1], &v)?;
            }
        }
        return Ok(());
    }
    if parts.first() == Some(&"links") && parts.len() == 3 && !matches!(parts[2], "up" | "down") {
        let idx: usize = parts[1]
            .parse()
            .map_err(|_| format!("`{}` is not an index", parts[1]))?;
        let link = t
            .get_mut("links")
            .and_then(|l| l.as_array_mut())
            .ok_or("no [[links]] entries")?
            .get_mut(idx)
            .and_then(|l| l.as_table_mut())
            .ok_or_else(|| format!("index {idx} is out of range"))?;
        if matches!(parts[2], "name" | "backend" | "seed") {
            return Err(format!(
                "`{}` of a link is not a field a sweep can vary",
                parts[2]
            ));
        }
        return set_link_field(link, parts[2], &v);
    }
    // `flows.*.KEY`: every flow's KEY (a parking lot's algorithm).
    if parts.len() >= 3 && parts[0] == "flows" && parts[1] == "*" {
        let flows = t
            .get_mut("flows")
            .and_then(|f| f.as_array_mut())
            .ok_or("no [[flows]] entries")?;
        let rest = parts[2..].join(".");
        for f in flows.iter_mut() {
            let f = f.as_table_mut().ok_or("a flow is not a table")?;
            if parts.len() == 3 {
                f.insert(rest.clone(), v.clone());
            } else {
                set_path(f, &rest, v.clone())?;
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

/// Sets field `key` of a resolved link table (`[link]` or a `[[links]]`
/// entry). The resolved link lists each direction; the field is set in
/// both, `rtt` translated into per-direction delays.
fn set_link_field(link: &mut toml::Table, key: &str, v: &toml::Value) -> Result<(), String> {
    if matches!(key, "backend" | "seed") {
        link.insert(key.into(), v.clone());
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
            // fq_codel is CoDel under the fq scheduler: it sets `sched`,
            // which the resolved link states (`fifo` by default).
            let fq_codel = |s: &str| {
                s.trim()
                    .split(':')
                    .next()
                    .is_some_and(|n| n.eq_ignore_ascii_case("fq_codel"))
            };
            if key == "aqm" && v.as_str().is_some_and(fq_codel) {
                d.remove("sched");
            }
            d.insert(key.into(), v.clone());
        }
    }
    Ok(())
}
