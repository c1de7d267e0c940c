//! Topologies: named links, the path each traffic class takes through
//! them, and [`Network`], which moves packets along those paths through
//! each link's two [`Pipeline`] pipelines.
//!
//! A scenario with one `[link]` is a [`Topology`] of one link that every
//! flow crosses. Several links are written as `[[links]]` entries, each a
//! full link description (the keys of `[link]`) with a `name`; `[link]`,
//! when present too, gives every entry its defaults. Shorthands make the
//! common cases one line: `[topology] parking_lot = 3` (links `l1`..`l3`,
//! each as `[link]` describes) and `[topology] parallel = 4` (`p1`..`p4`).
//!
//! A flow's path lists the links it crosses from client to server; its
//! packets cross them in that order going up (client to server), each
//! link's `up` direction, and in reverse going down, each link's `down`
//! direction. A flow without a path crosses every link in order. A flow
//! may also add an access delay of its own ([`Route::access_ns`]: pure
//! propagation on the client's side, no rate, no queue), which is how a
//! dumbbell with per-flow RTTs is written (`rtt = "80ms"` on a flow).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::path::Path;

use crate::elements::{Counters, Packet, Pipeline};
use crate::link::{err, Dir, LinkError, LinkSpec};
use crate::log::{NoSink, Sink};

/// One link of a topology.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedLink {
    /// Its name (`[[links]] name`, `l1`, ...; `link` for a scenario's one
    /// `[link]`).
    pub name: String,
    /// Its description, both directions.
    pub spec: LinkSpec,
}

/// Named links, in the order the scenario gives them.
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    /// The links; the first is the one a single-link summary reports.
    pub links: Vec<NamedLink>,
}

/// The way one traffic class (a flow, a cross source) goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Route {
    /// Indices of the links it crosses, client to server.
    pub links: Vec<usize>,
    /// Extra one-way propagation delay on the client's side, ns, each
    /// direction (no rate limit, no queue).
    pub access_ns: u64,
}

/// The most links a topology may have.
pub const MAX_LINKS: usize = 64;

/// The keys a `[[links]]` entry takes besides the link's own.
const ENTRY_KEYS: &[&str] = &["name"];

impl Topology {
    /// One link, named `link`.
    pub fn single(spec: LinkSpec) -> Topology {
        Topology {
            links: vec![NamedLink {
                name: "link".into(),
                spec,
            }],
        }
    }

    /// More than one link.
    pub fn is_multi(&self) -> bool {
        self.links.len() > 1
    }

    /// Builds the links of a scenario: `template` is its `[link]` table
    /// (empty when absent), `entries` its `[[links]]` array and `shorthand`
    /// its `[topology]` table, either of which may be absent. `base`
    /// resolves trace paths. `None` when the scenario has neither
    /// (a single-link scenario).
    pub fn from_toml(
        template: &toml::Table,
        entries: Option<&toml::Value>,
        shorthand: Option<&toml::Value>,
        base: &Path,
    ) -> Result<Option<Topology>, LinkError> {
        let named: Vec<(String, toml::Table)> = match (entries, shorthand) {
            (None, None) => return Ok(None),
            (Some(_), Some(_)) => {
                return Err(err(
                    "topology",
                    "give either [[links]] entries or a [topology] shorthand, not both",
                ))
            }
            (Some(e), None) => link_entries(template, e)?,
            (None, Some(s)) => shorthand_links(template, s)?,
        };
        let mut links = Vec::with_capacity(named.len());
        for (i, (name, table)) in named.into_iter().enumerate() {
            let spec = LinkSpec::from_toml(&table, base, &format!("links[{i}]"))?;
            links.push(NamedLink { name, spec });
        }
        Ok(Some(Topology { links }))
    }

    /// The index of the link called `name`.
    pub fn index(&self, name: &str) -> Option<usize> {
        self.links.iter().position(|l| l.name == name)
    }

    /// The names of the links, comma-separated (for errors).
    pub fn names(&self) -> String {
        let v: Vec<&str> = self.links.iter().map(|l| l.name.as_str()).collect();
        v.join(", ")
    }

    /// The route through the links `path` names (client to server; `None`:
    /// every link in order) with no access delay. `field` names the path
    /// in errors. An unknown name, or a link named twice (a loop), is
    /// refused.
    pub fn route(&self, path: Option<&[String]>, field: &str) -> Result<Route, LinkError> {
        let Some(path) = path else {
            return Ok(Route {
                links: (0..self.links.len()).collect(),
                access_ns: 0,
            });
        };
        if path.is_empty() {
            return Err(err(
                field,
                format!("a path names at least one link; links: {}", self.names()),
            ));
        }
        let mut links = Vec::with_capacity(path.len());
        for name in path {
            let i = self.index(name).ok_or_else(|| {
                err(
                    field,
                    format!("no link is named `{name}`; links: {}", self.names()),
                )
            })?;
            if links.contains(&i) {
                return Err(err(
                    field,
                    format!("the path crosses link `{name}` twice: a path may not loop"),
                ));
            }
            links.push(i);
        }
        Ok(Route {
            links,
            access_ns: 0,
        })
    }

    /// The round-trip propagation delay of `route`, ns: its links' delays
    /// both ways plus its access delay both ways.
    pub fn base_rtt_ns(&self, route: &Route) -> u64 {
        route
            .links
            .iter()
            .map(|&i| self.links[i].spec.up.delay_ns + self.links[i].spec.down.delay_ns)
            .sum::<u64>()
            + 2 * route.access_ns
    }

    /// The first link no route crosses, by name.
    pub fn unused<'a>(&self, routes: impl IntoIterator<Item = &'a Route>) -> Option<&str> {
        let mut used = vec![false; self.links.len()];
        for r in routes {
            for &i in &r.links {
                used[i] = true;
            }
        }
        used.iter()
            .position(|u| !u)
            .map(|i| self.links[i].name.as_str())
    }

    /// The topology with every link's seed derived from `seed`: the first
    /// link gets `seed` itself (so a single-link run draws as before),
    /// link `i` a value of its own.
    pub fn with_seed(&self, seed: u64) -> Topology {
        let mut t = self.clone();
        for (i, l) in t.links.iter_mut().enumerate() {
            l.spec.seed = if i == 0 {
                seed
            } else {
                seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            };
        }
        t
    }

    /// The topology as text: each link with its figures, then each route
    /// (`labels[k]` names route `k`) as the chain of links it crosses.
    pub fn draw(&self, routes: &[Route], labels: &[String]) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        let _ = writeln!(s, "links:");
        for l in &self.links {
            let _ = writeln!(s, "  {:<10} {}", l.name, l.spec.describe());
        }
        let _ = writeln!(s, "paths (client → server; replies go back the same way):");
        let width = labels.iter().map(|l| l.chars().count()).max().unwrap_or(1);
        for (k, r) in routes.iter().enumerate() {
            let mut chain = String::from("client ─");
            if r.access_ns > 0 {
                let _ = write!(
                    chain,
                    "(access {} each way)─",
                    crate::link::units::format_duration_ns(r.access_ns)
                );
            }
            for &i in &r.links {
                let _ = write!(chain, "[{}]─", self.links[i].name);
            }
            chain.push_str(" server");
            let label = labels.get(k).map(String::as_str).unwrap_or("?");
            let _ = writeln!(
                s,
                "  {label:<width$}  {chain}   base RTT {}",
                crate::link::units::format_duration_ns(self.base_rtt_ns(r))
            );
        }
        s
    }
}

/// `[[links]]`: each entry over the template.
fn link_entries(
    template: &toml::Table,
    entries: &toml::Value,
) -> Result<Vec<(String, toml::Table)>, LinkError> {
    let arr = entries.as_array().ok_or_else(|| {
        err(
            "links",
            "expected [[links]] entries, each a table with a name",
        )
    })?;
    if arr.is_empty() || arr.len() > MAX_LINKS {
        return Err(err(
            "links",
            format!("give 1 to {MAX_LINKS} [[links]] entries, not {}", arr.len()),
        ));
    }
    let mut out: Vec<(String, toml::Table)> = Vec::new();
    for (i, e) in arr.iter().enumerate() {
        let f = format!("links[{i}]");
        let t = e
            .as_table()
            .ok_or_else(|| err(&f, "expected a table with a name and link fields"))?;
        let name = match t.get("name") {
            Some(toml::Value::String(s)) => s.clone(),
            Some(v) => return Err(err(&format!("{f}.name"), format!("`{v}` is not a string"))),
            None => {
                return Err(err(
                    &format!("{f}.name"),
                    "every [[links]] entry needs a name",
                ))
            }
        };
        if !valid_name(&name) {
            return Err(err(
                &format!("{f}.name"),
                format!("`{name}` is not a name: use letters, digits, - and _ (at most 32)"),
            ));
        }
        if out.iter().any(|(n, _)| *n == name) {
            return Err(err(
                &format!("{f}.name"),
                format!("two links are named `{name}`"),
            ));
        }
        let mut own = t.clone();
        for k in ENTRY_KEYS {
            own.remove(*k);
        }
        out.push((name, merged(template, &own)));
    }
    Ok(out)
}

/// `[topology] parking_lot = N` or `parallel = N`: N copies of the template.
fn shorthand_links(
    template: &toml::Table,
    shorthand: &toml::Value,
) -> Result<Vec<(String, toml::Table)>, LinkError> {
    let t = shorthand
        .as_table()
        .ok_or_else(|| err("topology", "expected a table: [topology] parking_lot = 3"))?;
    let allowed = "parking_lot (N links l1..lN in a chain), parallel (N links p1..pN side by side)";
    if t.len() != 1 {
        return Err(err("topology", format!("give exactly one of: {allowed}")));
    }
    let (k, v) = t.iter().next().unwrap();
    let prefix = match k.as_str() {
        "parking_lot" => "l",
        "parallel" => "p",
        _ => {
            return Err(err(
                &format!("topology.{k}"),
                format!("unknown shorthand; allowed: {allowed}"),
            ))
        }
    };
    let n = match v {
        toml::Value::Integer(n) if (1..=MAX_LINKS as i64).contains(n) => *n as usize,
        _ => {
            return Err(err(
                &format!("topology.{k}"),
                format!("`{v}` is not a number of links from 1 to {MAX_LINKS}"),
            ))
        }
    };
    Ok((1..=n)
        .map(|i| (format!("{prefix}{i}"), template.clone()))
        .collect())
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// `own` over `template`: `own`'s keys win, `up`/`down` tables merge key
/// by key; a delay (`rtt` or `delay`) or capacity (`rate` or `trace`)
/// given by `own` replaces the template's in either form.
fn merged(template: &toml::Table, own: &toml::Table) -> toml::Table {
    let mut t = template.clone();
    let exclusive: [&[&str]; 2] = [&["rtt", "delay"], &["rate", "trace"]];
    for group in exclusive {
        if group.iter().any(|k| own.contains_key(*k)) {
            for k in group {
                t.remove(*k);
            }
        }
    }
    for (k, v) in own {
        match (t.get_mut(k), v) {
            (Some(toml::Value::Table(base)), toml::Value::Table(over)) => {
                *base = merged(base, over);
            }
            _ => {
                t.insert(k.clone(), v.clone());
            }
        }
    }
    t
}

/// Where each link's per-packet events go.
pub trait LinkSinks {
    /// The sink of link `i`.
    fn sink(&mut self, link: usize) -> &mut dyn Sink;
}

impl LinkSinks for NoSink {
    fn sink(&mut self, _: usize) -> &mut dyn Sink {
        self
    }
}

impl<S: Sink> LinkSinks for Vec<S> {
    fn sink(&mut self, link: usize) -> &mut dyn Sink {
        &mut self[link]
    }
}

/// One step of a route in one direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// A link's pipeline.
    Link(usize),
    /// Pure propagation, ns.
    Delay(u64),
}

/// A packet on an access delay.
struct Delayed {
    at: u64,
    seq: u64,
    dir: Dir,
    pkt: Packet,
}

impl PartialEq for Delayed {
    fn eq(&self, o: &Self) -> bool {
        (self.at, self.seq) == (o.at, o.seq)
    }
}
impl Eq for Delayed {}
impl PartialOrd for Delayed {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Delayed {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(o.at, o.seq))
    }
}

/// One link's two pipelines.
pub struct LinkState {
    /// Its name.
    pub name: String,
    /// Up and down.
    pub dirs: [Pipeline; 2],
    /// The latest time a packet entered each direction (arrivals must
    /// come in time order).
    last_in: [u64; 2],
}

/// Every link of a topology and the routes across them: packets enter at
/// an endpoint ([`Network::push`]), cross their route's stages and come
/// out at the other endpoint ([`Network::advance`]). The class of a packet
/// ([`Packet::class`]) picks its route; a class without one crosses every
/// link in order.
pub struct Network {
    /// The links, in the topology's order.
    pub links: Vec<LinkState>,
    /// Per class, up and down: the stages in order.
    stages: Vec<[Vec<Stage>; 2]>,
    default_stages: [Vec<Stage>; 2],
    delayed: BinaryHeap<Reverse<Delayed>>,
    seq: u64,
    scratch: Vec<(u64, Packet)>,
    /// Packets between stages during [`Network::advance`] (kept to reuse
    /// its allocation).
    moved: Vec<(u64, Dir, Packet)>,
}

fn stages_of(route: &Route) -> [Vec<Stage>; 2] {
    let mut up: Vec<Stage> = Vec::new();
    if route.access_ns > 0 {
        up.push(Stage::Delay(route.access_ns));
    }
    up.extend(route.links.iter().map(|&i| Stage::Link(i)));
    let mut down: Vec<Stage> = route.links.iter().rev().map(|&i| Stage::Link(i)).collect();
    if route.access_ns > 0 {
        down.push(Stage::Delay(route.access_ns));
    }
    [up, down]
}

impl Network {
    /// The links of `topo` with `routes[c]` for class `c`; `mtu` and
    /// `weights` as [`Pipeline::with_weights`] takes them.
    ///
    /// # Panics
    ///
    /// If `topo` has no link, or a route crosses none or names one `topo`
    /// lacks (routes from [`Topology::route`] never do).
    pub fn new(topo: &Topology, routes: &[Route], mtu: u64, weights: &[f64]) -> Network {
        assert!(!topo.links.is_empty(), "a topology has at least one link");
        for r in routes {
            assert!(
                !r.links.is_empty() && r.links.iter().all(|&i| i < topo.links.len()),
                "a route must cross at least one of the topology's links: {r:?}"
            );
        }
        let links = topo
            .links
            .iter()
            .map(|l| LinkState {
                name: l.name.clone(),
                dirs: [
                    Pipeline::with_weights(&l.spec, Dir::Up, mtu, weights),
                    Pipeline::with_weights(&l.spec, Dir::Down, mtu, weights),
                ],
                last_in: [0; 2],
            })
            .collect();
        let all = Route {
            links: (0..topo.links.len()).collect(),
            access_ns: 0,
        };
        Network {
            links,
            stages: routes.iter().map(stages_of).collect(),
            default_stages: stages_of(&all),
            delayed: BinaryHeap::new(),
            seq: 0,
            scratch: Vec::new(),
            moved: Vec::new(),
        }
    }

    /// One link that every class crosses.
    pub fn single(link: &LinkSpec, mtu: u64, weights: &[f64]) -> Network {
        Network::new(&Topology::single(link.clone()), &[], mtu, weights)
    }

    fn stage(&self, class: u16, dir: Dir, hop: u8) -> Option<Stage> {
        let s = self
            .stages
            .get(class as usize)
            .unwrap_or(&self.default_stages);
        s[dir as usize].get(hop as usize).copied()
    }

    /// A packet from an endpoint enters its route at `now` (going `dir`).
    pub fn push(&mut self, dir: Dir, mut pkt: Packet, now: u64, sinks: &mut dyn LinkSinks) {
        pkt.hop = 0;
        let stage = self
            .stage(pkt.class, dir, 0)
            .expect("every route crosses a link (checked in Network::new)");
        self.enter(stage, dir, pkt, now, sinks);
    }

    fn enter(&mut self, stage: Stage, dir: Dir, pkt: Packet, at: u64, sinks: &mut dyn LinkSinks) {
        match stage {
            Stage::Link(i) => {
                let l = &mut self.links[i];
                let t = at.max(l.last_in[dir as usize]);
                l.last_in[dir as usize] = t;
                l.dirs[dir as usize].push(pkt, t, sinks.sink(i));
            }
            Stage::Delay(ns) => {
                self.seq += 1;
                self.delayed.push(Reverse(Delayed {
                    at: at + ns,
                    seq: self.seq,
                    dir,
                    pkt,
                }));
            }
        }
    }

    /// Runs every link up to `now`, moving packets from stage to stage,
    /// and appends to `out` every packet that reached the end of its route
    /// by `now`: its time, the direction it went and the packet.
    pub fn advance(
        &mut self,
        now: u64,
        sinks: &mut dyn LinkSinks,
        out: &mut Vec<(u64, Dir, Packet)>,
    ) {
        let mut moved = std::mem::take(&mut self.moved);
        loop {
            while self.delayed.peek().is_some_and(|d| d.0.at <= now) {
                let d = self.delayed.pop().unwrap().0;
                moved.push((d.at, d.dir, d.pkt));
            }
            for i in 0..self.links.len() {
                for dir in [Dir::Up, Dir::Down] {
                    let mut got = std::mem::take(&mut self.scratch);
                    self.links[i].dirs[dir as usize].advance(now, sinks.sink(i), &mut got);
                    moved.extend(got.drain(..).map(|(t, p)| (t, dir, p)));
                    self.scratch = got;
                }
            }
            // Packets that entered another stage may be due there by
            // `now` too: run the stages again until nothing moves on.
            let mut entered = false;
            for (t, dir, mut pkt) in moved.drain(..) {
                pkt.hop = pkt.hop.saturating_add(1);
                match self.stage(pkt.class, dir, pkt.hop) {
                    Some(stage) => {
                        self.enter(stage, dir, pkt, t, sinks);
                        entered = true;
                    }
                    None => out.push((t, dir, pkt)),
                }
            }
            if !entered {
                self.moved = moved;
                return;
            }
        }
    }

    /// When something next happens on any link or access delay.
    pub fn next_event(&self) -> Option<u64> {
        let links = self
            .links
            .iter()
            .flat_map(|l| l.dirs.iter().filter_map(|d| d.next_event()));
        let delayed = self.delayed.peek().map(|d| d.0.at);
        links.chain(delayed).min()
    }

    /// The first link's two directions (a single-link network's only).
    pub fn first(&self) -> &[Pipeline; 2] {
        &self.links[0].dirs
    }

    /// Every link's name and counters, up and down, in the topology's
    /// order.
    pub fn counters(&self) -> Vec<(String, [Counters; 2])> {
        self.links
            .iter()
            .map(|l| {
                (
                    l.name.clone(),
                    l.dirs.each_ref().map(|d| d.counters.clone()),
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::QueueLimit;

    fn spec(rate: f64, delay_ms: u64) -> LinkSpec {
        let mut l = LinkSpec::default();
        for d in [&mut l.up, &mut l.down] {
            d.rate_bps = rate;
            d.delay_ns = delay_ms * 1_000_000;
            d.queue = QueueLimit::Packets(100);
        }
        l
    }

    fn topo(links: &[(&str, f64, u64)]) -> Topology {
        Topology {
            links: links
                .iter()
                .map(|(n, r, d)| NamedLink {
                    name: n.to_string(),
                    spec: spec(*r, *d),
                })
                .collect(),
        }
    }

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_packet_crosses_its_path_in_order_and_back_in_reverse() {
        // 12 Mbit/s: 1500 B take 1 ms on each link.
        let t = topo(&[("a", 12e6, 5), ("b", 12e6, 10), ("c", 12e6, 20)]);
        let long = t.route(Some(&names(&["a", "b", "c"])), "p").unwrap();
        let mut short = t.route(Some(&names(&["b"])), "p").unwrap();
        short.access_ns = 3_000_000;
        let mut net = Network::new(&t, &[long.clone(), short.clone()], 1500, &[]);
        let mut out = Vec::new();
        net.push(Dir::Up, Packet::sized(1500, 0, 0), 0, &mut NoSink);
        let mut p = Packet::sized(1500, 1, 0);
        p.class = 1;
        net.push(Dir::Down, p, 0, &mut NoSink);
        let mut now = 0;
        while let Some(t) = net.next_event() {
            now = t;
            net.advance(now, &mut NoSink, &mut out);
        }
        assert!(now > 0);
        // The long flow up: three links of 1 ms + 5, 10, 20 ms.
        assert!(out.contains(&(38_000_000, Dir::Up, {
            let mut q = Packet::sized(1500, 0, 0);
            q.hop = 3;
            q
        })));
        // The short flow down: link b (1 + 10 ms), then its access delay.
        let (t1, d1, p1) = out.iter().find(|o| o.2.flow == 1).unwrap();
        assert_eq!((*t1, *d1, p1.hop), (14_000_000, Dir::Down, 2));
        assert_eq!(net.links[1].dirs[1].counters.delivered_packets, 1);
        assert_eq!(net.links[0].dirs[1].counters.arrived_packets, 0);
        assert_eq!(t.base_rtt_ns(&long), 70_000_000);
        assert_eq!(t.base_rtt_ns(&short), 26_000_000);
    }

    #[test]
    fn shared_links_queue_both_flows() {
        // Two flows meet at link b: at 12 Mbit/s, 20 packets each at once
        // need 40 ms there.
        let t = topo(&[("a", 120e6, 1), ("b", 12e6, 1), ("c", 120e6, 1)]);
        let r0 = t.route(Some(&names(&["a", "b"])), "p").unwrap();
        let r1 = t.route(Some(&names(&["c", "b"])), "p").unwrap();
        let mut net = Network::new(&t, &[r0, r1], 1500, &[]);
        for i in 0..40u16 {
            let mut p = Packet::sized(1500, i % 2, 0);
            p.class = i % 2;
            net.push(Dir::Up, p, 0, &mut NoSink);
        }
        let mut out = Vec::new();
        while let Some(t) = net.next_event() {
            net.advance(t, &mut NoSink, &mut out);
        }
        assert_eq!(out.len(), 40);
        let last = out.iter().map(|o| o.0).max().unwrap();
        // 40 packets serialized 1 ms apart at b, after ~1.1 ms on a or c.
        assert!((41_000_000..43_000_000).contains(&last), "{last}");
        assert_eq!(net.links[1].dirs[0].counters.sent_packets, 40);
        assert!(net.links[1].dirs[0].counters.max_queue_bytes > 20 * 1500);
    }

    #[test]
    fn bad_paths_are_refused_naming_the_link() {
        let t = topo(&[("a", 1e6, 1), ("b", 1e6, 1)]);
        let e = t
            .route(Some(&names(&["a", "x"])), "flows[0].path")
            .unwrap_err();
        assert_eq!(e.field, "flows[0].path");
        assert!(
            e.problem.contains("`x`") && e.problem.contains("a, b"),
            "{e}"
        );
        let e = t.route(Some(&names(&["a", "b", "a"])), "p").unwrap_err();
        assert!(e.problem.contains("twice"), "{e}");
        let r = t.route(Some(&names(&["a"])), "p").unwrap();
        assert_eq!(t.unused([&r]), Some("b"));
        assert_eq!(t.unused([&t.route(None, "p").unwrap()]), None);
    }

    #[test]
    fn entries_inherit_the_template_and_shorthands_expand() {
        let template: toml::Table = toml::from_str(
            "rate = \"10mbit\"\nrtt = \"20ms\"\nqueue = \"50pkt\"\n[up]\nrate = \"1mbit\"",
        )
        .unwrap();
        let entries: toml::Value = toml::from_str::<toml::Table>(
            "[[links]]\nname = \"x\"\n[[links]]\nname = \"y\"\ndelay = \"5ms\"\n[links.up]\nloss = \"1%\"",
        )
        .unwrap()["links"]
            .clone();
        let t = Topology::from_toml(&template, Some(&entries), None, Path::new("."))
            .unwrap()
            .unwrap();
        assert_eq!(t.names(), "x, y");
        assert_eq!(t.links[0].spec.down.delay_ns, 10_000_000);
        assert_eq!(t.links[1].spec.down.delay_ns, 5_000_000);
        assert_eq!(t.links[1].spec.up.rate_bps, 1e6);
        assert_eq!(t.links[1].spec.down.rate_bps, 10e6);
        assert_ne!(t.links[1].spec.up.loss, t.links[0].spec.up.loss);
        let sh: toml::Value =
            toml::from_str::<toml::Table>("[t]\nparking_lot = 3").unwrap()["t"].clone();
        let t = Topology::from_toml(&template, None, Some(&sh), Path::new("."))
            .unwrap()
            .unwrap();
        assert_eq!(t.names(), "l1, l2, l3");
        for bad in [
            "[t]\nstar = 3",
            "[t]\nparallel = 0",
            "[t]\nparallel = 2\nparking_lot = 2",
        ] {
            let sh: toml::Value = toml::from_str::<toml::Table>(bad).unwrap()["t"].clone();
            let e = Topology::from_toml(&template, None, Some(&sh), Path::new(".")).unwrap_err();
            assert!(e.field.starts_with("topology"), "{bad}: {e}");
        }
        let dup: toml::Value =
            toml::from_str::<toml::Table>("[[links]]\nname = \"x\"\n[[links]]\nname = \"x\"")
                .unwrap()["links"]
                .clone();
        let e = Topology::from_toml(&template, Some(&dup), None, Path::new(".")).unwrap_err();
        assert!(e.problem.contains("two links are named `x`"), "{e}");
        let bad: toml::Value =
            toml::from_str::<toml::Table>("[[links]]\nname = \"x\"\nrat = \"1mbit\"").unwrap()
                ["links"]
                .clone();
        let e = Topology::from_toml(&template, Some(&bad), None, Path::new(".")).unwrap_err();
        assert_eq!(e.field, "links[0].rat");
    }
}
