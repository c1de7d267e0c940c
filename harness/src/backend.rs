//! What each backend can run, and how a run's link is built, decided in
//! one place.
//!
//! ```text
//! link.backend = auto | emu | netem | sim        (the scenario, or --link)
//!        │ resolve / resolve_scenario            auto: netem where this host can, else emu
//!        ▼
//!   emu │ netem │ sim                            check, check_emu_mode: refused before
//!        │                                        anything starts, naming why
//!        ▼
//!   LinkKind::of(scenario, run config)           per repetition (run::rep_link builds it)
//!     Simulated │ EmuRelay │ EmuIp │ Netem │ GuestRouter
//! ```
//!
//! What the backend alone decides (whether it runs real processes, how
//! many runs go at once, whether it can carry a Linux TCP flow) sits on
//! [`Backend`] itself, in link-model, where the scenario parser reads it
//! too.

use crate::emu::EmuMode;
use crate::link::{Backend, LinkSpec};
use crate::scenario::Scenario;

/// Why a backend cannot run a scenario here.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The backend cannot run what the scenario asks for.
    #[error("{0}")]
    Unsupported(String),
    /// The kernel's qdiscs cannot build this link.
    #[error(transparent)]
    Netem(#[from] crate::netem::NetemError),
    /// The emulator's IP mode cannot run here.
    #[error(transparent)]
    Emu(#[from] crate::emu::EmuError),
}

/// The backend a link runs on: `auto` decided (netem where this host is
/// root, its kernel has netem and the link needs nothing only the
/// emulator has, else the emulator), `netem` checked (root, and netem
/// where the link needs it: in the guest router when this kernel lacks
/// it). The error says what is missing and what to do instead.
pub fn resolve(spec: &LinkSpec) -> Result<Backend, String> {
    match spec.backend {
        Backend::Emu => Ok(Backend::Emu),
        Backend::Sim => Ok(Backend::Sim),
        Backend::Netem => {
            if !crate::netns::is_root() {
                return Err("link.backend = netem needs root (network namespaces and tc); run as root, or use --link emu".into());
            }
            let needs =
                crate::netem::needs_netem(&spec.up) || crate::netem::needs_netem(&spec.down);
            if needs && !crate::netem::probe().netem && !crate::guest_router::wanted() {
                return Err(format!(
                    "{}\n  or run it on a kernel that has netem, in a throwaway guest: add --vm to this command (or: cclab vm -- cclab run ...)",
                    crate::netem::NetemError::MissingQdisc {
                        qdisc: "netem".into(),
                    }
                ));
            }
            Ok(Backend::Netem)
        }
        Backend::Auto => Ok(
            if crate::netns::is_root() && crate::netem::probe().netem && kernel_can(spec) {
                Backend::Netem
            } else {
                Backend::Emu
            },
        ),
    }
}

/// Whether kernel qdiscs can be this link: no rate trace, no class
/// scheduler (the emulator's alone).
fn kernel_can(spec: &LinkSpec) -> bool {
    spec.up.trace.is_none()
        && spec.down.trace.is_none()
        && crate::netem::unsupported_sched(spec).is_none()
}

/// The backend a scenario runs on: as [`resolve`] resolves its link,
/// except that `auto` picks the emulator when netem could not run the
/// scenario (cross traffic, a link of several that the kernel cannot
/// be); and an explicit backend that cannot run it is refused, naming
/// why ([`check`]).
pub fn resolve_scenario(sc: &Scenario) -> Result<Backend, String> {
    let backend = match sc.link.backend {
        Backend::Auto => {
            if resolve(&sc.link)? == Backend::Netem
                && sc.topology().links.iter().all(|l| kernel_can(&l.spec))
                && check(sc, Backend::Netem).is_ok()
            {
                Backend::Netem
            } else {
                Backend::Emu
            }
        }
        _ => resolve(&sc.link)?,
    };
    check(sc, backend).map_err(|e| e.to_string())?;
    Ok(backend)
}

/// Whether `backend` can run `sc`, checked before anything starts: a
/// Linux TCP flow needs real hosts (refused on sim, which a tune or a
/// reproduction forces, before the simulator sees its name); netem has no
/// cross traffic, and builds several links only as a chain of namespaces
/// ([`crate::netem::net::check`]).
pub fn check(sc: &Scenario, backend: Backend) -> Result<(), BackendError> {
    sc.check_tcp_backend(backend)
        .map_err(|e| BackendError::Unsupported(e.to_string()))?;
    if backend != Backend::Netem {
        return Ok(());
    }
    if !sc.cross.is_empty() {
        return Err(BackendError::Unsupported(
            "cross traffic ([[cross]]) runs through the userspace emulator, and the netem backend has none: run it on --link emu or --link sim".into(),
        ));
    }
    if sc.has_paths() {
        crate::netem::net::check(&sc.topology(), &sc.flow_routes())?;
    }
    Ok(())
}

/// The emulator's mode for `sc` when none is asked for: IP mode for a
/// scenario with Linux TCP flows (the UDP relay carries none), the relay
/// otherwise (and on other backends, which ignore it).
pub fn default_emu_mode(sc: &Scenario, backend: Backend) -> EmuMode {
    if backend == Backend::Emu && sc.flows.iter().any(|f| f.tcp_cc().is_some()) {
        EmuMode::Ip
    } else {
        EmuMode::Relay
    }
}

/// Whether the emulator can run `sc` in `mode` here, checked before
/// anything starts: its environment knobs parse; IP mode needs root,
/// `/dev/net/tun` and `ip` ([`crate::emu::tun::check`]), and has no
/// cross traffic yet; the relay runs anywhere. Other backends ignore the
/// mode.
pub fn check_emu_mode(sc: &Scenario, backend: Backend, mode: EmuMode) -> Result<(), BackendError> {
    if backend != Backend::Emu {
        return Ok(());
    }
    crate::emu::wake_gap_from_env().map_err(BackendError::Unsupported)?;
    crate::emu::Priority::from_env().map_err(BackendError::Unsupported)?;
    if mode != EmuMode::Ip {
        return Ok(());
    }
    if !sc.cross.is_empty() {
        return Err(BackendError::Unsupported(
            "cross traffic ([[cross]]) is not supported by --emu-mode ip yet: run the scenario with --emu-mode relay".into(),
        ));
    }
    let flows: usize = sc.flows.iter().map(|f| f.count as usize).sum();
    if flows > crate::emu::tun::MAX_ROUTES {
        return Err(BackendError::Unsupported(format!(
            "--emu-mode ip takes at most {} flows, not {flows}",
            crate::emu::tun::MAX_ROUTES
        )));
    }
    crate::emu::tun::check()?;
    Ok(())
}

/// How one repetition's link is built.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkKind {
    /// In-process, in virtual time (`run::simulated`).
    Simulated,
    /// The userspace emulator relaying UDP, one route per flow and per
    /// cross-traffic source.
    EmuRelay,
    /// The userspace emulator between TUN devices of a client and a
    /// server namespace (any IPv4 traffic, Linux TCP included).
    EmuIp,
    /// This kernel's qdiscs on the scenario's topology
    /// ([`crate::netem::KernelNet`]).
    Netem,
    /// Kernel qdiscs in the user-mode Linux guest as the router, the
    /// endpoints in host namespaces ([`crate::guest_router`]).
    GuestRouter,
}

impl LinkKind {
    /// How `sc`'s link is built on `backend` (resolved) at the repetition
    /// with `seed`: on emu in `emu_mode`; on netem in the guest router as
    /// `netem_router` says (`None`: as [`crate::guest_router::wanted`]
    /// decides). Where the endpoints run on this host (emu, this kernel's
    /// netem), a Linux TCP flow whose algorithm only the guest's kernel
    /// has is refused here, naming how to run it.
    pub fn of(
        sc: &Scenario,
        backend: Backend,
        emu_mode: EmuMode,
        netem_router: Option<bool>,
        seed: u64,
    ) -> Result<LinkKind, BackendError> {
        let kind = match backend {
            Backend::Sim => LinkKind::Simulated,
            Backend::Emu | Backend::Auto => match emu_mode {
                EmuMode::Ip => LinkKind::EmuIp,
                EmuMode::Relay => LinkKind::EmuRelay,
            },
            Backend::Netem if netem_router.unwrap_or_else(crate::guest_router::wanted) => {
                LinkKind::GuestRouter
            }
            Backend::Netem => LinkKind::Netem,
        };
        // Endpoints on this host need its kernel to have their TCP
        // algorithm; only the guest router runs them in the guest.
        if matches!(kind, LinkKind::EmuRelay | LinkKind::EmuIp | LinkKind::Netem) {
            let host = crate::scenario::tcp::this_kernel();
            for (i, (_, f)) in sc.rep_flows(seed).iter().enumerate() {
                if let Some(name) = f.tcp_cc().filter(|n| !host.has(n)) {
                    return Err(BackendError::Unsupported(format!(
                        "flow {i} (`{}`): this host's kernel ({}) has no TCP congestion control `{name}`; the user-mode Linux guest's has, and runs such a flow's endpoints on a netem link: --link netem on a host without netem (CCLAB_NETEM_ROUTER=guest on one with), or --vm --link netem",
                        f.cc, host.release
                    )));
                }
            }
        }
        Ok(kind)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(text: &str) -> Scenario {
        Scenario::parse(text, "test", std::path::Path::new(".")).unwrap()
    }

    #[test]
    fn netem_refuses_cross_traffic_and_sim_refuses_tcp_flows() {
        let sc = scenario(
            "name = \"x\"\n[link]\nrate = \"10mbit\"\nrtt = \"20ms\"\n[[flows]]\ncc = \"newreno\"\n[[cross]]\nrate = \"1mbit\"\n",
        );
        let e = check(&sc, Backend::Netem).unwrap_err().to_string();
        assert!(e.contains("cross traffic"), "{e}");
        assert!(check(&sc, Backend::Emu).is_ok());
        let tcp = scenario(
            "name = \"x\"\n[link]\nrate = \"10mbit\"\nrtt = \"20ms\"\n[[flows]]\ncc = \"tcp:cubic\"\n",
        );
        let e = check(&tcp, Backend::Sim).unwrap_err().to_string();
        assert!(e.contains("Linux TCP flow"), "{e}");
        assert_eq!(default_emu_mode(&tcp, Backend::Emu), EmuMode::Ip);
        assert_eq!(default_emu_mode(&tcp, Backend::Netem), EmuMode::Relay);
        assert_eq!(default_emu_mode(&sc, Backend::Emu), EmuMode::Relay);
    }

    #[test]
    fn each_backend_and_mode_has_its_link() {
        let sc = scenario("name = \"x\"\n[link]\nrate = \"10mbit\"\nrtt = \"20ms\"\n[[flows]]\ncc = \"newreno\"\n");
        let kind = |b, m, r| LinkKind::of(&sc, b, m, r, 1).unwrap();
        let (relay, ip) = (EmuMode::Relay, EmuMode::Ip);
        assert_eq!(kind(Backend::Sim, relay, None), LinkKind::Simulated);
        assert_eq!(kind(Backend::Emu, relay, None), LinkKind::EmuRelay);
        assert_eq!(kind(Backend::Emu, ip, None), LinkKind::EmuIp);
        assert_eq!(
            kind(Backend::Netem, relay, Some(true)),
            LinkKind::GuestRouter
        );
        assert_eq!(kind(Backend::Netem, relay, Some(false)), LinkKind::Netem);
        let paths = scenario(
            "name = \"x\"\n[[links]]\nname = \"a\"\nrate = \"10mbit\"\nrtt = \"20ms\"\n[[links]]\nname = \"b\"\nrate = \"10mbit\"\nrtt = \"20ms\"\n[[flows]]\ncc = \"newreno\"\npath = [\"a\", \"b\"]\n",
        );
        assert_eq!(
            LinkKind::of(&paths, Backend::Netem, relay, Some(false), 1).unwrap(),
            LinkKind::Netem
        );
    }

    /// A Linux TCP algorithm this host's kernel lacks is refused wherever
    /// the endpoints would run on this host (emu as netem), and accepted
    /// for the guest router, which runs them in the guest.
    #[test]
    fn a_tcp_algorithm_this_kernel_lacks_runs_only_in_the_guest() {
        let host = crate::scenario::tcp::this_kernel();
        let Some(alg) = ["vegas", "westwood", "scalable", "illinois"]
            .into_iter()
            .find(|a| !host.has(a))
        else {
            eprintln!("SKIPPED: this kernel has every algorithm tried");
            return;
        };
        let Ok(sc) = Scenario::parse(
            &format!("name = \"x\"\n[link]\nrate = \"10mbit\"\nrtt = \"20ms\"\n[[flows]]\ncc = \"tcp:{alg}\"\n"),
            "test",
            std::path::Path::new("."),
        ) else {
            eprintln!("SKIPPED: the scenario refuses tcp:{alg} here (not root)");
            return;
        };
        for (b, m, r) in [
            (Backend::Emu, EmuMode::Ip, None),
            (Backend::Emu, EmuMode::Relay, None),
            (Backend::Netem, EmuMode::Relay, Some(false)),
        ] {
            let e = LinkKind::of(&sc, b, m, r, 1).unwrap_err().to_string();
            assert!(
                e.contains(alg) && e.contains("--link netem"),
                "{b:?} {m:?}: {e}"
            );
        }
        assert_eq!(
            LinkKind::of(&sc, Backend::Netem, EmuMode::Relay, Some(true), 1).unwrap(),
            LinkKind::GuestRouter
        );
    }

    #[test]
    fn the_backend_alone_decides_jobs_and_tcp() {
        assert_eq!(Backend::Sim.default_jobs(8), 8);
        assert_eq!(Backend::Emu.default_jobs(8), 1);
        assert_eq!(Backend::Netem.default_jobs(0), 1);
        assert_eq!(Backend::Sim.default_jobs(0), 1);
        assert!(Backend::Sim.tcp_flow_problem("tcp:cubic").is_some());
        assert!(Backend::Emu.tcp_flow_problem("tcp:cubic").is_none());
        assert!(!Backend::Sim.real_time() && Backend::Netem.real_time());
    }
}
