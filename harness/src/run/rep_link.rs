//! The link of one repetition on `emu` or `netem`: kernel qdiscs on veth
//! between namespaces (set up before the servers, which run inside them),
//! or the userspace emulator in front of the servers (started once they
//! listen, with one route per flow and per cross-traffic source).

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::endpoints::Server;
use super::{RunConfig, RunError};
use crate::cross::{self, Cross};
use crate::emu::{EmuConfig, EmuReport, Emulator, Route};
use crate::link::{Backend, LinkSpec};
use crate::netem::NetemLink;
use crate::netem_paths::{NetemPaths, Place};
use crate::scenario::Scenario;

/// The link before the servers start: the repetition's link description,
/// and on netem the namespaces with their qdiscs (one link, or
/// [`NetemPaths`] for several links or per-flow paths).
pub(super) struct PreparedLink {
    spec: LinkSpec,
    netem: Option<Arc<NetemLink>>,
    paths: Option<NetemPaths>,
}

/// The link while the flows run.
pub(super) struct RepLink {
    netem: Option<Arc<NetemLink>>,
    paths: Option<NetemPaths>,
    emu: Option<Emulator>,
    sampler: Option<crate::netem::Sampler>,
    /// Where the emulator's cross-traffic routes lead (emu only).
    cross_targets: Vec<UdpSocket>,
}

impl PreparedLink {
    /// The scenario's link with the repetition's seed; on netem, set up,
    /// with the `tc` commands it took in `tc-commands.txt`.
    pub(super) fn prepare(
        sc: &Scenario,
        cfg: &RunConfig,
        seed: u64,
        dir: &Path,
    ) -> Result<PreparedLink, RunError> {
        let mut spec = sc.link.clone();
        spec.seed = seed;
        let (mut netem, mut paths) = (None, None);
        if cfg.backend == Backend::Netem && sc.has_paths() {
            let n = NetemPaths::setup(
                &sc.topology().with_seed(seed),
                &sc.flow_routes(),
                &crate::netem::probe(),
                1500,
            )?;
            // Every `ip` and `tc` command that built it, one per line.
            let lines: Vec<String> = n.commands.iter().map(|c| c.join(" ") + "\n").collect();
            std::fs::write(dir.join("netns-commands.txt"), lines.concat())?;
            paths = Some(n);
        } else if cfg.backend == Backend::Netem {
            let n = NetemLink::setup(&spec, &crate::netem::probe(), 1500, true)?;
            // The link as the kernel was told it: one `tc` line per command.
            let lines: Vec<String> = n
                .commands
                .iter()
                .map(|c| format!("tc {}\n", c.join(" ")))
                .collect();
            std::fs::write(dir.join("tc-commands.txt"), lines.concat())?;
            netem = Some(Arc::new(n));
        }
        Ok(PreparedLink { spec, netem, paths })
    }

    /// On netem, where each of the `nflows` flows' endpoints run.
    pub(super) fn places(&self, nflows: usize) -> Option<Vec<Place>> {
        if let Some(p) = &self.paths {
            return Some(p.flows.clone());
        }
        self.netem.as_ref().map(|n| {
            let t = &n.topology;
            vec![
                Place {
                    client_ns: t.client.clone(),
                    server_ns: t.server.clone(),
                    server_ip: crate::netns::SERVER_IP,
                };
                nflows
            ]
        })
    }

    /// Starts what carries the flows to `servers`: on netem the bottleneck
    /// sampler; otherwise the emulator, with route `i` to server `i` and
    /// then one route per cross-traffic source.
    pub(super) fn start(
        self,
        sc: &Scenario,
        cfg: &RunConfig,
        servers: &[Server],
        dir: &Path,
    ) -> Result<RepLink, RunError> {
        let samples = dir.join("bottleneck-samples.jsonl");
        if let Some(n) = &self.netem {
            let sampler = n.start_sampler(Duration::from_millis(20), &samples)?;
            return Ok(RepLink {
                netem: self.netem,
                paths: None,
                emu: None,
                sampler: Some(sampler),
                cross_targets: Vec::new(),
            });
        }
        if let Some(p) = &self.paths {
            let files: Vec<_> = (0..p.topology.links.len())
                .map(|i| {
                    crate::bottleneck::link_dir(dir, &p.topology, i)
                        .join("bottleneck-samples.jsonl")
                })
                .collect();
            let sampler = Some(p.start_sampler(Duration::from_millis(20), &files)?);
            return Ok(RepLink {
                netem: None,
                paths: self.paths,
                emu: None,
                sampler,
                cross_targets: Vec::new(),
            });
        }
        let mut routes: Vec<Route> = servers.iter().map(|s| route_to(s.addr)).collect();
        let mut cross_targets = Vec::new();
        for _ in &sc.cross {
            let t = cross::target_socket()?;
            routes.push(route_to(t.local_addr()?));
            cross_targets.push(t);
        }
        let mut ec = EmuConfig::new(self.spec, routes);
        ec.log_dir = Some(dir.to_path_buf());
        ec.per_packet_log = cfg.per_packet_log;
        // Route i is flow i, then one route per cross source.
        ec.class_weights = sc.class_weights();
        if sc.has_paths() {
            let topo = sc.topology();
            ec.topology = Some((topo.with_seed(ec.link.seed), sc.routes()));
        }
        Ok(RepLink {
            netem: None,
            paths: None,
            emu: Some(Emulator::start(ec)?),
            sampler: None,
            cross_targets,
        })
    }
}

/// An emulator route to `target`, listening on a free local port.
fn route_to(target: SocketAddr) -> Route {
    Route {
        listen: "127.0.0.1:0".parse().unwrap(),
        target,
    }
}

impl RepLink {
    /// Where flow `i`'s client sends: the emulator's route to its server,
    /// or (netem) the server itself.
    pub(super) fn addr_of(&self, servers: &[Server], i: usize) -> SocketAddr {
        match &self.emu {
            Some(e) => e.listen_addrs()[i],
            None => servers[i].addr,
        }
    }

    /// Starts the cross traffic through the emulator (none on netem).
    /// `nflows` routes come first; `t0` is the repetition's start.
    pub(super) fn start_cross(
        &mut self,
        sc: &Scenario,
        seed: u64,
        nflows: usize,
        t0: Instant,
    ) -> Result<Vec<Cross>, RunError> {
        let mut crosses = Vec::new();
        if let Some(e) = &self.emu {
            let rep_cross = sc.rep_cross(seed);
            let targets = std::mem::take(&mut self.cross_targets);
            for (i, (c, t)) in rep_cross.iter().zip(targets).enumerate() {
                crosses.push(Cross::start(c, e.listen_addrs()[nflows + i], t, t0)?);
            }
        }
        Ok(crosses)
    }

    /// Stops the link (the emulator, or netem's sampler and then its
    /// namespaces); the emulator's report, if it ran.
    pub(super) fn stop(self) -> Result<Option<EmuReport>, RunError> {
        let emu_report = match self.emu {
            Some(e) => Some(e.stop()?),
            None => None,
        };
        if let Some(s) = self.sampler {
            s.stop()?;
        }
        drop(self.netem);
        drop(self.paths);
        Ok(emu_report)
    }
}

/// Stops cross-traffic sources; bytes sent and received by each.
pub(super) fn stop_cross(crosses: Vec<Cross>) -> Vec<(u64, u64)> {
    crosses
        .into_iter()
        .map(|c| {
            let k = c.stop();
            (
                k.sent.load(Ordering::Relaxed),
                k.received.load(Ordering::Relaxed),
            )
        })
        .collect()
}
