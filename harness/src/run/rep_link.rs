//! The link of one repetition on `emu` or `netem`: kernel qdiscs on veth
//! between namespaces (set up before the servers, which run inside them),
//! or the userspace emulator in front of the servers (started once they
//! listen): the UDP relay, with one route per flow and per cross-traffic
//! source, or in IP mode ([`EmuMode::Ip`]) TUN devices between a client and
//! a server namespace (made before the servers, which run inside, like
//! netem's), with one server address per flow.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::endpoints::Server;
use super::{RunConfig, RunError};
use crate::cross::{self, Cross};
use crate::emu::tun::{self, TunNet};
use crate::emu::{EmuConfig, EmuMode, EmuReport, Emulator, Forward};
use crate::guest_router::{GuestLink, GuestSampler};
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
    /// IP mode's namespaces and devices.
    tun: Option<TunNet>,
    /// netem in the guest router (a host without netem).
    guest: Option<GuestLink>,
}

/// The link while the flows run.
pub(super) struct RepLink {
    netem: Option<Arc<NetemLink>>,
    paths: Option<NetemPaths>,
    emu: Option<Emulator>,
    sampler: Option<crate::netem::Sampler>,
    /// Where the emulator's cross-traffic routes lead (emu only).
    cross_targets: Vec<UdpSocket>,
    /// IP mode's namespaces (removed after the emulator stops) and where
    /// its record goes (`rep-N/emu-ip.json`).
    tun: Option<(TunNet, std::path::PathBuf)>,
    /// netem in the guest router.
    guest: Option<GuestRep>,
}

/// A repetition's link in the guest router while the flows run.
struct GuestRep {
    link: GuestLink,
    sampler: GuestSampler,
    /// The guest's CPU counters when the flows started.
    cpu0: Option<super::cpu::CpuTimes>,
    /// Where its interface counters go (`guest-counters.txt`).
    counters: std::path::PathBuf,
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
        let (mut netem, mut paths, mut tun, mut guest) = (None, None, None, None);
        let guest_router = cfg.backend == Backend::Netem
            && cfg.netem_router.unwrap_or_else(crate::guest_router::wanted);
        if !guest_router {
            // A Linux TCP algorithm only the user-mode Linux guest has
            // (the scenario accepts it as root) runs in the guest router.
            let host = crate::scenario::tcp::this_kernel();
            for (i, (_, f)) in sc.rep_flows(seed).iter().enumerate() {
                if let Some(name) = f.tcp_cc().filter(|n| !host.has(n)) {
                    return Err(RunError::Unsupported(format!(
                        "flow {i} (`{}`): this host's kernel ({}) has no TCP congestion control `{name}`; the user-mode Linux guest's has, and runs such a flow's endpoints on a netem link: --link netem on a host without netem (CCLAB_NETEM_ROUTER=guest on one with), or --vm --link netem",
                        f.cc, host.release
                    )));
                }
            }
        }
        if cfg.backend == Backend::Emu && cfg.emu_mode == EmuMode::Ip {
            let t = TunNet::create(sc.rep_flows(seed).len())?;
            // Every `ip` command that built it, one per line.
            let lines: Vec<String> = t.commands.iter().map(|c| c.join(" ") + "\n").collect();
            std::fs::write(dir.join("netns-commands.txt"), lines.concat())?;
            tun = Some(t);
        }
        if guest_router {
            let g = crate::guest_router::setup(sc, seed, dir, !cfg.quiet)?;
            // Every command that built it, host and guest, one per line.
            let lines: Vec<String> = g.commands.iter().map(|c| c.clone() + "\n").collect();
            std::fs::write(dir.join("netns-commands.txt"), lines.concat())?;
            guest = Some(g);
        } else if cfg.backend == Backend::Netem && sc.has_paths() {
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
        Ok(PreparedLink {
            spec,
            netem,
            paths,
            tun,
            guest,
        })
    }

    /// On netem and in the emulator's IP mode, where each of the `nflows`
    /// flows' endpoints run (flow `i`'s server at its own address in IP
    /// mode).
    pub(super) fn places(&self, nflows: usize) -> Option<Vec<Place>> {
        if let Some(g) = &self.guest {
            return Some(g.places.clone());
        }
        if let Some(p) = &self.paths {
            return Some(p.flows.clone());
        }
        if let Some(t) = &self.tun {
            return Some(
                (0..nflows)
                    .map(|i| Place {
                        client_ns: t.client_ns.clone(),
                        server_ns: t.server_ns.clone(),
                        server_ip: tun::server_ip(i),
                    })
                    .collect(),
            );
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
    /// then one route per cross-traffic source (in IP mode, server `i` is
    /// at route `i`'s address already).
    pub(super) fn start(
        self,
        sc: &Scenario,
        cfg: &RunConfig,
        servers: &[Server],
        dir: &Path,
    ) -> Result<RepLink, RunError> {
        let samples = dir.join("bottleneck-samples.jsonl");
        if let Some(g) = self.guest {
            let files = if sc.has_paths() {
                let topo = sc.topology();
                (0..topo.links.len())
                    .map(|i| {
                        crate::bottleneck::link_dir(dir, &topo, i).join("bottleneck-samples.jsonl")
                    })
                    .collect()
            } else {
                vec![samples]
            };
            let sampler = g.start_sampler(crate::guest_router::SAMPLE_INTERVAL, files)?;
            let cpu0 = g.guest_cpu().and_then(|s| super::cpu::CpuTimes::parse(&s));
            return Ok(RepLink {
                netem: None,
                paths: None,
                emu: None,
                sampler: None,
                cross_targets: Vec::new(),
                tun: None,
                guest: Some(GuestRep {
                    link: g,
                    sampler,
                    cpu0,
                    counters: dir.join("guest-counters.txt"),
                }),
            });
        }
        if let Some(n) = &self.netem {
            let sampler = n.start_sampler(Duration::from_millis(20), &samples)?;
            return Ok(RepLink {
                netem: self.netem,
                paths: None,
                emu: None,
                sampler: Some(sampler),
                cross_targets: Vec::new(),
                tun: None,
                guest: None,
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
                tun: None,
                guest: None,
            });
        }
        if let Some(mut t) = self.tun {
            let ec = emu_config(self.spec, sc, cfg, dir, Vec::new());
            let emu = Emulator::start_ip(ec, &mut t)?;
            return Ok(RepLink {
                netem: None,
                paths: None,
                emu: Some(emu),
                sampler: None,
                cross_targets: Vec::new(),
                tun: Some((t, dir.join("emu-ip.json"))),
                guest: None,
            });
        }
        let mut routes: Vec<Forward> = servers.iter().map(|s| route_to(s.addr)).collect();
        let mut cross_targets = Vec::new();
        for _ in &sc.cross {
            let t = cross::target_socket()?;
            routes.push(route_to(t.local_addr()?));
            cross_targets.push(t);
        }
        let ec = emu_config(self.spec, sc, cfg, dir, routes);
        Ok(RepLink {
            netem: None,
            paths: None,
            emu: Some(Emulator::start(ec)?),
            sampler: None,
            cross_targets,
            tun: None,
            guest: None,
        })
    }
}

/// The emulator's configuration for `sc` on `spec`, logging into `dir`:
/// route (class) `i` is flow `i`, then one per cross source.
fn emu_config(
    spec: LinkSpec,
    sc: &Scenario,
    cfg: &RunConfig,
    dir: &Path,
    routes: Vec<Forward>,
) -> EmuConfig {
    let mut ec = EmuConfig::new(spec, routes);
    ec.log_dir = Some(dir.to_path_buf());
    ec.per_packet_log = cfg.per_packet_log;
    ec.class_weights = sc.class_weights();
    // Checked when the run started (`check_emu_mode`).
    ec.wake_gap = crate::emu::wake_gap_from_env().unwrap_or(crate::emu::DEFAULT_WAKE_GAP);
    ec.priority = crate::emu::Priority::from_env().unwrap_or(crate::emu::DEFAULT_PRIORITY);
    if sc.has_paths() {
        let topo = sc.topology();
        ec.topology = Some((topo.with_seed(ec.link.seed), sc.routes()));
    }
    ec
}

/// An emulator route to `target`, listening on a free local port.
fn route_to(target: SocketAddr) -> Forward {
    Forward {
        listen: "127.0.0.1:0".parse().unwrap(),
        target,
    }
}

impl RepLink {
    /// On the guest router, the share of the guest's CPU that was busy
    /// since the flows started.
    pub(super) fn guest_busy(&self) -> Option<f64> {
        let g = self.guest.as_ref()?;
        g.cpu0
            .as_ref()?
            .busy_share(&super::cpu::CpuTimes::parse(&g.link.guest_cpu()?)?)
    }

    /// Where flow `i`'s client sends: the emulator's route to its server,
    /// or (netem) the server itself.
    pub(super) fn addr_of(&self, servers: &[Server], i: usize) -> SocketAddr {
        match &self.emu {
            Some(e) if self.tun.is_none() => e.listen_addrs()[i],
            _ => servers[i].addr,
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
        // IP mode has none (refused by `run::check_emu_mode`).
        if let (Some(e), None) = (&self.emu, &self.tun) {
            let rep_cross = sc.rep_cross(seed);
            let targets = std::mem::take(&mut self.cross_targets);
            for (i, (c, t)) in rep_cross.iter().zip(targets).enumerate() {
                crosses.push(Cross::start(c, e.listen_addrs()[nflows + i], t, t0)?);
            }
        }
        Ok(crosses)
    }

    /// Stops the link (the emulator, or netem's sampler and then its
    /// namespaces; in IP mode the emulator, then its namespaces, with
    /// `emu-ip.json` written); the emulator's report, if it ran.
    pub(super) fn stop(self) -> Result<Option<EmuReport>, RunError> {
        let emu_report = match self.emu {
            Some(e) => Some(e.stop()?),
            None => None,
        };
        if let (Some((t, file)), Some(r)) = (&self.tun, &emu_report) {
            write_ip_record(file, t, r)?;
        }
        drop(self.tun);
        if let Some(s) = self.sampler {
            s.stop()?;
        }
        if let Some(g) = self.guest {
            g.sampler.stop()?;
            g.link.record_counters(&g.counters)?;
        }
        drop(self.netem);
        drop(self.paths);
        Ok(emu_report)
    }
}

/// `emu-ip.json`: where IP mode's endpoints were and what it saw besides
/// the link's counters ([`crate::emu::IpStats`]).
fn write_ip_record(file: &Path, t: &TunNet, r: &EmuReport) -> Result<(), RunError> {
    let record = serde_json::json!({
        "mode": EmuMode::Ip.as_str(),
        "client_ns": t.client_ns,
        "server_ns": t.server_ns,
        "client_ip": tun::CLIENT_IP.to_string(),
        "server_ips": (0..t.routes).map(|i| tun::server_ip(i).to_string()).collect::<Vec<_>>(),
        "uncharged_bytes_per_packet": crate::emu::tunnel::UNCHARGED_BYTES,
        "flows_seen": r.flows,
        "cpu_s": r.cpu_s,
        "duration_s": r.duration_s,
        "lateness": r.lateness,
        "send_errors": r.send_errors,
        "ip": r.ip,
    });
    let text = serde_json::to_string_pretty(&record).map_err(std::io::Error::from)?;
    std::fs::write(file, text + "\n")?;
    Ok(())
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
