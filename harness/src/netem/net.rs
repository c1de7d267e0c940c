//! The one builder of kernel links: every [`Topology`] (a single link is
//! a topology of one), with every flow's route, on veth between
//! namespaces. Two layouts, one set of qdiscs per link:
//!
//! - **compact**, for one link that every flow crosses whole (no per-flow
//!   `rtt`): the client, router and server namespaces of
//!   [`Namespaces`], netem on the sending endpoint's veth, the shaper on
//!   the router's veth towards the receiver, a policer on the router's
//!   veth the direction enters by (see [`crate::netem`]);
//! - **routed**, for several links or per-flow paths: every link a
//!   namespace of its own between two router namespaces, every flow's
//!   client and server a namespace of their own attached where its path
//!   begins and ends, and static routes per flow steering its packets
//!   along its path.
//!
//! ```text
//!  client k ──cl│c{k}── R(a) ──x{i}│xa── x_i ──xb│x{i}── R(b) ── ... ── R(z) ──s{k}│sv── server k
//!  up:   netem on R(a)'s x{i}, shaper on x_i's xb (policer on xa's ingress)
//!  down: netem on R(b)'s x{i}, shaper on x_i's xa (policer on xb's ingress)
//! ```
//!
//! Either way a link's impairments (netem, with the segmenter under it)
//! sit on the egress of its sending side and the shaper with its queue and
//! AQM on the egress towards the receiving side; [`KernelNet::setup`]
//! installs them, its sampler reads them and makes the scheduled changes,
//! the same for both. The routed layout's routers are the links' ends
//! joined where some path goes from one link into the next; a path that
//! would come back to a router it left (a link whose two ends are joined)
//! cannot be built this way and is refused with the link named. A flow's
//! own `rtt` is a pure netem delay on both ends of its client's veth.
//! Cross traffic does not run on netem.
//!
//! Routed addresses: veth pair `p` is 10.(210 + p / 256).(p % 256).0/24,
//! .1 on its router end and .2 on the other. Namespace names carry the
//! run's id (`cclab-<pid>-<n>-r0`, `-x1`, `-c0`, `-s0`), so
//! [`netns::cleanup`] finds what a killed run left.

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use super::{
    changes, check_link, needs_netem, netem_args, policer_args, segmenter_args, shaper_args,
    start_sampler, Caps, NetemError, QdiscStats, SampledLink, Sampler,
};
use crate::link::{Dir, LinkSpec};
use crate::netns::{self, Namespaces, NetnsError};
use link_model::elements::pipeline::ScheduledCapacity;
use link_model::topology::{Route, Topology};

/// Where one flow's endpoints run.
#[derive(Clone, Debug)]
pub struct Place {
    /// The client's namespace.
    pub client_ns: String,
    /// The server's namespace.
    pub server_ns: String,
    /// The server's address.
    pub server_ip: Ipv4Addr,
}

/// Where one link's qdiscs are, per direction (up, down): (namespace,
/// device) of netem, of the shaper, and of the device the direction
/// enters the shaper's namespace by (where its policer is).
#[derive(Clone, Debug)]
struct LinkPlace {
    netem: [(String, String); 2],
    shaper: [(String, String); 2],
    policer: [(String, String); 2],
}

/// The namespaces a [`KernelNet`] made.
enum Layout {
    /// Client, router and server ([`Namespaces`]).
    Compact(Namespaces),
    /// Routers, links, clients and servers, by name.
    Routed(Vec<String>),
}

/// The namespaces, veths, routes and qdiscs of a topology; removed on
/// drop.
pub struct KernelNet {
    /// Per flow (route), where its endpoints run.
    pub flows: Vec<Place>,
    /// The links (with this repetition's seeds).
    pub topology: Topology,
    links: Vec<LinkPlace>,
    layout: Layout,
    /// Every `ip` and `tc` command that built it (the program first),
    /// for the run's records; the compact layout's namespaces are
    /// [`Namespaces::create`]'s and not listed.
    pub commands: Vec<Vec<String>>,
    /// The MTU its queues were sized with.
    mtu: u64,
    /// Whether netem took a seed.
    seeded: bool,
    /// Whether its impairments (netem) were installed.
    impairments: bool,
    removed: bool,
}

/// One end of a veth pair: namespace, device, address.
struct End<'a> {
    ns: &'a str,
    dev: String,
    ip: Ipv4Addr,
}

fn pair_ip(p: usize, host: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 210 + (p / 256) as u8, (p % 256) as u8, host)
}

/// Union-find over the links' ends (2i: client side of link i, 2i + 1:
/// server side).
fn find(parent: &mut [usize], mut x: usize) -> usize {
    while parent[x] != x {
        parent[x] = parent[parent[x]];
        x = parent[x];
    }
    x
}

/// The router of each link end: ends joined where a path goes from one
/// link into the next. Refuses a link whose two ends become one router,
/// and a flow whose path begins and ends at one router.
fn routers(topo: &Topology, routes: &[Route]) -> Result<Vec<usize>, NetemError> {
    let n = topo.links.len();
    let mut parent: Vec<usize> = (0..2 * n).collect();
    for r in routes {
        for w in r.links.windows(2) {
            let (x, y) = (find(&mut parent, 2 * w[0] + 1), find(&mut parent, 2 * w[1]));
            parent[x] = y;
        }
    }
    let root: Vec<usize> = (0..2 * n).map(|e| find(&mut parent, e)).collect();
    for (i, l) in topo.links.iter().enumerate() {
        if root[2 * i] == root[2 * i + 1] {
            return Err(NetemError::Unsupported(format!(
                "links: the flows' paths join both ends of link `{}` into one router, which the netem backend's chain of namespaces cannot build",
                l.name
            )));
        }
    }
    for (k, r) in routes.iter().enumerate() {
        if let (Some(&f), Some(&l)) = (r.links.first(), r.links.last()) {
            if root[2 * f] == root[2 * l + 1] {
                return Err(NetemError::Unsupported(format!(
                    "flows[{k}].path: it begins and ends at one router of the netem backend's chain of namespaces"
                )));
            }
        }
    }
    // Number the routers densely, in order of first appearance.
    let mut ids: HashMap<usize, usize> = HashMap::new();
    Ok(root
        .iter()
        .map(|r| {
            let next = ids.len();
            *ids.entry(*r).or_insert(next)
        })
        .collect())
}

/// Whether the netem backend can build `topo` with these flow routes (a
/// chain of namespaces cannot join a link's two ends): checked before a
/// run starts.
pub fn check(topo: &Topology, routes: &[Route]) -> Result<(), NetemError> {
    routers(topo, routes).map(|_| ())
}

/// Scheduled changes, policers and aggregation run on one kernel link
/// only (the sampler of several links applies no change, no router here
/// polices, and aggregation is held where a single link's packets leave
/// the guest router): refused on any link of `topo`, naming it.
pub fn refuse_one_link_elements(topo: &Topology) -> Result<(), NetemError> {
    for l in &topo.links {
        let (up, down) = (&l.spec.up, &l.spec.down);
        let what = if !up.changes.is_empty() || !down.changes.is_empty() {
            "scheduled changes run"
        } else if up.policer.is_some() || down.policer.is_some() {
            "a policer runs"
        } else if up.aggregate.is_some() || down.aggregate.is_some() {
            "aggregation runs"
        } else {
            continue;
        };
        return Err(NetemError::Unsupported(format!(
            "link `{}`: {what} on one kernel link, not on several links or per-flow paths (the simulator and the userspace emulator run it on any topology: --link sim, --link emu)",
            l.name
        )));
    }
    Ok(())
}

impl KernelNet {
    /// Builds `topo` (seeded for the repetition) with `routes[k]` for flow
    /// `k`, after checking every link against `caps`: the compact layout
    /// for one link every flow crosses whole, the routed one otherwise.
    /// With `impairments = false` only the shapers (and policers) are
    /// installed (for kernels without netem, and the tbf tests).
    pub fn setup(
        topo: &Topology,
        routes: &[Route],
        caps: &Caps,
        mtu: u64,
        impairments: bool,
    ) -> Result<KernelNet, NetemError> {
        let compact =
            topo.links.len() == 1 && routes.iter().all(|r| r.links == [0] && r.access_ns == 0);
        for l in &topo.links {
            check_link(&l.spec, caps, impairments).map_err(|e| match e {
                NetemError::Unsupported(m) if !compact => {
                    NetemError::Unsupported(format!("link `{}`: {m}", l.name))
                }
                e => e,
            })?;
        }
        let (layout, router_of) = if compact {
            (Layout::Compact(Namespaces::create(true)?), Vec::new())
        } else {
            refuse_one_link_elements(topo)?;
            if routes.iter().any(|r| r.access_ns > 0) && !caps.netem {
                return Err(NetemError::MissingQdisc {
                    qdisc: "netem".into(),
                });
            }
            let router_of = routers(topo, routes)?;
            if !netns::is_root() {
                return Err(NetnsError::NotRoot.into());
            }
            netns::cleanup(true)?;
            (Layout::Routed(Vec::new()), router_of)
        };
        let mut me = KernelNet {
            flows: Vec::new(),
            topology: topo.clone(),
            links: Vec::new(),
            layout,
            commands: Vec::new(),
            mtu,
            seeded: caps.netem_seed,
            impairments,
            removed: false,
        };
        match &me.layout {
            Layout::Compact(t) => {
                let (c, r, s) = (t.client.clone(), t.router.clone(), t.server.clone());
                let at = |ns: &str, dev: &str| (ns.to_string(), dev.to_string());
                me.links.push(LinkPlace {
                    netem: [at(&c, netns::CLIENT_DEV), at(&s, netns::SERVER_DEV)],
                    shaper: [
                        at(&r, netns::ROUTER_SERVER_DEV),
                        at(&r, netns::ROUTER_CLIENT_DEV),
                    ],
                    policer: [
                        at(&r, netns::ROUTER_CLIENT_DEV),
                        at(&r, netns::ROUTER_SERVER_DEV),
                    ],
                });
                let place = Place {
                    client_ns: c,
                    server_ns: s,
                    server_ip: netns::SERVER_IP,
                };
                me.flows = vec![place; routes.len()];
            }
            Layout::Routed(_) => me.build_routed(topo, routes, &router_of)?,
        }
        for (i, l) in topo.links.iter().enumerate() {
            for dir in [Dir::Up, Dir::Down] {
                let d = l.spec.dir(dir);
                let place = me.links[i].clone();
                let k = dir as usize;
                let (sns, sdev) = &place.shaper[k];
                let mut cmds = shaper_args(sns, sdev, &l.spec, dir, mtu);
                if let Some(p) = d.policer {
                    let burst = l.spec.limit_bytes(dir, p.burst, mtu);
                    let (pns, pdev) = &place.policer[k];
                    cmds.extend(policer_args(pns, pdev, p.rate_bps, burst));
                }
                if impairments && needs_netem(d) {
                    let (ens, edev) = &place.netem[k];
                    let seed = caps.netem_seed.then_some(l.spec.seed ^ dir as u64);
                    cmds.push(segmenter_args(ens, edev));
                    cmds.push(netem_args(ens, edev, d, seed));
                }
                for c in cmds {
                    let args: Vec<&str> = c.iter().map(String::as_str).collect();
                    me.tc(&args)?;
                }
            }
        }
        Ok(me)
    }

    /// One link that every flow crosses: [`KernelNet::setup`] with `link`
    /// alone and one flow.
    pub fn one(
        link: &LinkSpec,
        caps: &Caps,
        mtu: u64,
        impairments: bool,
    ) -> Result<KernelNet, NetemError> {
        let route = Route {
            links: vec![0],
            access_ns: 0,
        };
        KernelNet::setup(
            &Topology::single(link.clone()),
            &[route],
            caps,
            mtu,
            impairments,
        )
    }

    /// The compact layout's client, router and server namespaces (`None`
    /// when routed).
    pub fn namespaces(&self) -> Option<&Namespaces> {
        match &self.layout {
            Layout::Compact(t) => Some(t),
            Layout::Routed(_) => None,
        }
    }

    /// The endpoints' namespaces and devices, each a client's then a
    /// server's: one pair for the compact layout, one per flow routed.
    pub fn endpoint_devices(&self) -> Vec<(String, String)> {
        match &self.layout {
            Layout::Compact(t) => vec![
                (t.client.clone(), netns::CLIENT_DEV.to_string()),
                (t.server.clone(), netns::SERVER_DEV.to_string()),
            ],
            Layout::Routed(_) => self
                .flows
                .iter()
                .flat_map(|f| {
                    [
                        (f.client_ns.clone(), "cl".to_string()),
                        (f.server_ns.clone(), "sv".to_string()),
                    ]
                })
                .collect(),
        }
    }

    /// The routed layout's namespaces, veths and routes, and each link's
    /// place.
    fn build_routed(
        &mut self,
        topo: &Topology,
        routes: &[Route],
        router_of: &[usize],
    ) -> Result<(), NetemError> {
        let me = self;
        let id = netns::new_id();
        let nrouters = router_of.iter().max().map_or(0, |m| m + 1);
        let router_ns: Vec<String> = (0..nrouters).map(|j| format!("{id}-r{j}")).collect();
        let link_ns: Vec<String> = (0..topo.links.len())
            .map(|i| format!("{id}-x{i}"))
            .collect();
        let client_ns: Vec<String> = (0..routes.len()).map(|k| format!("{id}-c{k}")).collect();
        let server_ns: Vec<String> = (0..routes.len()).map(|k| format!("{id}-s{k}")).collect();
        for ns in router_ns
            .iter()
            .chain(&link_ns)
            .chain(&client_ns)
            .chain(&server_ns)
        {
            netns::validate_name(ns)?;
            me.ip(&["netns", "add", ns])?;
            if let Layout::Routed(made) = &mut me.layout {
                made.push(ns.clone());
            }
            me.ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        let mut pairs = 0usize;
        // Each link: router(a) ── x_i ── router(b); `a_ip[i]`, `b_ip[i]`:
        // the link namespace's own addresses on its two sides, and
        // `ra_ip[i]`, `rb_ip[i]` the routers' addresses facing it.
        let (mut a_ip, mut b_ip, mut ra_ip, mut rb_ip) = (vec![], vec![], vec![], vec![]);
        for (i, x) in link_ns.iter().enumerate() {
            let (ra, rb) = (
                &router_ns[router_of[2 * i]],
                &router_ns[router_of[2 * i + 1]],
            );
            for (side, r) in [("xa", ra), ("xb", rb)] {
                let (p, q) = me.veth(
                    End {
                        ns: r,
                        dev: format!("x{i}"),
                        ip: pair_ip(pairs, 1),
                    },
                    End {
                        ns: x,
                        dev: side.into(),
                        ip: pair_ip(pairs, 2),
                    },
                )?;
                pairs += 1;
                if side == "xa" {
                    ra_ip.push(p);
                    a_ip.push(q);
                } else {
                    rb_ip.push(p);
                    b_ip.push(q);
                }
            }
            me.links.push(LinkPlace {
                netem: [(ra.clone(), format!("x{i}")), (rb.clone(), format!("x{i}"))],
                shaper: [(x.clone(), "xb".into()), (x.clone(), "xa".into())],
                policer: [(x.clone(), "xa".into()), (x.clone(), "xb".into())],
            });
        }
        for (k, r) in routes.iter().enumerate() {
            let (first, last) = (r.links[0], *r.links.last().expect("a route has a link"));
            let entry = &router_ns[router_of[2 * first]];
            let exit = &router_ns[router_of[2 * last + 1]];
            let (c_ip, gw_c) = me.veth(
                End {
                    ns: &client_ns[k],
                    dev: "cl".into(),
                    ip: pair_ip(pairs, 2),
                },
                End {
                    ns: entry,
                    dev: format!("c{k}"),
                    ip: pair_ip(pairs, 1),
                },
            )?;
            pairs += 1;
            let (s_ip, gw_s) = me.veth(
                End {
                    ns: &server_ns[k],
                    dev: "sv".into(),
                    ip: pair_ip(pairs, 2),
                },
                End {
                    ns: exit,
                    dev: format!("s{k}"),
                    ip: pair_ip(pairs, 1),
                },
            )?;
            pairs += 1;
            me.ip(&[
                "-n",
                &client_ns[k],
                "route",
                "add",
                "default",
                "via",
                &gw_c.to_string(),
            ])?;
            me.ip(&[
                "-n",
                &server_ns[k],
                "route",
                "add",
                "default",
                "via",
                &gw_s.to_string(),
            ])?;
            let (c, s) = (format!("{c_ip}/32"), format!("{s_ip}/32"));
            for &l in &r.links {
                let (ra, rb, x) = (
                    &router_ns[router_of[2 * l]],
                    &router_ns[router_of[2 * l + 1]],
                    &link_ns[l],
                );
                me.ip(&[
                    "-n",
                    ra,
                    "route",
                    "replace",
                    &s,
                    "via",
                    &a_ip[l].to_string(),
                ])?;
                me.ip(&[
                    "-n",
                    x,
                    "route",
                    "replace",
                    &s,
                    "via",
                    &rb_ip[l].to_string(),
                ])?;
                me.ip(&[
                    "-n",
                    x,
                    "route",
                    "replace",
                    &c,
                    "via",
                    &ra_ip[l].to_string(),
                ])?;
                me.ip(&[
                    "-n",
                    rb,
                    "route",
                    "replace",
                    &c,
                    "via",
                    &b_ip[l].to_string(),
                ])?;
            }
            if r.access_ns > 0 {
                let delay = format!("{}us", r.access_ns / 1000);
                for (ns, dev) in [(&client_ns[k], "cl".to_string()), (entry, format!("c{k}"))] {
                    me.tc(&[
                        "-n", ns, "qdisc", "add", "dev", &dev, "root", "netem", "delay", &delay,
                        "limit", "100000",
                    ])?;
                }
            }
            me.flows.push(Place {
                client_ns: client_ns[k].clone(),
                server_ns: server_ns[k].clone(),
                server_ip: s_ip,
            });
        }
        for ns in router_ns.iter().chain(&link_ns) {
            me.ip(&netns::forwarding_args(ns))?;
        }
        Ok(())
    }

    /// The shaper's counters of the first link in one direction.
    pub fn stats(&self, dir: Dir) -> Result<QdiscStats, NetnsError> {
        let (ns, dev) = &self.links[0].shaper[dir as usize];
        let out = netns::run("tc", &["-n", ns, "-s", "-j", "qdisc", "show", "dev", dev])?;
        super::parse_root_stats(&out).ok_or_else(|| NetnsError::Command {
            command: format!("tc -s -j qdisc show dev {dev}"),
            stderr: "no root qdisc in the output".into(),
        })
    }

    fn ip(&mut self, args: &[&str]) -> Result<String, NetnsError> {
        self.commands.push(
            std::iter::once("ip")
                .chain(args.iter().copied())
                .map(String::from)
                .collect(),
        );
        netns::run("ip", args)
    }

    fn tc(&mut self, args: &[&str]) -> Result<String, NetnsError> {
        self.commands.push(
            std::iter::once("tc")
                .chain(args.iter().copied())
                .map(String::from)
                .collect(),
        );
        netns::run("tc", args)
    }

    /// A veth pair, `gso_max_segs` 1 on both ends, addressed and up, with
    /// permanent neighbour entries both ways (as [`netns::Namespaces`]
    /// makes them: no ARP crosses a lossy link); the two addresses.
    fn veth(&mut self, a: End, b: End) -> Result<(Ipv4Addr, Ipv4Addr), NetnsError> {
        for e in [&a, &b] {
            netns::validate_name(&e.dev)?;
        }
        let segs = netns::GSO_MAX_SEGS.to_string();
        self.ip(&[
            "link",
            "add",
            &a.dev,
            "netns",
            a.ns,
            "gso_max_segs",
            &segs,
            "type",
            "veth",
            "peer",
            "name",
            &b.dev,
            "netns",
            b.ns,
            "gso_max_segs",
            &segs,
        ])?;
        for e in [&a, &b] {
            self.ip(&[
                "-n",
                e.ns,
                "addr",
                "add",
                &format!("{}/24", e.ip),
                "dev",
                &e.dev,
            ])?;
            self.ip(&["-n", e.ns, "link", "set", "dev", &e.dev, "up"])?;
            let got = netns::gso_max_segs(e.ns, &e.dev)?;
            if got != u64::from(netns::GSO_MAX_SEGS) {
                return Err(NetnsError::Command {
                    command: format!("ip -n {} link add {} ... gso_max_segs {segs}", e.ns, e.dev),
                    stderr: format!("the kernel left gso_max_segs at {got}, so GSO trains would reach the bottleneck whole"),
                });
            }
        }
        let (ma, mb) = (
            netns::mac_address(a.ns, &a.dev)?,
            netns::mac_address(b.ns, &b.dev)?,
        );
        for (e, peer, mac) in [(&a, &b, &mb), (&b, &a, &ma)] {
            self.ip(&[
                "-n",
                e.ns,
                "neigh",
                "replace",
                &peer.ip.to_string(),
                "lladdr",
                mac,
                "dev",
                &e.dev,
                "nud",
                "permanent",
            ])?;
        }
        Ok((a.ip, b.ip))
    }

    /// Samples every link's two directions every `interval` into
    /// `paths[i]` (JSON lines, the same [`super::Sample`] as emu; one
    /// thread and one `tc -batch` per namespace for all links) until the
    /// returned sampler is stopped. A single link's scheduled changes are
    /// made on the same thread, timed from the same start
    /// ([`changes`]), and logged in `link-changes.jsonl` beside
    /// `paths[0]` (several links take none: refused at setup).
    pub fn start_sampler(&self, interval: Duration, paths: &[PathBuf]) -> std::io::Result<Sampler> {
        let links = self
            .links
            .iter()
            .zip(&self.topology.links)
            .zip(paths)
            .map(|((place, l), path)| SampledLink {
                shaper: place.shaper.clone(),
                netem: place.netem.clone(),
                policer: [Dir::Up, Dir::Down].map(|dir| {
                    let p = l.spec.dir(dir).policer;
                    p.map(|_| place.policer[dir as usize].clone())
                }),
                capacity: [Dir::Up, Dir::Down].map(|dir| {
                    let d = l.spec.dir(dir);
                    ScheduledCapacity::new(d.rate_bps, &d.changes)
                }),
                path: path.clone(),
            })
            .collect();
        let plan = match (self.links.as_slice(), self.topology.links.as_slice()) {
            ([place], [l]) => {
                let (imp, seeded) = (self.impairments, self.seeded);
                changes::Planner::new(&l.spec, self.mtu, imp, seeded, |dir| {
                    let k = dir as usize;
                    changes::Place {
                        shaper_ns: place.shaper[k].0.clone(),
                        shaper_dev: place.shaper[k].1.clone(),
                        netem_ns: place.netem[k].0.clone(),
                        netem_dev: place.netem[k].1.clone(),
                    }
                })
            }
            _ => changes::Planner::default(),
        };
        start_sampler(links, interval, plan)
    }

    /// Removes every namespace now (also done on drop).
    pub fn remove(&mut self) -> Result<(), NetnsError> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        match &mut self.layout {
            Layout::Compact(t) => t.remove(),
            Layout::Routed(made) => netns::delete_all(made.iter()),
        }
    }
}

impl Drop for KernelNet {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use link_model::topology::NamedLink;

    fn topo(n: usize) -> Topology {
        Topology {
            links: (0..n)
                .map(|i| NamedLink {
                    name: format!("l{}", i + 1),
                    spec: LinkSpec::default(),
                })
                .collect(),
        }
    }

    fn route(links: &[usize]) -> Route {
        Route {
            links: links.to_vec(),
            access_ns: 0,
        }
    }

    #[test]
    fn a_parking_lot_is_a_chain_of_four_routers() {
        let t = topo(3);
        let r = routers(
            &t,
            &[route(&[0, 1, 2]), route(&[0]), route(&[1]), route(&[2])],
        )
        .unwrap();
        // l1: r0 -> r1, l2: r1 -> r2, l3: r2 -> r3.
        assert_eq!(r, [0, 1, 1, 2, 2, 3]);
        // Parallel links stay apart.
        let r = routers(&topo(2), &[route(&[0]), route(&[1])]).unwrap();
        assert_eq!(r, [0, 1, 2, 3]);
    }

    #[test]
    fn paths_that_fold_back_are_refused() {
        let t = topo(2);
        // l1 then l2 for one flow, l2 then l1 for another: l1's server
        // side is l2's client side and the other way round.
        let e = routers(&t, &[route(&[0, 1]), route(&[1, 0])]).unwrap_err();
        assert!(e.to_string().contains("one router"), "{e}");
        assert!(routers(&topo(1), &[route(&[0])]).is_ok());
    }
}
