//! The link of one repetition on `emu` or `netem`: kernel qdiscs on veth
//! between namespaces (set up before the servers, which run inside them),
//! or the userspace emulator in front of the servers (started once they
//! listen): the UDP relay, with one route per flow and per cross-traffic
//! source, or in IP mode ([`EmuMode::Ip`]) TUN devices between a client and
//! a server namespace (made before the servers, which run inside, like
//! netem's), with one server address per flow.

use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::endpoints::Server;
use super::{RunConfig, RunError};
use crate::backend::LinkKind;
use crate::cross::{self, Cross};
use crate::emu::tun::{self, TunNet};
use crate::emu::{EmuConfig, EmuMode, EmuReport, Emulator, Forward};
use crate::guest_router::{GuestLink, GuestSampler};
use crate::link::LinkSpec;
use crate::netem::{KernelNet, Place};
use crate::scenario::Scenario;

/// The link before the servers start: the repetition's link description,
/// and what was built for it ([`LinkKind`] decides which).
pub(super) struct PreparedLink {
    spec: LinkSpec,
    built: Built,
}

/// What a repetition's link needs before its servers start.
enum Built {
    /// Nothing: the relay starts once the servers listen.
    EmuRelay,
    /// IP mode's namespaces and devices (the servers run inside).
    EmuIp(TunNet),
    /// This kernel's qdiscs on the scenario's links.
    Netem(KernelNet),
    /// netem in the guest router (a host without netem).
    Guest(GuestLink),
}

/// The link while the flows run.
pub(super) enum RepLink {
    /// The emulator's UDP relay; where its cross-traffic routes lead.
    EmuRelay {
        emu: Emulator,
        cross_targets: Vec<UdpSocket>,
    },
    /// The emulator in IP mode; its namespaces (removed after the
    /// emulator stops) and where its record goes (`rep-N/emu-ip.json`).
    EmuIp {
        emu: Emulator,
        tun: TunNet,
        record: PathBuf,
    },
    /// This kernel's qdiscs and their sampler.
    Netem {
        link: KernelNet,
        sampler: crate::netem::Sampler,
    },
    /// netem in the guest router.
    Guest(GuestRep),
}

/// A repetition's link in the guest router while the flows run.
pub(super) struct GuestRep {
    link: GuestLink,
    sampler: GuestSampler,
    /// The guest's CPU counters when the flows started.
    cpu0: Option<super::cpu::CpuTimes>,
    /// Where its interface counters go (`guest-counters.txt`).
    counters: PathBuf,
}

/// Writes the commands that built a link, one per line, to `dir/file`.
fn record(dir: &Path, file: &str, lines: impl Iterator<Item = String>) -> std::io::Result<()> {
    let text: String = lines.map(|l| l + "\n").collect();
    std::fs::write(dir.join(file), text)
}

impl PreparedLink {
    /// The scenario's link with the repetition's seed, built as
    /// [`LinkKind::of`] decides, with the commands it took in
    /// `netns-commands.txt`.
    pub(super) fn prepare(
        sc: &Scenario,
        cfg: &RunConfig,
        seed: u64,
        dir: &Path,
    ) -> Result<PreparedLink, RunError> {
        let mut spec = sc.link.clone();
        spec.seed = seed;
        let built = match LinkKind::of(sc, cfg.backend, cfg.emu_mode, cfg.netem_router, seed)? {
            LinkKind::Simulated => {
                unreachable!("a simulated run builds no link of processes")
            }
            LinkKind::EmuRelay => Built::EmuRelay,
            LinkKind::EmuIp => {
                let t = TunNet::create(sc.rep_flows(seed).len())?;
                record(
                    dir,
                    "netns-commands.txt",
                    t.commands.iter().map(|c| c.join(" ")),
                )?;
                Built::EmuIp(t)
            }
            LinkKind::GuestRouter => {
                // Every command that built it, host and guest.
                let g = crate::guest_router::setup(sc, seed, dir, !cfg.quiet)?;
                record(dir, "netns-commands.txt", g.commands.iter().cloned())?;
                Built::Guest(g)
            }
            LinkKind::Netem => {
                let n = KernelNet::setup(
                    &sc.topology().with_seed(seed),
                    &sc.flow_routes(),
                    &crate::netem::probe(),
                    1500,
                    true,
                )?;
                record(
                    dir,
                    "netns-commands.txt",
                    n.commands.iter().map(|c| c.join(" ")),
                )?;
                Built::Netem(n)
            }
        };
        Ok(PreparedLink { spec, built })
    }

    /// On netem and in the emulator's IP mode, where each of the `nflows`
    /// flows' endpoints run (flow `i`'s server at its own address in IP
    /// mode); `None` on the relay (the endpoints run here).
    pub(super) fn places(&self, nflows: usize) -> Option<Vec<Place>> {
        match &self.built {
            Built::EmuRelay => None,
            Built::Guest(g) => Some(g.places.clone()),
            Built::Netem(n) => Some(n.flows.clone()),
            Built::EmuIp(t) => Some(
                (0..nflows)
                    .map(|i| Place {
                        client_ns: t.client_ns.clone(),
                        server_ns: t.server_ns.clone(),
                        server_ip: tun::server_ip(i),
                    })
                    .collect(),
            ),
        }
    }

    /// Starts what carries the flows to `servers`: on netem the bottleneck
    /// sampler (one file per link); otherwise the emulator, with route `i`
    /// to server `i` and then one route per cross-traffic source (in IP
    /// mode, server `i` is at route `i`'s address already).
    pub(super) fn start(
        self,
        sc: &Scenario,
        cfg: &RunConfig,
        servers: &[Server],
        dir: &Path,
    ) -> Result<RepLink, RunError> {
        let samples = |links: usize| -> Vec<PathBuf> {
            if sc.has_paths() {
                let topo = sc.topology();
                (0..links)
                    .map(|i| {
                        crate::bottleneck::link_dir(dir, &topo, i).join("bottleneck-samples.jsonl")
                    })
                    .collect()
            } else {
                vec![dir.join("bottleneck-samples.jsonl")]
            }
        };
        let every = Duration::from_millis(20);
        Ok(match self.built {
            Built::Guest(g) => {
                let files = samples(sc.topology().links.len());
                let sampler = g.start_sampler(crate::guest_router::SAMPLE_INTERVAL, files)?;
                let cpu0 = g.guest_cpu().and_then(|s| super::cpu::CpuTimes::parse(&s));
                RepLink::Guest(GuestRep {
                    link: g,
                    sampler,
                    cpu0,
                    counters: dir.join("guest-counters.txt"),
                })
            }
            Built::Netem(n) => {
                let sampler = n.start_sampler(every, &samples(n.topology.links.len()))?;
                RepLink::Netem { link: n, sampler }
            }
            Built::EmuIp(mut t) => {
                let ec = emu_config(self.spec, sc, cfg, dir, Vec::new());
                let emu = Emulator::start_ip(ec, &mut t)?;
                RepLink::EmuIp {
                    emu,
                    tun: t,
                    record: dir.join("emu-ip.json"),
                }
            }
            Built::EmuRelay => {
                let mut routes: Vec<Forward> = servers.iter().map(|s| route_to(s.addr)).collect();
                let mut cross_targets = Vec::new();
                for _ in &sc.cross {
                    let t = cross::target_socket()?;
                    routes.push(route_to(t.local_addr()?));
                    cross_targets.push(t);
                }
                let ec = emu_config(self.spec, sc, cfg, dir, routes);
                RepLink::EmuRelay {
                    emu: Emulator::start(ec)?,
                    cross_targets,
                }
            }
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
        let RepLink::Guest(g) = self else {
            return None;
        };
        g.cpu0
            .as_ref()?
            .busy_share(&super::cpu::CpuTimes::parse(&g.link.guest_cpu()?)?)
    }

    /// Where flow `i`'s client sends: the relay's route to its server, or
    /// the server itself.
    pub(super) fn addr_of(&self, servers: &[Server], i: usize) -> SocketAddr {
        match self {
            RepLink::EmuRelay { emu, .. } => emu.listen_addrs()[i],
            _ => servers[i].addr,
        }
    }

    /// Starts the cross traffic through the relay (no other link carries
    /// any: netem refuses it in `backend::check`, IP mode in
    /// `backend::check_emu_mode`). `nflows` routes come first; `t0` is the
    /// repetition's start.
    pub(super) fn start_cross(
        &mut self,
        sc: &Scenario,
        seed: u64,
        nflows: usize,
        t0: Instant,
    ) -> Result<Vec<Cross>, RunError> {
        let mut crosses = Vec::new();
        if let RepLink::EmuRelay { emu, cross_targets } = self {
            let rep_cross = sc.rep_cross(seed);
            let targets = std::mem::take(cross_targets);
            for (i, (c, t)) in rep_cross.iter().zip(targets).enumerate() {
                crosses.push(Cross::start(c, emu.listen_addrs()[nflows + i], t, t0)?);
            }
        }
        Ok(crosses)
    }

    /// Stops the link: the emulator (in IP mode, then its namespaces,
    /// with `emu-ip.json` written), or the sampler and then the
    /// namespaces (the guest's interface counters recorded first); the
    /// emulator's report, if it ran.
    pub(super) fn stop(self) -> Result<Option<EmuReport>, RunError> {
        match self {
            RepLink::EmuRelay { emu, .. } => Ok(Some(emu.stop()?)),
            RepLink::EmuIp { emu, tun, record } => {
                let r = emu.stop()?;
                write_ip_record(&record, &tun, &r)?;
                drop(tun);
                Ok(Some(r))
            }
            RepLink::Netem { link, sampler } => {
                sampler.stop()?;
                drop(link);
                Ok(None)
            }
            RepLink::Guest(g) => {
                g.sampler.stop()?;
                g.link.record_counters(&g.counters)?;
                Ok(None)
            }
        }
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
